"""``lmcache-compat grid --engine sglang``: the shipped sglang grid as text, Markdown and JSON;
one line and a documented status for bad input."""

from __future__ import annotations

import json

import pytest

from lmcache_compat.report.cli import main
from lmcache_compat.sglang.known.grid import load_sglang_grid


def test_text_markdown_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["grid", "--engine", "sglang"]) == 0
    text = capsys.readouterr().out
    assert "sglang 0.5.21 ... 0.5.23 (3 releases): unified-mp (always)" in text
    assert main(["grid", "--engine", "sglang", "--markdown"]) == 0
    assert "| sglang (run) |" in capsys.readouterr().out
    assert main(["grid", "--sglang", "0.5.20", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [r["sglang"] for r in data["releases"]] == ["0.5.20"]
    assert data["releases"][0]["variant"] == load_sglang_grid().release("0.5.20").variant
    assert {p["plugin"].split(" ")[0] for p in data["plugin"]} == {"serves", "refuses:"}


def test_one_release_s_run_and_what_the_plugin_does(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["grid", "--sglang", "0.5.13"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("sglang 0.5.13 ... 0.5.13.post1")
    assert "lmcache-compat plugin (sglang 0.5.13):" in out


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["grid", "--sglang", "0.9.9"], "not in the shipped sglang grid"),
        (["grid", "--sglang", "not-a-version"], "not a PEP 440 version"),
    ],
)
def test_a_release_the_grid_does_not_have_is_status_3(
    argv: list[str], words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 3
    err = capsys.readouterr().err
    assert words in err and len(err.strip().splitlines()) == 1


def test_two_engines_at_once_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["grid", "--sglang", "0.5.20", "--vllm", "0.32.0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("lmcache-compat grid: error: ") and "cannot be combined" in err
