"""doctor tells the truth: each exit status means one thing (0 nothing found; 1 a verdict; 2 a
malformed ``--mp-server`` URL; 3 a front end that cannot be reached or is not an LMCache MP
front end), odd installs are named as they are, and only a release string counts as an MP front
end's answer."""

from __future__ import annotations

import http.server
import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import lmcache_compat.report.doctor as doctor_mod
from lmcache_compat.errors import MPServerURLError, NotAFrontEndError
from lmcache_compat.mp.server import RELEASE_CHARS, fetch_release, release_of_reply
from lmcache_compat.report.cli import main
from tests.report.conftest import install_dist


class Front:
    """A loopback HTTP front end: ``GET /lmc_version`` answers ``status`` and ``body`` (a
    ``length`` other than the body's makes a truncated reply)."""

    def __init__(self) -> None:
        self.status, self.body = 200, b'"0.5.6"'
        self.length: int | None = None
        #: Other paths' ``(status, body)``; every path not here answers ``status`` and ``body``.
        self.routes: dict[str, tuple[int, bytes]] = {}
        front = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                status, body = front.routes.get(self.path, (front.status, front.body))
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(front.length or len(body)))
                self.end_headers()
                self.wfile.write(body)
                if front.length:
                    self.close_connection = True

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"


@pytest.fixture
def front() -> Iterator[Front]:
    f = Front()
    yield f
    f.server.shutdown()
    f.server.server_close()


def _dead_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


@pytest.fixture
def nothing_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    """doctor over an environment without LMCache or vLLM: nothing found (0) on its own."""
    monkeypatch.setattr(doctor_mod, "installed_version", lambda name: None)
    monkeypatch.setattr(doctor_mod, "installed_lmcache_version", lambda: None)


# --- the statuses ---------------------------------------------------------------------------


