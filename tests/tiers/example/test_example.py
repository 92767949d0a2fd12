"""The ``example`` tier: the worked example (examples/connector) passes on every shipped
release, and a bug planted in a copy of it is caught on exactly the releases it affects (each
run is a pytest of the copy over ``--lmcache-release=all``, against fakes)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lmcache_compat.core.catalog import Capability
from lmcache_compat.upstream.matrix import load_matrix
from tests.support.paths import ROOT

EXAMPLE = ROOT / "examples" / "connector"
CONNECTOR = Path("src") / "example_connector" / "connector.py"

pytestmark = [pytest.mark.example, pytest.mark.real]


#: name -> (the correct line, the planted bug, the capability whose absence it breaks on)
BUGS = {
    "events_without_the_adapter": (
        "return list(self.adapter.get_kv_events())",
        "return list(self.adapter.engine.get_kv_events())",
        Capability.KV_EVENTS,
    ),
    "empty_set_read_as_no_failures": (
        "        if not self.reports_failed_loads:\n            return None\n",
        "",
        Capability.LOAD_ERROR_REPORTING,
    ),
}


def _failing_releases(project: Path) -> list[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(project / "src")])}
    env.pop("PYTEST_ADDOPTS", None)
    run = subprocess.run(
        [
            *(sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rf"),
            *("--lmcache-release=all", "-W", "ignore::UserWarning"),
        ],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    failed = set(re.findall(r"^FAILED \S+\[([^\]]+)\]", run.stdout, re.MULTILINE))
    assert run.returncode in (0, 1), run.stdout[-2000:] + run.stderr[-2000:]
    return [v for v in load_matrix().versions if v in failed]


def test_the_example_passes_on_every_release(tmp_path: Path) -> None:
    project = tmp_path / "example"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns(".tox", "__pycache__"))
    assert _failing_releases(project) == []


@pytest.mark.parametrize("bug", sorted(BUGS))
def test_a_planted_bug_is_caught_on_exactly_the_releases_it_affects(
    bug: str, tmp_path: Path
) -> None:
    good, bad, capability = BUGS[bug]
    project = tmp_path / "example"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns(".tox", "__pycache__"))
    source = project / CONNECTOR
    text = source.read_text()
    assert text.count(good) == 1
    source.write_text(text.replace(good, bad))
    affected = [r.version for r in load_matrix().rows if not r.has(capability)]
    assert affected  # the bug matters somewhere
    assert _failing_releases(project) == affected
