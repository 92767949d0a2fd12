"""A failed MP exchange never reads as zero hits; a server's release is compared where it can be
learned (its HTTP front end's /lmc_version). Fakes generated from the shipped matrix, and a
stdlib HTTP server on 127.0.0.1 standing in for the front end. No LMCache needed."""

from __future__ import annotations

import http.server
import json
import pickle
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from lmcache_compat import Capability, MPConfig, MPSchedulerAdapter, MPWorkerAdapter
from lmcache_compat.errors import (
    LMCacheCompatError,
    MPServerError,
    MPVersionMismatchError,
    NotAFrontEndError,
)
from lmcache_compat.mp.server import (
    ROUTE,
    check_server_releases,
    describe_servers,
    fetch_release,
    same_release,
    server_release,
)
from lmcache_compat.report.doctor.text import format_mp_servers
from lmcache_compat.upstream.matrix import load_matrix
from tools.generated_fakes import fake_module, instantiate

MATRIX = load_matrix()
MP_VERSIONS = [r.version for r in MATRIX.rows if r.has(Capability.MP_ADAPTERS)]
WITH_HEALTH = [v for v in MP_VERSIONS if MATRIX.row(v).has(Capability.MP_HEALTH_CHECK)]
WITHOUT_HEALTH = [v for v in MP_VERSIONS if v not in WITH_HEALTH]
CTX = object()


# --- fakes -----------------------------------------------------------------------------------


def _scheduler(version: str, result: Any = 0, healthy: bool = True) -> Any:
    """A fake scheduler of ``version`` whose check_lookup_result returns ``result`` and whose
    health property (where the release has one) says ``healthy`` and counts its reads."""
    base = fake_module(MATRIX.row(version)).LMCacheMPSchedulerAdapter
    namespace: dict[str, Any] = {"health_reads": 0}
    if "is_healthy" in MATRIX.row(version).properties.get(base.__name__, ()):

        def is_healthy(self: Any) -> bool:
            type(self).health_reads += 1
            return healthy

        namespace["is_healthy"] = property(is_healthy)
    cls = type(base.__name__, (base,), namespace)
    cls.__module__ = base.__module__
    target = instantiate(cls)
    target._called = lambda name, *a, **k: result  # type: ignore[method-assign]
    return target


@pytest.mark.parametrize("version", WITH_HEALTH)
def test_zero_from_an_unhealthy_server_raises(version: str) -> None:
    target = _scheduler(version, result=0, healthy=False)
    adapter = MPSchedulerAdapter(target)
    with pytest.raises(MPServerError) as info:
        adapter.check_lookup_result("req-1")
    text = str(info.value)
    assert "check_lookup_result('req-1')" in text
    assert "not a cache miss" in text and "version mismatch" in text
    assert "wire format" in text and "Client LMCache" in text
    assert "HINT:" in text and "doctor --mp-server" in text and "http_urls" in text
    assert isinstance(info.value, LMCacheCompatError)


@pytest.mark.parametrize("version", WITH_HEALTH)
def test_a_healthy_zero_is_a_miss_and_hits_never_read_health(version: str) -> None:
    healthy_zero = _scheduler(version, result=0, healthy=True)
    assert MPSchedulerAdapter(healthy_zero).check_lookup_result("r") == 0
    assert type(healthy_zero).health_reads == 1
    for result in (256, None):  # a hit, or "not finished": returned at once
        target = _scheduler(version, result=result, healthy=False)
        adapter = MPSchedulerAdapter(target)
        assert adapter.check_lookup_result("r") == result
        assert type(target).health_reads == 0


@pytest.mark.parametrize("version", WITHOUT_HEALTH)
def test_without_health_the_release_cannot_tell_and_its_method_is_bound(version: str) -> None:
    """Before the health property, a lost reply cannot be told from a miss: the adapter binds
    the release's own method (documented: a lost reply stays None, or blocks; never 0)."""
    target = _scheduler(version, result=0)
    adapter = MPSchedulerAdapter(target)
    assert adapter.check_lookup_result == target.check_lookup_result
    assert adapter.check_lookup_result("r") == 0
    assert adapter.is_healthy() is True  # the documented fallback: health unknown
    assert "cannot tell a lost reply" in (MPSchedulerAdapter.__doc__ or "")


