"""The reader contract (:mod:`lmcache_compat.inputs`) on every input the project parses: YAML
configuration files, JSON in ``LMCACHE_*`` variables, MP front ends' replies, version and
specifier strings, shipped data. Hostile input is one line and a documented status, the same on
every interpreter (the scan-python310/312/313 tiers run this file too: recursion windows and
integer digit limits differ between them), never a traceback.
"""

from __future__ import annotations

import contextlib
import http.server
import io
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from lmcache_compat import inputs
from lmcache_compat.budgets import BUDGETS
from lmcache_compat.errors import (
    ConfigFileError,
    DataFileError,
    LMCacheVersionError,
    NotAFrontEndError,
    UnsafeConfigError,
)
from lmcache_compat.report.cli import main
from lmcache_compat.versions import parse_specifier, parse_version

pytest_plugins = ["pytester"]

pytest.importorskip("yaml")  # the `config` extra: every tier that runs this file installs it

#: Deep enough for every interpreter's recursion limit in PyYAML's composer and in ``json``.
DEEP = 5000
#: Past the budget, but well inside every recursion limit: refused the same way everywhere.
JUST_OVER = BUDGETS.input_depth + 1
#: A number past every interpreter's integer digit limit (4300 on 3.11+).
LONG = "9" * 5000
ABSURD_VERSION = "0." + "9" * 5000


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The command line in this process (as ``python -m lmcache_compat`` runs it), with a clean
    ``LMCACHE_*`` environment plus ``env``."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("LMCACHE_")}
    out, err = io.StringIO(), io.StringIO()
    with (
        mock.patch.dict(os.environ, {**clean, **(env or {})}, clear=True),
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
    ):
        code = main(list(args))
    return subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())


def _one_line(r: subprocess.CompletedProcess[str], status: int) -> str:
    assert r.returncode == status, (r.returncode, r.stderr[-2000:])
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr[-2000:]
    return lines[0]


# --- the scanners measure at least the real depth --------------------------------------------


@pytest.mark.parametrize(
    ("text", "depth"),
    [
        ("a: 1\n", 2),
        ("a:\n  b:\n    c: [1, {d: 2}]\n", 6),
        ("- - - x\n", 4),
        ("a: |\n  [[[[[[\n  {{{\nb: 1\n", 2),  # a block scalar's text is not structure
        ("a: 'it''s [[[['\nb: \"x\\\" [[[\"\n", 2),  # nor a quoted one's
        ("a: x[1] # [[[[[\n", 2),  # nor a plain scalar's or a comment's
        ("a: [\n  [\n    [1, 2],\n  ],\n]\n", 5),
        ("- key: >\n    text\n    [[[[[\n  other: 3\n", 3),
        ("? complex\n: value\n", 2),
    ],
)
def test_the_yaml_scanner_never_counts_less_than_the_real_depth(text: str, depth: int) -> None:
    import yaml

    def real(value: Any) -> int:
        if isinstance(value, dict):
            return 1 + max((real(v) for v in [*value, *value.values()]), default=0)
        if isinstance(value, list):
            return 1 + max((real(v) for v in value), default=0)
        return 1

    assert real(yaml.safe_load(text)) == depth
    assert inputs.yaml_shape(text).depth >= depth


def test_the_scanners_find_long_numbers_only_where_yaml_or_json_has_a_number() -> None:
    assert inputs.yaml_shape(f"a: {LONG}\n").number == len(LONG)
    assert inputs.yaml_shape(f"a: '{LONG}'\nb: x{LONG}\n# {LONG}\n").number == 0
    assert inputs.yaml_shape("a: 3f5a" + "0" * 200 + "\n").number == 0  # a hex id: a string
    assert inputs.json_shape(f'{{"a": [{LONG}], "b": "{LONG}"}}').number == len(LONG)


def test_shown_escapes_control_characters() -> None:
    assert inputs.shown("a\x1b[31mb\n\x00\u2028") == "a\\x1b[31mb\\n\\x00\\u2028"
    assert inputs.shown("x" * 300, 10) == "x" * 10 + "..."


