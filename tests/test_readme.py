"""CI proves the README: .ci/run runs the README's test command verbatim."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _readme_commands() -> list[str]:
    lines = ROOT.joinpath("README.md").read_text().splitlines()
    commands = [line.strip() for line in lines[:6] if line.startswith("    ")]
    assert len(commands) == 2, "README must open with exactly two commands"
    return commands


def test_readme_opens_with_the_main_job_and_the_test_command() -> None:
    main_job, tests = _readme_commands()
    assert main_job.endswith("lmcache-compat doctor")
    assert "tox" in tests


def test_ci_runs_the_readme_test_command_verbatim() -> None:
    _, tests = _readme_commands()
    ci = ROOT.joinpath(".ci", "run").read_text().splitlines()
    assert any(line.startswith(tests + " ") or line == tests for line in ci), tests


def test_generated_sections_are_current() -> None:
    """Every generated README section equals a fresh rendering from the project's own data
    (``python scripts/update_readme.py`` rewrites them)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "update_readme", ROOT / "scripts" / "update_readme.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    text = ROOT.joinpath("README.md").read_text(encoding="utf-8")
    assert module.stale_sections(text) == [], "run: python scripts/update_readme.py"
    assert set(module.SECTIONS) >= {"capabilities", "grid", "where", "budgets", "locations"}