def test_engine_exceptions_propagate_unchanged() -> None:
    target = _scheduler("0.5.6")

    def boom(*args: Any, **kwargs: Any) -> Any:
        raise TimeoutError("the release's own")

    target._called = boom
    with pytest.raises(TimeoutError, match="the release's own"):
        MPSchedulerAdapter(target).check_lookup_result("r")


def test_the_error_pickles() -> None:
    err = MPVersionMismatchError("m", client="0.5.6", server="0.5.7rc2", url="tcp://h:1")
    again = pickle.loads(pickle.dumps(err))
    assert (again.client, again.server, again.url, str(again)) == (
        "0.5.6",
        "0.5.7rc2",
        "tcp://h:1",
        "m",
    )


# --- the HTTP front end ------------------------------------------------------------------------


class FrontEnd:
    """A loopback HTTP server answering ``routes[path] = (status, body bytes)``."""

    def __init__(self) -> None:
        self.routes: dict[str, tuple[int, bytes]] = {}
        routes = self.routes

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                status, body = routes.get(self.path, (404, b'{"detail":"Not Found"}'))
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def release(self, version: str) -> FrontEnd:
        self.routes[ROUTE] = (200, json.dumps(version).encode())
        return self

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def front() -> Iterator[FrontEnd]:
    f = FrontEnd()
    yield f
    f.close()


@pytest.fixture
def front2() -> Iterator[FrontEnd]:
    f = FrontEnd()
    yield f
    f.close()


def _dead_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


#: What every LMCache MP front end's ``GET /`` answers (0.4.1 ... 0.4.4: http_server.py's root()).
LMCACHE_ROOT = b'{"status": "ok", "service": "LMCache HTTP API"}'


def test_fetch_release(front: FrontEnd) -> None:
    front.routes["/"] = (200, LMCACHE_ROOT)
    assert fetch_release(front.url) is None  # no route: 404, an LMCache front end before 0.4.5
    front.release("0.5.6")
    assert fetch_release(front.url) == "0.5.6"
    assert fetch_release(front.url + "/") == "0.5.6"
    front.routes[ROUTE] = (200, b'""')  # LMCache without a version: unknown
    assert fetch_release(front.url) is None
    front.routes[ROUTE] = (200, b"0.5.6\n")  # not JSON: the text
    assert fetch_release(front.url) == "0.5.6"
    for status, body, match in (
        (200, b'{"version": "0.5.6"}', "not an LMCache MP front end"),
        (200, b"x" * 5000, "more than"),
        (500, b"oops", "HTTP 500"),
    ):
        front.routes[ROUTE] = (status, body)
        with pytest.raises(MPServerError, match=match):
            fetch_release(front.url)


@pytest.mark.parametrize(
    "root",
    [
        None,  # 404 everywhere: any web server
        (200, b"<html>It works!</html>"),
        (200, b'{"status": "ok"}'),
        (200, b'{"status": "ok", "service": "Some Other API"}'),
        (200, b'"LMCache HTTP API"'),
        (500, LMCACHE_ROOT),
    ],
)
def test_a_404_is_a_front_end_only_if_its_root_says_lmcache(
    front: FrontEnd, root: tuple[int, bytes] | None
) -> None:
    """LMCache 0.4.1 ... 0.4.4 answer 404 on /lmc_version: that is accepted (release unknown)
    only when ``GET /`` answers as their http_server.py does; any other 404 is not a front end."""
    if root is not None:
        front.routes["/"] = root
    with pytest.raises(NotAFrontEndError, match="HTTP 404") as info:
        fetch_release(front.url)
    assert "not an LMCache MP front end" in str(info.value)
    front.routes["/"] = (200, LMCACHE_ROOT)
    assert fetch_release(front.url) is None


def test_unreachable_or_not_http_is_a_clear_error() -> None:
    t0 = time.monotonic()
    with pytest.raises(MPServerError, match="cannot reach") as info:
        fetch_release(_dead_url(), timeout=1.0)
    assert time.monotonic() - t0 < 5
    assert "http_urls out" in str(info.value)
    with pytest.raises(MPServerError, match="not the http://"):
        fetch_release("tcp://127.0.0.1:5555")


