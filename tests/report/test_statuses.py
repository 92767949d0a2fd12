"""Every exit status of :data:`~lmcache_compat.report.statuses.STATUSES` (the README's and
docs/cli.md's table) is produced by a real command here: each row has producers, each producer
is run, and its status is the row's. A status added to the table without a command that produces
it fails this test; so does a producer whose status is not in the table."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

import lmcache_compat.report.doctor as doctor_mod
from lmcache_compat.report.cli import main
from lmcache_compat.report.statuses import STATUSES, Status
from tests.support.archives import ADAPTER_0_3_10_POST2, V1, make_tree

Producer = Callable[[Path, pytest.MonkeyPatch], int]


def _cli(*args: str, stdout: int = subprocess.DEVNULL) -> int:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("LMCACHE_")}
    run = subprocess.run(
        [sys.executable, *args], stdout=stdout, stderr=subprocess.DEVNULL, env=clean
    )
    return run.returncode


def _yaml(tmp_path: Path, text: str, name: str = "lmcache.yaml") -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def _broken_pair(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> int:
    from packaging.version import Version

    pair = {"lmcache": "0.3.9", "vllm": "0.32.0"}
    monkeypatch.setattr(doctor_mod, "installed_version", pair.get)
    monkeypatch.setattr(doctor_mod, "installed_lmcache_version", lambda: Version("0.3.9"))
    return main(["doctor"])


def _dead_front_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> int:
    import socket

    monkeypatch.setattr(doctor_mod, "installed_version", lambda name: None)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return main(["doctor", "--mp-server", f"http://127.0.0.1:{port}"])


def _interrupted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> int:
    def interrupt(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", interrupt)  # the rename: the last step
    return _migrate(tmp_path, "--in-place")


def _pipe_closed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> int:
    reader = subprocess.Popen(["head", "-c", "1"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    assert reader.stdin is not None
    try:
        return _cli("-m", "lmcache_compat", "matrix", "--json", stdout=reader.stdin.fileno())
    finally:
        reader.stdin.close()
        reader.wait()


def _full_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> int:
    if not os.path.exists("/dev/full"):
        pytest.skip("needs /dev/full")
    with open("/dev/full", "w") as full:
        return _cli("-m", "lmcache_compat", "grid", "--vllm", "0.12", stdout=full.fileno())


def _no_yaml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> int:
    path = _yaml(tmp_path, "chunk_size: 1\n")
    code = (
        "import sys; sys.modules['yaml'] = None\n"
        "from lmcache_compat.report.cli import main\n"
        f"sys.exit(main(['config', 'check', {path!r}, '--lmcache', '0.5.6']))\n"
    )
    return _cli("-c", code)


def _check(tmp_path: Path, text: str) -> int:
    return main(["config", "check", _yaml(tmp_path, text), "--lmcache", "0.5.6", "--no-env"])


def _migrate(tmp_path: Path, *where: str, text: str = "plugin_locations: [/p]\n") -> int:
    path = _yaml(tmp_path, text)
    dest = [path if w == "INPUT" else w for w in where]
    return main(["config", "migrate", path, "--from", "0.3.9", "--to", "0.5.6", *dest])


def _nothing_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(doctor_mod, "installed_version", lambda name: None)
    return main(["doctor"])


def _symlink_loop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> int:
    root = make_tree(tmp_path / "loop", {"lmcache/__init__.py": ""})
    (root / "lmcache" / "self.py").symlink_to("self.py")
    return main(["scan", str(root)])


#: status -> commands that produce it, one per kind of cause the row's meaning names.
PRODUCERS: dict[int, dict[str, Producer]] = {
    0: {"matrix": lambda t, m: main(["matrix"]), "doctor: nothing found": _nothing_found},
    1: {
        "doctor: a measured break": _broken_pair,
        "diff --fail-on-breaking": lambda t, m: main(
            ["diff", "0.5.6", "0.5.7rc2", "--fail-on-breaking"]
        ),
        "config check: a removed key": lambda t, m: _check(t, "error_handling: false\n"),
        "config migrate: a key left": lambda t, m: _migrate(t, text="error_handling: false\n"),
        "config mp-flags: a flag lost": lambda t, m: main(
            ["config", "mp-flags", "--from", "0.5.6", "--to", "0.3.13", "--", "--no-such-flag"]
        ),
    },
    2: {
        "no command": lambda t, m: main([]),
        "migrate -o naming the input": lambda t, m: _migrate(t, "-o", "INPUT"),
        "migrate -o a device": lambda t, m: _migrate(t, "-o", os.devnull),
        "doctor --mp-server banana": lambda t, m: main(["doctor", "--mp-server", "banana"]),
    },
    3: {
        "a version not in the shipped data": lambda t, m: main(["releases", "0.3.8"]),
        "not a PEP 440 version": lambda t, m: main(["grid", "--vllm", "banana"]),
        "a version over its budget": lambda t, m: main(["releases", "0." + "9" * 5000]),
        "target not found": lambda t, m: main(["scan", str(t / "nope")]),
        "doctor --mp-server unreachable": _dead_front_end,
    },
    4: {
        "not an LMCache release": lambda t, m: main(
            ["scan", str(make_tree(t / "x", {"a.py": ""}))]
        ),
    },
    5: {
        "a configuration over its depth budget": lambda t, m: _check(
            t, "a: " + "[" * 99 + "]" * 99
        ),
        "a symlink loop": _symlink_loop,
    },
    6: {
        "a control character": lambda t, m: _check(t, "a: '\x01'\n"),
        "Python that does not parse": lambda t, m: main(
            ["scan", str(make_tree(t / "bad", {V1: ADAPTER_0_3_10_POST2 + "\ndef (:\n"}))]
        ),
    },
    7: {
        "a full disk": _full_disk,
        "a missing destination directory": lambda t, m: _migrate(
            t, "-o", str(t / "missing" / "out.yaml")
        ),
    },
    8: {"PyYAML missing": _no_yaml},
    130: {"Ctrl-C during migrate": _interrupted},
    141: {"the reader closed the pipe": _pipe_closed},
}


@pytest.mark.parametrize("status", STATUSES, ids=lambda s: str(s.code))
def test_every_status_has_a_command_that_produces_it(
    status: Status, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    producers = PRODUCERS.get(status.code)
    assert producers, f"status {status.code} ({status.meaning}) has no producer here"
    for i, (what, produce) in enumerate(producers.items()):
        where = tmp_path / str(i)
        where.mkdir()
        with monkeypatch.context() as patch:
            assert produce(where, patch) == status.code, what


def test_every_producer_status_is_in_the_table() -> None:
    assert set(PRODUCERS) == {s.code for s in STATUSES}
