"""CI proves the README, and every generated table is the project's own data.

* ``.ci/run`` runs the README's test command verbatim;
* the README is a front door: its generated tables are the short ones (capabilities, doctor's
  example, exit statuses); the long ones live in ``docs/``;
* every generated section of the README and ``docs/`` equals a fresh rendering
  (``python scripts/update_docs.py`` rewrites them), and every page the README links exists.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent


def _readme_commands() -> list[str]:
    lines = ROOT.joinpath("README.md").read_text().splitlines()
    commands = [line.strip() for line in lines[:6] if line.startswith("    ")]
    assert len(commands) == 2, "README must open with exactly two commands"
    return commands


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "update_docs", ROOT / "scripts" / "update_docs.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_readme_opens_with_the_main_job_and_the_test_command() -> None:
    main_job, tests = _readme_commands()
    assert main_job.endswith("lmcache-compat doctor")
    assert "tox" in tests


def test_ci_runs_the_readme_test_command_verbatim() -> None:
    _, tests = _readme_commands()
    ci = ROOT.joinpath(".ci", "run").read_text().splitlines()
    assert any(line.startswith(tests + " ") or line == tests for line in ci), tests


def test_generated_sections_are_current() -> None:
    module = _script()
    assert module.stale_sections() == [], "run: python scripts/update_docs.py"
    files = {f for f, _ in module.SECTIONS}
    assert {"README.md", "docs/releases.md", "docs/vllm.md", "docs/mp.md"} <= files


def test_the_readme_is_a_front_door() -> None:
    text = ROOT.joinpath("README.md").read_text(encoding="utf-8")
    sections = set(re.findall(r"<!-- ([\w-]+):start -->", text))
    assert sections <= {"capabilities", "doctor-example", "exit-statuses"}, sections
    headings = re.findall(r"^## (.+)$", text, re.MULTILINE)
    for user in ("For connector authors", "For vLLM users", "For multi-process (MP) users"):
        assert user in headings
    # the generated capability table grows with the catalog (one line a connector row): the
    # front door's own text is what has a budget
    table = re.search(r"<!-- capabilities:start -->.*?<!-- capabilities:end -->", text, re.S)
    assert table is not None
    assert len(text.splitlines()) - len(table.group(0).splitlines()) < 190


def test_every_linked_page_exists() -> None:
    for page in [ROOT / "README.md", *ROOT.joinpath("docs").glob("*.md")]:
        for target in re.findall(r"\]\(([^)#:]+\.md)(?:#[^)]*)?\)", page.read_text()):
            assert (page.parent / target).is_file(), (page.name, target)


def test_the_changelog_is_keep_a_changelog_with_a_section_for_this_version() -> None:
    """``[Unreleased]`` on top, a dated section for ``__version__``, and a link reference for
    every version heading (Keep a Changelog 1.1.0)."""
    import lmcache_compat

    text = ROOT.joinpath("CHANGELOG.md").read_text(encoding="utf-8")
    headings = re.findall(r"^## \[([^\]]+)\](?: - (\d{4}-\d{2}-\d{2}))?$", text, re.MULTILINE)
    assert headings[0] == ("Unreleased", "")
    versions = [version for version, _ in headings[1:]]
    assert lmcache_compat.__version__ in versions
    assert all(date for _, date in headings[1:]), "every released version is dated"
    references = set(re.findall(r"^\[([^\]]+)\]: \S+$", text, re.MULTILINE))
    assert {"Unreleased", *versions} <= references


def test_the_config_extra_is_described_as_what_it_installs() -> None:
    """Where the README, docs/ or the script that writes docs/pypi.md say what the ``config``
    extra brings, they name only what pyproject.toml's extra installs (it once said "PyYAML
    and ruamel.yaml"; the extra is PyYAML alone)."""
    import tomllib

    extra = tomllib.loads(ROOT.joinpath("pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]["config"]
    installs = {re.split(r"[<>=!~\[; ]", req, maxsplit=1)[0].lower() for req in extra}
    libraries = {"pyyaml", "ruamel.yaml", "ruamel", "ruyaml", "strictyaml", "oyaml"}
    pages = [ROOT / "README.md", ROOT / "scripts" / "update_docs.py", *ROOT.glob("docs/*.md")]
    described = 0
    for page in pages:
        text = " ".join(page.read_text().split())
        for found in re.finditer(r"`config`( extra)? \(([^)]*)\)", text):
            named = {w.lower() for w in re.findall(r"[\w.]+", found.group(2))} & libraries
            assert named <= installs, (page.name, found.group(0), sorted(installs))
            described += bool(named)
    assert described >= 3  # the README, docs/cli.md and the pypi readme's source say it