def test_same_release() -> None:
    assert same_release("0.5.6", "0.5.6")
    assert same_release("0.5.6", "0.5.6+cpu")  # a local build of the same release
    assert not same_release("0.5.6", "0.5.7rc2")
    assert not same_release("0.5.7rc2", "0.5.7")
    assert same_release("custom", "custom") and not same_release("custom", "0.5.6")


def test_server_release_and_check(front: FrontEnd) -> None:
    front.release("0.5.7rc2")
    found = server_release(front.url, client="0.5.6")
    assert (found.release, found.client, found.matches) == ("0.5.7rc2", "0.5.6", False)
    assert found.to_json()["matches"] is False
    assert server_release(front.url, client="0.5.7rc2").matches is True
    with pytest.raises(MPVersionMismatchError) as info:
        check_server_releases([("tcp://a:1", front.url)], client="0.5.6")
    err = info.value
    assert (err.client, err.server, err.url) == ("0.5.6", "0.5.7rc2", "tcp://a:1")
    text = str(err)
    assert "tcp://a:1 runs LMCache 0.5.7rc2" in text and "this client runs LMCache 0.5.6" in text
    assert "may not share a wire format" in text and "HINT:" in text
    assert check_server_releases([("tcp://a:1", None)], client="0.5.6") == {"tcp://a:1": None}
    # the client's release unknown: nothing to compare, no error
    assert check_server_releases([("tcp://a:1", front.url)], client=None) in (
        {"tcp://a:1": "0.5.7rc2"},
    )


def test_describe_servers() -> None:
    assert "unknown" in describe_servers({}, "0.5.6")
    assert "not a mismatch" in describe_servers({"tcp://a:1": "0.5.6"}, "0.5.6")
    assert "NOT the client's" in describe_servers({"tcp://a:1": "0.5.7rc2"}, "0.5.6")


# --- MPConfig.http_urls and create() -----------------------------------------------------------


def test_config_http_urls() -> None:
    c = MPConfig(["tcp://a:1", "tcp://b:1"], "m", 16, http_urls=["http://a:8080", "http://b:8080"])
    assert c.http_urls == ("http://a:8080", "http://b:8080")
    assert c.http_url_for("tcp://b:1") == "http://b:8080"
    assert c.http_url_for("tcp://c:1") is None
    assert MPConfig("tcp://a:1", "m", 16, http_urls="http://a:8080").http_urls == ("http://a:8080",)
    assert MPConfig("tcp://a:1", "m", 16).http_url_for("tcp://a:1") is None
    with pytest.raises(ValueError, match="one HTTP front end per server"):
        MPConfig(["tcp://a:1", "tcp://b:1"], "m", 16, http_urls=["http://a:8080"])
    with pytest.raises(ValueError, match="http"):
        MPConfig("tcp://a:1", "m", 16, http_urls=["tcp://a:8080"])
    with pytest.raises(TypeError, match="http_urls"):
        MPConfig("tcp://a:1", "m", 16, http_urls={"http://a:8080"})  # type: ignore[arg-type]


def _module_with_health(version: str) -> Any:
    """The release's fake module, its scheduler's health property settable (``.healthy``)."""
    import types

    base_mod = fake_module(MATRIX.row(version))
    base = base_mod.LMCacheMPSchedulerAdapter
    cls = type(
        base.__name__,
        (base,),
        {"healthy": True, "is_healthy": property(lambda self: type(self).healthy)},
    )
    cls.__module__ = base.__module__
    mod = types.ModuleType(base_mod.__name__)
    mod.__dict__.update(vars(base_mod))
    mod.LMCacheMPSchedulerAdapter = cls  # type: ignore[attr-defined]
    return mod