def test_0_nothing_found(nothing_installed: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor"]) == 0


@pytest.mark.parametrize(
    "url",
    ["banana", "tcp://127.0.0.1:5555", "http://", "http://h:99999", "http://h:x", "http://a b"],
)
def test_2_a_malformed_url_is_a_usage_error_and_nothing_is_gathered(
    url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def gathered() -> None:
        raise AssertionError("doctor gathered facts for a command line it cannot run")

    monkeypatch.setattr(doctor_mod, "doctor_report", gathered)
    assert main(["doctor", "--mp-server", url]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is not the http:// URL" in err
    with pytest.raises(MPServerURLError):
        fetch_release(url)


def test_3_an_unreachable_front_end(
    nothing_installed: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["doctor", "--mp-server", _dead_url()]) == 3
    assert "NOT reachable" in capsys.readouterr().out


def test_3_wins_over_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], front: Front
) -> None:
    """A broken pair (1) and a front end that is not one (3): the check asked for could not be
    made, 3."""
    from packaging.version import Version

    monkeypatch.setattr(
        doctor_mod, "installed_version", lambda n: {"lmcache": "0.3.9", "vllm": "0.32.0"}.get(n)
    )
    monkeypatch.setattr(doctor_mod, "installed_lmcache_version", lambda: Version("0.3.9"))
    assert main(["doctor"]) == 1
    front.body = b"<html>hello</html>"
    assert main(["doctor", "--mp-server", front.url]) == 3
    front.body = b'"0.5.6"'
    capsys.readouterr()
    assert main(["doctor", "--mp-server", front.url, "--json"]) == 1  # another release: 1
    report = json.loads(capsys.readouterr().out)
    assert report["mp_servers"][0]["matches"] is False


# --- what an MP front end's reply may be ----------------------------------------------------


@pytest.mark.parametrize(
    ("body", "release"),
    [
        (b'"0.5.6"', "0.5.6"),  # every release 0.4.5 ... 0.5.7rc2 (the mp-servers tier)
        (b'"0.5.7rc2"\n', "0.5.7rc2"),
        (b"0.5.6\n", "0.5.6"),  # plain text
        (b'" 0.5.6 "', "0.5.6"),
        (b'""', None),  # a source checkout's front end: utils.VERSION is empty
    ],
)
def test_a_release_string_counts(front: Front, body: bytes, release: str | None) -> None:
    front.body = body
    assert fetch_release(front.url) == release


@pytest.mark.parametrize(
    ("body", "shown"),
    [
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00binary", "not UTF-8 text"),
        (b"<!DOCTYPE html><html><body>It works!</body></html>", "not a PEP 440 version"),
        (b'"0.5.', "not a JSON string"),  # truncated JSON
        (b"\x1b[2J\x1b[31m0.5.6\x1b[0m", "\\x1b[2J"),  # terminal escape sequences, escaped
        (b'"\\u001b[31m0.5.6"', "not a PEP 440 version"),
        (b"[" * 2000 + b"]" * 2000, "not a release of 1"),  # nested past recursion limits
        (json.dumps("0." + "1" * RELEASE_CHARS).encode(), f"1 to {RELEASE_CHARS} characters"),
        (b'{"version": "0.5.6"}', "not a PEP 440 version"),
        (b"", "not a release of 1"),
    ],
    ids=[
        "binary",
        "html",
        "truncated-json",
        "escapes",
        "json-escapes",
        "deep",
        "long",
        "object",
        "empty",
    ],
)
def test_anything_else_is_not_a_front_end(front: Front, body: bytes, shown: str) -> None:
    front.body = body
    with pytest.raises(NotAFrontEndError) as info:
        fetch_release(front.url)
    text = str(info.value)
    assert "is not an LMCache MP front end" in text and shown in text
    assert not any(ord(c) < 32 or 0x7F <= ord(c) < 0xA0 for c in text)  # nothing raw


def test_a_reply_cut_short_is_not_taken_as_the_release(front: Front) -> None:
    """The server promises 100 bytes and sends 6, then closes: no release is read from it."""
    front.body, front.length = b'"0.5.', 100
    with pytest.raises(Exception) as info:
        fetch_release(front.url)
    assert "front end" in str(info.value)


def test_the_doctor_text_escapes_what_the_front_end_sent(
    nothing_installed: None, front: Front, capsys: pytest.CaptureFixture[str]
) -> None:
    front.body = b"\x1b]0;owned\x07\x1b[31mred"
    assert main(["doctor", "--mp-server", front.url]) == 3
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and "\\x1b]0;owned\\x07" in out
    assert "NOT an LMCache MP front end" in out
    assert release_of_reply(b'"0.4.5"', front.url) == "0.4.5"


# --- the configuration's findings are a verdict -----------------------------------------------


@pytest.fixture
def lmcache_0_5_6(site: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fake LMCache 0.5.6 (metadata and an empty package) and a clean LMCACHE_* environment."""
    import os

    (site / "lmcache").mkdir()
    (site / "lmcache" / "__init__.py").write_text("")
    install_dist(site, "lmcache", "0.5.6")
    for name in [n for n in os.environ if n.startswith("LMCACHE_")]:
        monkeypatch.delenv(name)
    return site


def test_1_a_variable_the_active_configuration_drops(
    lmcache_0_5_6: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["doctor"]) == 0
    capsys.readouterr()
    monkeypatch.setenv("LMCACHE_NOPE", "1")
    assert main(["doctor"]) == 1  # config check exits 1 on the same environment: so does doctor
    assert "1 would be ignored" in capsys.readouterr().out
    assert main(["config", "check"]) == 1


def test_1_a_missing_config_file_is_a_finding_not_nothing(
    lmcache_0_5_6: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    missing = tmp_path / "gone.yaml"
    monkeypatch.setenv("LMCACHE_CONFIG_FILE", str(missing))
    assert main(["doctor", "--json"]) == 1
    config = json.loads(capsys.readouterr().out)["config"]
    (finding,) = config["findings"]
    assert finding["key"] == "LMCACHE_CONFIG_FILE" and finding["kind"] == "missing"
    assert finding["effect"] == "fails" and "FileNotFoundError" in finding["detail"]
    assert "reason" not in config  # not "cannot be read"
    assert main(["doctor"]) == 1
    out = capsys.readouterr().out
    assert "nothing would be ignored" not in out and "does not exist" in out
    assert main(["config", "check"]) == 1
    assert "MISSING (fails)" in capsys.readouterr().out


def test_a_file_that_cannot_be_read_is_not_called_clean(
    lmcache_0_5_6: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("LMCACHE_CONFIG_FILE", str(tmp_path))  # a directory
    assert main(["doctor"]) == 1  # a finding, as config check's 6 on the same file is
    out = capsys.readouterr().out
    assert "cannot be read" in out and "nothing would be ignored" not in out
    assert "the file was not checked" in out
    assert main(["config", "check"]) == 5  # a directory: not a regular file
    capsys.readouterr()
    main(["doctor", "--json"])
    (finding,) = json.loads(capsys.readouterr().out)["config"]["findings"]
    assert (finding["kind"], finding["effect"]) == ("unreadable", "fails")


@pytest.mark.parametrize(
    ("content", "effect"),
    [
        (b"chunk_size: 256\nx: \x07\n", "fails"),  # a control character
        (b"chunk_size: 256\nname: caf\xe9\n", "fails"),  # not UTF-8
        (b"chunk_size: " + b"9" * 5000 + b"\n", "unchecked"),  # over the number_chars budget
    ],
)
def test_1_a_config_file_that_cannot_be_loaded_is_a_finding(
    lmcache_0_5_6: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    content: bytes,
    effect: str,
) -> None:
    path = lmcache_0_5_6.parent / "lmcache.yaml"
    path.write_bytes(content)
    monkeypatch.setenv("LMCACHE_CONFIG_FILE", str(path))
    assert main(["config", "check"]) in (5, 6)
    capsys.readouterr()
    assert main(["doctor", "--json"]) == 1
    config = json.loads(capsys.readouterr().out)["config"]
    (finding,) = config["findings"]
    assert finding["key"] == "LMCACHE_CONFIG_FILE" and finding["kind"] == "unreadable"
    assert finding["effect"] == effect and str(path) in finding["detail"]
    assert main(["doctor", "-q"]) == 1


def test_3_a_server_answering_404_is_not_called_a_front_end(
    nothing_installed: None, front: Front, capsys: pytest.CaptureFixture[str]
) -> None:
    """Any web server answers 404 on /lmc_version: only one whose ``GET /`` is LMCache's HTTP
    front end's (0.4.1 ... 0.4.4 have no /lmc_version) is a front end of unknown release."""
    front.status, front.body = 404, b'{"detail":"Not Found"}'
    assert main(["doctor", "--mp-server", front.url]) == 3
    out = capsys.readouterr().out
    assert "NOT an LMCache MP front end" in out and "HTTP 404" in out
    assert main(["doctor", "--json", "--mp-server", front.url]) == 3
    (entry,) = json.loads(capsys.readouterr().out)["mp_servers"]
    assert entry["problem"] == "not-front-end"


def test_0_an_lmcache_front_end_without_the_route_reports_no_release(
    nothing_installed: None, front: Front, capsys: pytest.CaptureFixture[str]
) -> None:
    front.status = 404
    front.routes = {"/": (200, b'{"status": "ok", "service": "LMCache HTTP API"}')}
    assert main(["doctor", "--mp-server", front.url]) == 0
    assert "release not reported (an LMCache MP front end without" in capsys.readouterr().out


def test_the_line_without_a_pair_claims_no_exit_status(
    lmcache_0_5_6: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Only LMCache installed, and a variable the configuration drops: status 1, so the "no
    verdict" line must not say "exit 0" (nor any status: the findings decide it)."""
    monkeypatch.setenv("LMCACHE_NOPE", "1")
    assert main(["doctor"]) == 1
    out = capsys.readouterr().out
    assert "No vLLM installed: nothing to judge with LMCache 0.5.6 (no verdict)" in out
    assert "exit 0" not in out


def test_3_the_line_without_a_pair_claims_no_exit_status(
    nothing_installed: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["doctor", "--mp-server", _dead_url()]) == 3
    out = capsys.readouterr().out
    assert "nothing to judge (no verdict)" in out and "exit 0" not in out


def test_an_installed_vllm_of_unknown_version_is_installed(
    site: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (site / "vllm").mkdir()
    (site / "vllm" / "__init__.py").write_text("")
    info = site / "vllm-0.32.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\n")  # no Version
    main(["doctor"])
    out = capsys.readouterr().out
    assert "vLLM            installed, version unknown" in out
    assert "Neither vLLM nor LMCache" not in out
    assert "No LMCache installed: nothing to judge with vLLM (version unknown)" in out


def test_the_capability_header_names_only_the_column_shown(
    lmcache_0_5_6: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    main(["doctor"])
    lines = capsys.readouterr().out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("Capabilities ("))
    header, shown = lines[at], lines[at + 1].split()[2]
    for column in ("present", "expected"):  # a column the header explains is in the table
        assert f"'{column}'" not in header or column == shown, (header, shown)
    from lmcache_compat.report.doctor import _scan_installed
    from lmcache_compat.upstream.scanner import ScanResult

    monkeypatch.setattr(doctor_mod, "scan", lambda: ScanResult.__new__(ScanResult))
    _, basis = _scan_installed("0.5.6", [], True)  # scanned: the table shows 'present' only
    assert "'present'" in basis and "expected" not in basis


# --- odd installs -------------------------------------------------------------------------------


def test_several_distributions_are_all_named_with_the_one_python_imports(
    lmcache_0_5_6: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import base64
    import hashlib

    init = b"# the 0.5.6 files\n"
    (lmcache_0_5_6 / "lmcache" / "__init__.py").write_bytes(init)
    digest = base64.urlsafe_b64encode(hashlib.sha256(init).digest()).rstrip(b"=").decode()
    (lmcache_0_5_6 / "lmcache-0.5.6.dist-info" / "RECORD").write_text(
        f"lmcache/__init__.py,sha256={digest},{len(init)}\n"
    )
    install_dist(lmcache_0_5_6, "lmcache", "0.3.9")
    (lmcache_0_5_6 / "lmcache-0.3.9.dist-info" / "RECORD").write_text(
        "lmcache/__init__.py,sha256=AAAA,3\n"
    )
    main(["doctor", "--json"])
    report = json.loads(capsys.readouterr().out)
    entry = report["distributions"]["lmcache"]
    assert [(p["version"], p["imported"]) for p in entry["providers"]] == [
        ("0.5.6", True),
        ("0.3.9", False),
    ]
    assert report["lmcache"] == "0.5.6"
    main(["doctor"])
    line = next(x for x in capsys.readouterr().out.splitlines() if "LMCache    " in x)
    assert "2 distributions provide lmcache" in line and "0.3.9" in line
    assert "Python imports lmcache's" in line


def test_several_that_cannot_be_told_apart_are_not_guessed(
    lmcache_0_5_6: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    install_dist(lmcache_0_5_6, "lmcache", "0.3.9")
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "LMCache         installed, version unknown: several distributions claim" in out
    assert "LMCache is not installed" not in out


@pytest.mark.parametrize(
    ("metadata", "problem"),
    [
        (None, "no METADATA"),
        (b"Metadata-Version: 2.1\nName: lmcache\n", "no Version in its METADATA"),
        (b"Name: lmcache\nVersion: \xff\n", "not UTF-8"),
        (b"Name: lmcache\nVersion: 0." + b"9" * 5000 + b"\n", "budget version_chars"),
    ],
    ids=["no-metadata", "no-version", "not-utf8", "absurd-version"],
)
def test_unreadable_metadata_is_not_not_installed(
    lmcache_0_5_6: Path, capsys: pytest.CaptureFixture[str], metadata: bytes | None, problem: str
) -> None:
    meta = lmcache_0_5_6 / "lmcache-0.5.6.dist-info" / "METADATA"
    if metadata is None:
        meta.unlink()
    else:
        meta.write_bytes(metadata)
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "LMCache is not installed" not in out
    assert problem in out
    main(["doctor", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert report["distributions"]["lmcache"]["installed"] is True


def test_control_characters_in_metadata_are_escaped_in_the_text(
    lmcache_0_5_6: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (lmcache_0_5_6 / "lmcache-0.5.6.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: lm\x1b[31mcache\nVersion: 0.5.6\n"
    )
    main(["doctor"])
    out = capsys.readouterr().out
    assert "\x1b" not in out and "lm\\x1b[31mcache 0.5.6 provides lmcache" in out