# --- YAML configuration files (config check, config migrate, doctor) ------------------------


def _config(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "lmcache.yaml"
    path.write_text(f"chunk_size: 256\nplugin_locations: ['/p']\n{body}", encoding="utf-8")
    return path


CHECK = ("config", "check", "--lmcache", "0.5.6", "--no-env")
MIGRATE = ("config", "migrate", "--from", "0.3.9", "--to", "0.5.6")


@pytest.mark.parametrize("command", [CHECK, MIGRATE], ids=["check", "migrate"])
@pytest.mark.parametrize(
    ("body", "status", "words"),
    [
        ("local_cpu: 'a\x01b'\n", 6, "control characters"),
        ("x: \x1b[31m\n", 6, "control characters"),
        (f"max_local_cpu_size: {LONG}\n", 5, "budget number_chars"),
        (f"{LONG}: 1\n", 5, "budget number_chars"),
        ("extra_config: " + "[" * DEEP + "]" * DEEP + "\n", 5, "budget input_depth"),
        ("extra_config: " + "[" * JUST_OVER + "]" * JUST_OVER + "\n", 5, "budget input_depth"),
        ("extra_config:\n" + "".join(f"{' ' * i}  k:\n" for i in range(DEEP // 10)), 5, "depth"),
        ("x: !!int '" + LONG + "'\n", 6, "cannot be read as YAML"),
        ("x: 2001-13-45\n", 6, "cannot be read as YAML"),
    ],
    ids=[
        "control",
        "escape",
        "long-value",
        "long-key",
        "deep-flow",
        "just-over",
        "deep-block",
        "tagged-int",
        "bad-date",
    ],
)
def test_a_hostile_file_is_one_line_and_its_status(
    tmp_path: Path, command: tuple[str, ...], body: str, status: int, words: str
) -> None:
    path = _config(tmp_path, body)
    before = path.read_bytes()
    line = _one_line(_run(*command, str(path)), status)
    assert words in line and "\x1b" not in line and "\x01" not in line
    assert path.read_bytes() == before


def test_the_reader_refuses_before_pyyaml_sees_the_text(monkeypatch: pytest.MonkeyPatch) -> None:
    """The budgets are measured on the text first: PyYAML is never called on it."""
    import yaml

    from lmcache_compat.config.yamlread import read_config_bytes

    def boom(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("PyYAML saw the text")

    monkeypatch.setattr(yaml, "SafeLoader", boom)
    for text in ("a: " + "[" * JUST_OVER + "]" * JUST_OVER, f"a: {LONG}"):
        with pytest.raises(UnsafeConfigError, match="budget"):
            read_config_bytes(text.encode(), "f.yaml")


def test_an_overflowing_float_is_not_a_usage_error(tmp_path: Path) -> None:
    """``1e999`` (a string to PyYAML's YAML 1.1) and ``1.0e+999`` (inf) are values: migrate
    writes them unchanged."""
    path = _config(tmp_path, "max_local_cpu_size: 1.0e+999\nx: 1e999\n")
    r = _run(*MIGRATE, str(path))
    assert r.returncode == 1, r.stderr  # x is left in place: no release reads it
    assert "max_local_cpu_size: 1.0e+999\nx: 1e999\n" in r.stdout
    assert "runtime_plugin_locations: ['/p']" in r.stdout


# --- JSON and numbers in LMCACHE_* variables ------------------------------------------------


@pytest.mark.parametrize(
    ("var", "value", "words"),
    [
        ("LMCACHE_EXTRA_CONFIG", "[" * DEEP + "]" * DEEP, "budget input_depth"),
        ("LMCACHE_EXTRA_CONFIG", '{"a": ' * JUST_OVER + "1" + "}" * JUST_OVER, "input_depth"),
        ("LMCACHE_EXTRA_CONFIG", '{"a": ' + LONG + "}", "budget number_chars"),
        ("LMCACHE_CHUNK_SIZE", LONG, "budget number_chars"),
        ("LMCACHE_MAX_LOCAL_CPU_SIZE", "1" + "0" * 4999 + ".5", "budget number_chars"),
    ],
    ids=["deep", "just-over", "long-in-json", "long-int", "long-float"],
)
def test_a_hostile_variable_is_one_line_and_status_5(var: str, value: str, words: str) -> None:
    line = _one_line(_run("config", "check", "--lmcache", "0.5.6", env={var: value}), 5)
    assert line.startswith(f"lmcache-compat config check: error: {var}") and words in line


def test_ordinary_variables_are_still_read() -> None:
    env = {"LMCACHE_EXTRA_CONFIG": '{"a": [1, {"b": 2}]}', "LMCACHE_CHUNK_SIZE": "256"}
    r = _run("config", "check", "--lmcache", "0.5.6", env=env)
    assert r.returncode == 0 and "nothing would be ignored" in r.stdout, r.stderr


# --- versions and specifier sets -------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ("releases", ABSURD_VERSION),
        ("releases", f">={ABSURD_VERSION}"),
        ("diff", ABSURD_VERSION, "0.5.6"),
        ("config", "check", "--lmcache", ABSURD_VERSION, "--no-env"),
        ("config", "migrate", "x.yaml", "--to", ABSURD_VERSION),
        ("grid", "--vllm", ABSURD_VERSION),
        ("grid", "--engine", "sglang", "--sglang", ABSURD_VERSION),
    ],
    ids=["releases", "releases-spec", "diff", "check", "migrate", "grid", "grid-sglang"],
)
def test_an_absurd_version_is_one_line_and_status_3(args: tuple[str, ...]) -> None:
    line = _one_line(_run(*args), 3)
    assert "budget version_chars" in line and len(line) < 400


def test_version_parsing_is_bounded_and_one_error_class() -> None:
    for text in (ABSURD_VERSION, "1." + "9" * 120 + "x", "\x1b[31m1.0", "1.0\x00"):
        with pytest.raises(LMCacheVersionError) as info:
            parse_version(text)
        assert "\x1b" not in str(info.value) and "\x00" not in str(info.value)
    assert str(parse_version("1." + "9" * 120)).startswith("1.999")  # within the budget
    with pytest.raises(LMCacheVersionError, match="budget version_chars"):
        parse_specifier(">=" + ABSURD_VERSION)
    assert parse_specifier(">=0.4,<0.5").contains("0.4.6")


def test_the_pytest_plugin_refuses_an_absurd_release_in_one_usage_line(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_a="def test_x(lmcache_release): pass\n")
    for spec in (ABSURD_VERSION, f">={ABSURD_VERSION}", "\x1b[31m0.5.6"):
        result = pytester.runpytest(
            "-p", "lmcache_compat.testing.pytest_plugin", f"--lmcache-release={spec}"
        )
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        text = result.stderr.str()
        assert "INTERNALERROR" not in text and "\x1b" not in text


# --- shipped data files ------------------------------------------------------------------------


def test_a_shipped_data_file_that_cannot_be_read_is_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from lmcache_compat.upstream import shipped

    monkeypatch.setattr(shipped, "read_data", lambda name: "[" * DEEP)
    with pytest.raises(DataFileError, match=r"^shipped x \(releases.json\): is not valid JSON"):
        shipped.read_data_json("releases.json", "x")
    monkeypatch.setattr(shipped, "read_data", lambda name: f"[{LONG}]")
    with pytest.raises(DataFileError, match="is not valid JSON"):
        shipped.read_data_json("releases.json", "x")


def test_guarded_maps_every_input_failure_to_the_readers_error() -> None:
    for failure in (RecursionError(), MemoryError(), OverflowError("x"), ValueError("v")):
        with (
            pytest.raises(ConfigFileError, match=r"^f\.yaml: cannot be read"),
            inputs.guarded("f.yaml", ConfigFileError),
        ):
            raise failure
    with pytest.raises(KeyError), inputs.guarded("f.yaml", ConfigFileError):
        raise KeyError("k")  # not an input failure: a bug, never hidden


# --- an MP front end's reply ------------------------------------------------------------------


class _Front:
    """A loopback HTTP server answering ``GET /lmc_version`` with ``body``."""

    def __init__(self) -> None:
        self.body = b'"0.5.6"'
        front = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("Content-Length", str(len(front.body)))
                self.end_headers()
                self.wfile.write(front.body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"


@pytest.fixture
def front() -> Iterator[_Front]:
    f = _Front()
    yield f
    f.server.shutdown()
    f.server.server_close()


def test_a_deeply_nested_reply_is_not_a_front_end(front: _Front) -> None:
    from lmcache_compat.mp.server import check_server_releases

    front.body = b"[" * 4000 + b"]" * 96
    with pytest.raises(NotAFrontEndError, match="not an LMCache MP front end"):
        check_server_releases([("tcp://a:1", front.url)], client="0.5.6")
    front.body = b'"' + b"[" * 4000 + b'"'
    with pytest.raises(NotAFrontEndError):
        check_server_releases([("tcp://a:1", front.url)], client="0.5.6")
    r = _run("doctor", "--mp-server", front.url)
    assert r.returncode == 3 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert "NOT an LMCache MP front end" in r.stdout


# --- output streams -----------------------------------------------------------------------------


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (Linux)")
@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_a_full_disk_under_either_stream_is_status_7(stream: str) -> None:
    """``grid --vllm 0.12`` writes a note to stderr (0.12 was not measured) and the grid to
    stdout: either one failing is status 7, never 1 (a verdict) or a traceback."""
    with open("/dev/full", "w") as full:
        r = subprocess.run(
            [sys.executable, "-m", "lmcache_compat", "grid", "--vllm", "0.12"],
            stdout=full if stream == "stdout" else subprocess.DEVNULL,
            stderr=full if stream == "stderr" else subprocess.PIPE,
        )
    assert r.returncode == 7
    assert stream == "stderr" or b"Traceback" not in r.stderr


def _closed_stderr(*args: str) -> subprocess.CompletedProcess[bytes]:
    """``lmcache-compat ARGS 2>&-``: the process starts with file descriptor 2 closed (Python's
    ``sys.stderr`` is then ``None``), not pointed at /dev/null."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("LMCACHE_")}
    return subprocess.run(
        [sys.executable, "-m", "lmcache_compat", *args],
        stdout=subprocess.PIPE,
        preexec_fn=lambda: os.close(2),  # the child's own descriptor 2, before exec
        env=clean,
        check=False,
    )


@pytest.mark.parametrize(
    ("args", "status"),
    [
        (("grid", "--vllm", "0.12"), 0),  # a note (0.12 was not measured): dropped
        (("grid", "--vllm", "0.12", "--json"), 0),
        (("releases",), 0),
        (("releases", "0.3.8"), 7),  # status 3's error line cannot be written: 7
        (("grid", "--vllm", "banana"), 7),
        (("nonsense",), 7),  # a usage error's line cannot be written either
    ],
)
def test_a_closed_stderr_drops_notes_and_keeps_the_status(
    args: tuple[str, ...], status: int
) -> None:
    r = _closed_stderr(*args)
    assert r.returncode == status, r
    assert b"Traceback" not in r.stdout and b"was not measured" not in r.stdout
    assert b"error:" not in r.stdout
    if "--json" in args:
        json.loads(r.stdout)  # notes never reach stdout: the JSON is whole
    if status == 0:
        assert r.stdout
        opened = subprocess.run(
            [sys.executable, "-m", "lmcache_compat", *args], capture_output=True, check=False
        )
        assert (opened.returncode, opened.stdout) == (0, r.stdout)


def test_main_in_process_keeps_its_statuses(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["releases", ABSURD_VERSION]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "budget version_chars" in err
