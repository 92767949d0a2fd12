"""Every command's ``--help`` (walked from the parser): a description, help for every option,
the exit statuses the command gives (from ``COMMAND_STATUSES``) and an example; usage errors are
one line with the command's name, a close match for a misspelt command or option, and options
that conflict are refused."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from lmcache_compat.report.cli import EXAMPLES, build_parser, command_parsers, main
from lmcache_compat.report.statuses import (
    COMMAND_STATUSES,
    STATUSES,
    command_statuses,
)

PARSER = build_parser(width=100)
COMMANDS = dict(command_parsers(PARSER))


def test_every_command_has_statuses_and_an_example() -> None:
    assert set(COMMANDS) == set(COMMAND_STATUSES) == set(EXAMPLES)
    known = {s.code for s in STATUSES}
    for name in COMMANDS:
        codes = [s.code for s in command_statuses(name)]
        assert codes == sorted(set(codes)) and set(codes) <= known, name
        assert 2 in codes and 130 in codes, name


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_help_of_each_command(name: str) -> None:
    sub = COMMANDS[name]
    text = sub.format_help()
    assert sub.description, f"{name}: no description"
    for action in sub._actions:
        if isinstance(action, argparse._SubParsersAction):
            continue
        assert action.help, f"{name}: {action.option_strings or action.dest} has no help"
    statuses = text[text.index("exit statuses:") :]
    for status in command_statuses(name):
        assert f"\n  {status.code} " in statuses, (name, status.code)
    for line in EXAMPLES[name]:
        assert f"  {line}\n" in text + "\n"
    assert max(len(line) for line in text.splitlines()) <= 100


def test_help_exits_0_on_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["config", "check", "--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: lmcache-compat config check") and "exit statuses:" in out


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (
            ["scna"],
            "lmcache-compat: error: argument COMMAND: invalid choice: 'scna'; did you mean scan?",
        ),
        (
            ["doctor", "--jsn"],
            "lmcache-compat doctor: error: unrecognized argument --jsn; did you mean --json?",
        ),
        (
            ["config", "chek"],
            "lmcache-compat config: error: argument SUBCOMMAND: invalid choice: 'chek'; "
            "did you mean check?",
        ),
        (
            ["config", "check", "--lmcahe", "0.5.6"],
            "lmcache-compat config check: error: unrecognized argument --lmcahe; "
            "did you mean --lmcache?",
        ),
        (
            ["doctor", "-q", "-v"],
            "lmcache-compat doctor: error: argument -v/--verbose: not allowed with "
            "argument -q/--quiet",
        ),
        (["releases", "--role", "mp"], "lmcache-compat releases: error: --role needs --distinct"),
        (
            ["grid", "--vllm", "0.32.0", "--sglang", "0.5.2"],
            "lmcache-compat grid: error: --vllm and --sglang",
        ),
        (["scan", "a.whl", "--vllm-native", "b"], "lmcache-compat scan: error: give the vLLM path"),
        (
            ["matrix", "--json", "--markdown"],
            "lmcache-compat matrix: error: argument --markdown: not allowed",
        ),
    ],
)
def test_usage_errors_are_one_line(
    argv: list[str], expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(expected), captured.err
    assert captured.err.count("\n") == 1 and "Traceback" not in captured.err


def test_an_error_names_the_whole_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "check", "--lmcache", "9.9.9", "--no-env"]) == 3
    assert capsys.readouterr().err.startswith("lmcache-compat config check: error: ")


def test_quiet_drops_the_note_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["grid", "--vllm", "0.25.0", "-q"]) == 0
    assert capsys.readouterr().err == ""


def test_quiet_migrate_and_mp_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from lmcache_compat.upstream.matrix import load_matrix

    versions = load_matrix().versions
    old, new = versions[0], next(v for v in reversed(versions) if "rc" not in v)
    assert main(["config", "mp-flags", "--from", new, "--to", new, "-q", "--"]) == 0
    assert capsys.readouterr().err == ""
    path = tmp_path / "c.yaml"
    path.write_text("chunk_size: 256\n")
    code = main(["config", "migrate", str(path), "--from", old, "--to", new, "-q"])
    captured = capsys.readouterr()
    assert code in (0, 1) and "migrate from" not in captured.err
    assert captured.out == "chunk_size: 256\n"


def test_quiet_before_the_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["-q", "doctor"]) == 0
    before = capsys.readouterr().out
    assert main(["doctor", "-q"]) == 0
    assert before == capsys.readouterr().out and not before.startswith("lmcache-compat doctor")