@pytest.fixture
def client_release(monkeypatch: pytest.MonkeyPatch) -> str:
    """Pretend LMCache 0.5.6 is installed (the unit tier has none)."""
    import lmcache_compat.core.binding
    import lmcache_compat.mp.adapters
    import lmcache_compat.versions

    monkeypatch.setattr(lmcache_compat.versions, "version_or_none", lambda name: "0.5.6")
    monkeypatch.setattr(lmcache_compat.core.binding, "version_or_none", lambda name: "0.5.6")
    monkeypatch.setattr(lmcache_compat.mp.adapters, "version_or_none", lambda name: "0.5.6")
    return "0.5.6"


def test_create_refuses_a_server_of_another_release(
    client_release: str, front: FrontEnd, monkeypatch: pytest.MonkeyPatch
) -> None:
    mod = fake_module(MATRIX.row("0.5.6"))
    built: list[object] = []
    original = mod.LMCacheMPSchedulerAdapter._setup

    def setup(self: Any, *args: Any, **kwargs: Any) -> None:
        built.append(self)
        original(self, *args, **kwargs)

    monkeypatch.setattr(mod.LMCacheMPSchedulerAdapter, "_setup", setup)
    front.release("0.5.7rc2")
    config = MPConfig("tcp://h:1", "m", 16, http_urls=front.url)
    with pytest.raises(MPVersionMismatchError) as info:
        MPSchedulerAdapter.create(CTX, config, module=mod)
    assert (info.value.client, info.value.server) == ("0.5.6", "0.5.7rc2")
    assert built == []  # refused before the release's adapter was built (nothing connected)
    with pytest.raises(MPVersionMismatchError):
        MPWorkerAdapter.create(CTX, config, module=mod)


def test_create_records_matching_and_unknown_releases(
    client_release: str, front: FrontEnd, front2: FrontEnd
) -> None:
    mod = _module_with_health("0.5.6")
    front.release("0.5.6")
    front2.routes["/"] = (200, LMCACHE_ROOT)  # no route: an older LMCache front end
    config = MPConfig(
        ["tcp://a:1", "tcp://b:1"], "m", 16, world_size=2, http_urls=[front.url, front2.url]
    )
    sched = MPSchedulerAdapter.create(CTX, config, module=mod)
    assert sched.servers == {"tcp://a:1": "0.5.6", "tcp://b:1": None}
    # a 0 while unhealthy: the message says what is known of each server
    sched.target._called = lambda name, *a, **k: 0
    mod.LMCacheMPSchedulerAdapter.healthy = False
    with pytest.raises(MPServerError) as info:
        sched.check_lookup_result("r")
    text = str(info.value)
    assert "Client LMCache 0.5.6" in text
    assert "tcp://a:1: LMCache 0.5.6, the client's release (not a mismatch)" in text
    assert "tcp://b:1: release unknown" in text and "version mismatch" in text
    # each worker rank asks only its own server
    front2.release("0.5.7rc2")
    rank0 = MPWorkerAdapter.create(CTX, MPConfig(**{**config.__dict__, "rank": 0}), module=mod)
    assert rank0.servers == {"tcp://a:1": "0.5.6"}
    with pytest.raises(MPVersionMismatchError):
        MPWorkerAdapter.create(CTX, MPConfig(**{**config.__dict__, "rank": 1}), module=mod)


def test_same_release_everywhere_says_so(client_release: str, front: FrontEnd) -> None:
    mod = _module_with_health("0.5.6")
    front.release("0.5.6")
    sched = MPSchedulerAdapter.create(
        CTX, MPConfig("tcp://a:1", "m", 16, http_urls=front.url), module=mod
    )
    sched.target._called = lambda name, *a, **k: 0
    assert sched.check_lookup_result("r") == 0  # healthy: a miss
    mod.LMCacheMPSchedulerAdapter.healthy = False
    with pytest.raises(MPServerError, match="The releases match, so the server is down"):
        sched.check_lookup_result("r")


def test_create_without_http_urls_asks_nothing(client_release: str) -> None:
    mod = fake_module(MATRIX.row("0.5.6"))
    sched = MPSchedulerAdapter.create(
        CTX, MPConfig(["tcp://a:1", "tcp://b:1"], "m", 16), module=mod
    )
    assert sched.servers == {"tcp://a:1": None, "tcp://b:1": None}
    old = MPSchedulerAdapter.create(
        CTX, MPConfig("tcp://a:1", "m", 16), module=fake_module(MATRIX.row("0.4.1"))
    )
    assert old.servers == {"tcp://a:1": None}
    assert MPSchedulerAdapter(instantiate(mod.LMCacheMPSchedulerAdapter)).servers == {}


