"""Run the worked example's tests (a copy of examples/connector) in a fresh pytest process and
read what happened to each test from its JUnit XML: used by both example tiers."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from tools.paths import ROOT

EXAMPLE = ROOT / "examples" / "connector"
CONNECTOR = Path("src") / "example_connector" / "connector.py"


@dataclass(frozen=True)
class Outcome:
    """One test of one run: ``passed``, ``failed``, ``error`` or ``skipped`` (with the reason)."""

    name: str
    release: str
    result: str
    message: str = ""


def copy_example(dest: Path, plant: tuple[str, str] | None = None) -> Path:
    """A copy of the example in ``dest``; ``plant``: (a line that must occur once, its
    replacement) in the connector's source."""
    shutil.copytree(EXAMPLE, dest, ignore=shutil.ignore_patterns(".tox", "__pycache__"))
    if plant is not None:
        good, bad = plant
        source = dest / CONNECTOR
        text = source.read_text(encoding="utf-8")
        assert text.count(good) == 1, good
        source.write_text(text.replace(good, bad), encoding="utf-8")
    return dest


def run_example(
    project: Path,
    spec: str,
    *,
    pythonpath: Sequence[Path] = (),
    env: Mapping[str, str] | None = None,
    timeout: float = 300,
) -> list[Outcome]:
    """``pytest --lmcache-release=SPEC`` in ``project`` with ``pythonpath`` first on the path;
    every test's outcome (a run that is neither green nor red fails here, with its output)."""
    run_env = dict(os.environ if env is None else env)
    run_env.pop("PYTEST_ADDOPTS", None)
    run_env["PYTHONPATH"] = os.pathsep.join(str(p) for p in pythonpath)
    report = project / "junit.xml"
    run = subprocess.run(
        [
            *(sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"),
            *(f"--lmcache-release={spec}", "-W", "ignore::UserWarning"),
            f"--junitxml={report}",
        ],
        cwd=project,
        env=run_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert run.returncode in (0, 1) and report.is_file(), run.stdout[-3000:] + run.stderr[-3000:]
    outcomes = []
    for case in ET.parse(report).getroot().iter("testcase"):
        name = case.get("name", "")
        base, _, release = name.partition("[")
        result, message = "passed", ""
        for kind in ("failure", "error", "skipped"):
            found = case.find(kind)
            if found is not None:
                result = {"failure": "failed"}.get(kind, kind)
                message = found.get("message", "")
        outcomes.append(Outcome(base, release.rstrip("]"), result, message))
    return outcomes


def failing_releases(outcomes: Sequence[Outcome]) -> set[str]:
    return {o.release for o in outcomes if o.result in ("failed", "error")}
