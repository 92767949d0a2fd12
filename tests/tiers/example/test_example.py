"""The ``example`` tier: the worked example (examples/connector) passes on every shipped
release, and a bug planted in a copy of it is caught on exactly the releases it affects (each
run is a pytest of the copy over ``--lmcache-release=all``, against fakes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lmcache_compat.core.catalog import Capability
from lmcache_compat.upstream.matrix import load_matrix
from tests.tiers.example.run import copy_example, failing_releases, run_example
from tools.paths import ROOT

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
    outcomes = run_example(project, "all", pythonpath=[ROOT, project / "src"])
    assert {o.release for o in outcomes} == set(load_matrix().versions)
    failed = failing_releases(outcomes)
    return [v for v in load_matrix().versions if v in failed]


def test_the_example_passes_on_every_release(tmp_path: Path) -> None:
    assert _failing_releases(copy_example(tmp_path / "example")) == []


@pytest.mark.parametrize("bug", sorted(BUGS))
def test_a_planted_bug_is_caught_on_exactly_the_releases_it_affects(
    bug: str, tmp_path: Path
) -> None:
    good, bad, capability = BUGS[bug]
    project = copy_example(tmp_path / "example", (good, bad))
    affected = [r.version for r in load_matrix().rows if not r.has(capability)]
    assert affected  # the bug matters somewhere
    assert _failing_releases(project) == affected
