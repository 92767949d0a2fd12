"""The worked example with ``--lmcache-release=installed`` on real LMCache releases beside real
vLLM: the ``example-installed`` tox env runs it with ``grid-vllm0.32.0``'s interpreter (it reuses
that tier's vLLM environment and its LMCache releases, each on ``PYTHONPATH`` in turn; marked
``real`` only, so the fakes-only ``example`` env, which selects ``-m example``, leaves it out).

The releases: the oldest whose connector module imports beside this vLLM (read from the shipped
grid's import facts), 0.5.6 and the newest of the shipped data (a pre-release today). On each,
the example's tests run on doubles of the real classes (``lmcache_compat.testing.installed``):
none may fail, the only skips are capabilities the release lacks, and the planted bugs of the
fakes tier are caught on exactly those of these releases they affect.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from importlib import metadata
from pathlib import Path

import pytest

from lmcache_compat.upstream import locations as loc
from lmcache_compat.upstream.grid import load_grid
from lmcache_compat.upstream.matrix import load_matrix
from tests.tiers.example.run import Outcome, copy_example, failing_releases, run_example
from tests.tiers.example.test_example import BUGS
from tests.tiers.real.sweep import ROOT
from tools.lmcache_targets import install, quiet_env

pytestmark = pytest.mark.real

MATRIX = load_matrix()
IMPL = loc.CONNECTOR_IMPL.name
#: The release the issue names beside the oldest and the newest.
NAMED = "0.5.6"


def chosen_releases(vllm: str) -> list[str]:
    """The oldest release whose connector module imports beside vLLM ``vllm`` (the shipped
    grid's facts), 0.5.6 and the newest shipped release."""
    tier = load_grid().tier(vllm)
    assert tier is not None, f"vLLM {vllm} is not in the shipped grid"
    oldest = next(
        r.version
        for r in MATRIX.rows
        if IMPL in r.modules
        and tier.imports.get(r.version, {}).get(r.modules[IMPL].rsplit(".", 1)[-1]) == "ok"
    )
    return list(dict.fromkeys([oldest, NAMED, MATRIX.newest.version]))


@pytest.fixture(scope="module")
def releases() -> list[str]:
    chosen = chosen_releases(metadata.version("vllm"))
    assert len(chosen) == 3, chosen
    return chosen


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("example-installed")


def _runs(
    work: Path, releases: list[str], name: str, plant: tuple[str, str] | None
) -> dict[str, list[Outcome]]:
    """The example (with ``plant``) on each release, two at a time."""

    def one(version: str) -> tuple[str, list[Outcome]]:
        target = install(version, work / "releases")
        project = copy_example(work / name / version, plant)
        env = quiet_env(work / "tmp" / name / version)
        return version, run_example(project, "installed", pythonpath=[target, ROOT], env=env)

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(pool.map(one, releases))


def test_the_example_passes_on_the_real_releases(work: Path, releases: list[str]) -> None:
    runs = _runs(work, releases, "good", None)
    for version, outcomes in runs.items():
        row = MATRIX.row(version)
        assert outcomes and {o.release for o in outcomes} == {version}, outcomes
        assert not failing_releases(outcomes), [o for o in outcomes if o.result != "passed"]
        for o in outcomes:
            if o.result == "skipped":
                # only a capability the release lacks, never a class that did not import
                assert " lacks " in o.message, o
                lacking = o.message.split(" lacks ", 1)[1].split(" ", 1)[0]
                assert not row.has(lacking), o
        ran = {o.name for o in outcomes if o.result == "passed"}
        assert {"test_failed_loads_are_reported_or_unknown", "test_shutdown_once"} <= ran
    # the MP tests ran where the release has the MP adapters
    assert any(o.name == "test_mp_reply_never_comes" and o.result == "passed" for o in runs[NAMED])


@pytest.mark.parametrize("bug", sorted(BUGS))
def test_a_planted_bug_is_caught_on_the_real_releases_it_affects(
    bug: str, work: Path, releases: list[str]
) -> None:
    good, bad, capability = BUGS[bug]
    runs = _runs(work, releases, bug, (good, bad))
    caught = [v for v in releases if v in failing_releases(runs[v])]
    affected = [v for v in releases if not MATRIX.row(v).has(capability)]
    assert affected, f"none of {releases} lacks {capability.value}: the run proves nothing"
    assert caught == affected