def test_create_with_an_unreachable_front_end(client_release: str) -> None:
    mod = fake_module(MATRIX.row("0.5.6"))
    with pytest.raises(MPServerError, match="cannot reach"):
        MPSchedulerAdapter.create(
            CTX, MPConfig("tcp://a:1", "m", 16, http_urls=_dead_url()), module=mod
        )


# --- doctor --mp-server ------------------------------------------------------------------------


def test_doctor_reports_the_server_release(
    front: FrontEnd, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from lmcache_compat.report import doctor
    from lmcache_compat.report.cli import main

    front.release("0.5.7rc2")
    entries = doctor.mp_servers_report([front.url, _dead_url()], "0.5.6")
    assert entries[0] == {
        "url": front.url,
        "release": "0.5.7rc2",
        "client": "0.5.6",
        "matches": False,
    }
    assert "cannot reach" in entries[1]["error"]
    lines = format_mp_servers(entries)
    assert "LMCache 0.5.7rc2: NOT the installed LMCache 0.5.6" in lines[0]
    assert "NOT reachable" in lines[1]

    import dataclasses

    real_report = doctor.doctor_report
    monkeypatch.setattr(
        doctor, "doctor_report", lambda: dataclasses.replace(real_report(), lmcache="0.5.6")
    )
    assert main(["doctor", "--mp-server", front.url, "--json"]) == 1  # a mismatch: exit 1
    report = json.loads(capsys.readouterr().out)
    assert report["mp_servers"][0]["matches"] is False
    front.release("0.5.6")
    code = main(["doctor", "--mp-server", front.url])
    out = capsys.readouterr().out
    assert f"MP server       {front.url}: LMCache 0.5.6 (the installed release)" in out
    assert code in (0, 1)  # the vLLM x LMCache verdict decides; the server matches
    del front.routes[ROUTE]
    front.routes["/"] = (200, LMCACHE_ROOT)  # LMCache 0.4.1 ... 0.4.4's front end
    main(["doctor", "--mp-server", front.url])
    assert "release not reported (an LMCache MP front end without" in capsys.readouterr().out


def test_doctor_without_the_option_is_unchanged(capsys: pytest.CaptureFixture[str]) -> None:
    from lmcache_compat.report.cli import main

    main(["doctor", "--json"])
    assert "mp_servers" not in json.loads(capsys.readouterr().out)


class Trickler:
    """A loopback server that answers an HTTP request one byte every ``gap`` seconds, for
    ever (headers that never end)."""

    def __init__(self, gap: float = 0.05) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.gap = gap
        self.stop = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        conn, _ = self.sock.accept()
        with conn:
            conn.recv(4096)
            payload = b"HTTP/1.1 200 OK\r\n" + b"X-Slow: " + b"a" * 10_000
            for i in range(len(payload)):
                if self.stop.is_set():
                    return
                try:
                    conn.sendall(payload[i : i + 1])
                except OSError:
                    return
                time.sleep(self.gap)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def close(self) -> None:
        self.stop.set()
        self.sock.close()


def test_a_trickling_front_end_is_cut_off_at_the_total_deadline() -> None:
    """Every byte arrives well within the per-read timeout; the exchange as a whole may still
    take no longer than the deadline (it used to last as long as the server kept trickling)."""
    server = Trickler(gap=0.05)
    try:
        t0 = time.monotonic()
        with pytest.raises(MPServerError, match="did not answer GET /lmc_version within 1 s"):
            fetch_release(server.url, timeout=1.0)
        elapsed = time.monotonic() - t0
    finally:
        server.close()
    assert 0.9 <= elapsed < 3, elapsed


def test_a_slow_but_complete_answer_within_the_deadline_is_read(front: FrontEnd) -> None:
    front.release("0.5.7rc2")
    assert fetch_release(front.url, timeout=5.0) == "0.5.7rc2"
