"""The grid tier of one vLLM (``tox -e grid-vllmX``): measure, then compare with the shipped grid.

One driver process (:mod:`tests.tiers.grid.driver`) imports this env's vLLM and torch once and
forks a
child per LMCache wheel release: which of the release's modules import, and for the seed-scenario
releases every aspect of both connectors (:mod:`tests.tiers.grid.scenario`: what is real and what is
injected is listed there). vLLM's own unit tests of its LMCache connector run with our class and
with vLLM's (where this vLLM's sdist ships them). The fresh measurement, in the shape of
``lmcache_compat/upstream/data/vllm_grid.json``, is written to ``$LMCACHE_COMPAT_GRID_REPORT`` (for
``scripts/record_vllm_grid.py``) before anything is asserted, then must equal the shipped entry
for this vLLM.

About 1-2 minutes on 2 cores once the env exists (most of it the vLLM unit-test runs).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
from packaging.version import Version

from lmcache_compat.upstream.grid import ASPECTS, CONNECTOR_KEYS, DATA_FILE
from lmcache_compat.upstream.shipped import read_data
from tests.tiers.grid.mp_cells import mp_cell_problems
from tools.paths import TIERS
from tools.vllm_grid_data import differences, tier_json, unit_summary, unit_tests_json

pytestmark = [pytest.mark.real, pytest.mark.grid]

ROOT = Path(__file__).resolve().parents[3]
TORCH = "2.13.0+cpu"
#: LMCache's release whose target dir is on the path of vLLM's unit-test runs.
UNIT_TEST_LMCACHE = "0.5.6"
DRIVER_TIMEOUT = 1800
_RANK = {"ok": 0, "n/a": 0, "degraded": 1, "broken": 2}


def _tier_vllm() -> str:
    env = os.environ.get("TOX_ENV_NAME", "")
    if env.startswith("grid-vllm"):
        return env.removeprefix("grid-vllm")
    return metadata.version("vllm")  # PackageNotFoundError: not a grid tier's env


@pytest.fixture(scope="session")
def releases_dir() -> Path:
    value = os.environ.get("LMCACHE_COMPAT_GRID_RELEASES")
    if not value:
        pytest.skip("needs LMCACHE_COMPAT_GRID_RELEASES (run through tox -e grid-vllmX)")
    return Path(value)


@pytest.fixture(scope="session")
def measured(tmp_path_factory: pytest.TempPathFactory, releases_dir: Path) -> dict[str, Any]:
    """The driver's report (one process, a forked child per release)."""
    from tools.lmcache_targets import quiet_env

    work = tmp_path_factory.mktemp("grid")
    env = quiet_env(work / "parent")
    env["PYTHONPATH"] = str(ROOT)
    env["PYTHONHASHSEED"] = "0"
    report = work / "report.json"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.tiers.grid.driver",
            str(releases_dir),
            str(work),
            str(report),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=str(work),
        timeout=DRIVER_TIMEOUT,
    )
    assert r.returncode == 0 and report.exists(), r.stdout[-3000:] + r.stderr[-6000:]
    print(r.stdout.strip().splitlines()[-1])
    data: dict[str, Any] = json.loads(report.read_text())
    return data


def _runner() -> Any:
    """``tests/tiers/vllm_unit/run_vllm_tests.py`` (a script folder, not a package)."""
    path = TIERS / "vllm_unit" / "run_vllm_tests.py"
    spec = importlib.util.spec_from_file_location("run_vllm_tests", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("run_vllm_tests", module)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def unit_tests(releases_dir: Path) -> dict[str, Any] | None:
    """vLLM's own ``test_lmcache_connector.py`` with our class and with vLLM's (``None`` where
    this vLLM's sdist does not ship it)."""
    runner = _runner()
    vllm = _tier_vllm()
    if vllm not in runner.SDIST_SHA256:
        return None
    cache = Path(os.environ.get("LMCACHE_COMPAT_SDIST_CACHE") or runner.DEFAULT_CACHE)
    summaries = {}
    for connector in ("compat", "vllm"):
        result = runner.run_tests(
            vllm,
            connector=connector,
            python=sys.executable,
            pythonpath=[releases_dir / UNIT_TEST_LMCACHE, ROOT],
            cache_dir=cache,
        )
        print(f"vLLM {vllm} unit tests, {connector}: {result.summary()}")
        summaries[connector] = unit_summary(result)
    return unit_tests_json(runner.SDIST_SHA256[vllm], summaries["compat"], summaries["vllm"])


@pytest.fixture(scope="session")
def fresh(measured: dict[str, Any], unit_tests: dict[str, Any] | None) -> dict[str, Any]:
    """This vLLM's entry of ``vllm_grid.json`` as measured now (also written for the
    recording script)."""
    tier = tier_json(measured, unit_tests)
    target = os.environ.get("LMCACHE_COMPAT_GRID_REPORT")
    if target:
        Path(target).parent.mkdir(parents=True, exist_ok=True)
        Path(target).write_text(
            json.dumps({"vllm": measured["vllm"], "tier": tier}, indent=1, sort_keys=True)
        )
    return tier


@pytest.fixture(scope="session")
def shipped() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(read_data(DATA_FILE))
    return data


def _pairs(tier: dict[str, Any]) -> dict[str, dict[str, dict[str, dict[str, str]]]]:
    return {release: pair["connectors"] for release, pair in tier["pairs"].items()}


# --- the tier ---------------------------------------------------------------------------------


def test_installed_vllm_and_torch(measured: dict[str, Any]) -> None:
    assert measured["vllm"] == _tier_vllm()
    assert measured["torch"] == TORCH


def test_every_child_ran_its_own_release(measured: dict[str, Any]) -> None:
    for release, child in measured["children"].items():
        lmcache = child["report"].get("lmcache")
        if lmcache is None:  # crashed before importing LMCache: recorded in the data
            continue
        assert lmcache == {"version": release, "from_target": True}, release
        impl = child["report"].get("impl")
        if impl is not None:  # a seed-scenario child: this checkout's connector
            assert Path(impl["compat_file"]) == ROOT / "lmcache_compat" / "vllm" / "connector.py"


def test_the_shipped_grid_is_this_measurement(
    fresh: dict[str, Any], shipped: dict[str, Any], measured: dict[str, Any]
) -> None:
    vllm = measured["vllm"]
    entry = shipped["vllm"].get(vllm)
    assert entry is not None, (
        f"vLLM {vllm} is not in lmcache_compat/upstream/data/vllm_grid.json: "
        "run python scripts/record_vllm_grid.py"
    )
    diff = differences(entry, fresh, (f"vLLM {vllm}",))
    assert not diff, (
        "the shipped grid and this measurement disagree (if the change is expected, "
        "re-record with python scripts/record_vllm_grid.py):\n" + "\n".join(diff)
    )


def test_our_connector_never_does_worse_than_vllms(fresh: dict[str, Any]) -> None:
    """Aspect by aspect; an aspect vLLM's connector could not reach (it cannot be built over
    the release) counts as broken for it."""
    never = {"status": "broken", "detail": "not measured"}
    worse = [
        f"LMCache {release} / {aspect}: ours {runs['compat'][aspect]} vs "
        f"{runs['vllm'].get(aspect, never)}"
        for release, runs in _pairs(fresh).items()
        for aspect in ASPECTS
        if _RANK[runs["compat"][aspect]["status"]]
        > _RANK[runs["vllm"].get(aspect, never)["status"]]
    ]
    assert not worse, "\n".join(worse)


def test_our_connector_has_no_problem_on_any_measured_pair(fresh: dict[str, Any]) -> None:
    """Where a release lacks a capability our connector falls back (``n/a``); nothing is
    ``degraded`` or ``broken``."""
    problems = [
        f"LMCache {release} / {aspect}: {cell['status']}: {cell['detail']}"
        for release, runs in _pairs(fresh).items()
        for aspect, cell in runs["compat"].items()
        if cell["status"] not in ("ok", "n/a")
    ]
    assert not problems, "\n".join(problems)


def test_every_aspect_of_both_connectors_is_recorded(fresh: dict[str, Any]) -> None:
    """All aspects, in order; only ``builds`` for a connector that cannot be built."""
    for release, runs in _pairs(fresh).items():
        assert sorted(runs) == sorted(CONNECTOR_KEYS), release
        for key, cells in runs.items():
            if cells["builds"]["status"] == "broken":
                assert list(cells) == ["builds"], (release, key)
            else:
                assert list(cells) == list(ASPECTS), (release, key)
            for cell in cells.values():
                assert cell["detail"] and "\n" not in cell["detail"], (release, key, cell)
    assert all(runs["compat"]["builds"]["status"] == "ok" for runs in _pairs(fresh).values())


def test_vllm_unit_tests_pass_with_our_class(unit_tests: dict[str, Any] | None) -> None:
    """Every test of vLLM's own ``test_lmcache_connector.py`` passes with our class, except
    those that fail the same way with vLLM's own class; never worse."""
    if unit_tests is None:
        # Only a vLLM older than every pinned sdist may go without: 0.11.x sdists do not ship
        # the file (``run_vllm_tests.py survey 0.11.0 0.11.2``), so nothing is run there.
        first = min(_runner().SDIST_SHA256, key=Version)
        assert Version(_tier_vllm()) < Version(first), f"vLLM {_tier_vllm()} has no sdist pin"
        return
    ours, theirs = unit_tests["compat"], unit_tests["vllm"]
    assert ours["collection_errors"] == 0
    assert ours["passed"] > 0
    worse = {t: o for t, o in ours["not_passed"].items() if theirs["not_passed"].get(t) != o}
    assert not worse, json.dumps(worse, indent=1)
    assert ours["passed"] >= theirs["passed"]


def test_kv_caches_reach_releases_without_register_kv_caches(measured: dict[str, Any]) -> None:
    """LMCache before 0.3.12 has no ``register_kv_caches``: it finds its KV caches through the
    forward context on the first ``start_load_kv``, which fails on vLLM >= 0.21.0 ("'ForwardContext'
    object has no attribute 'virtual_engine'"). With our connector the caches vLLM registers are
    put in the impl's ``kv_caches`` dict, and the release's own ``start_load_kv`` hands exactly
    those tensors to its engine's ``post_init``.

    What is real and what is not: the worker role of these releases does not construct on a
    machine without a GPU, so the connector under test is the scheduler-role one built by
    vLLM's factory with the release's real impl; the worker's calls (``register_kv_caches``,
    ``bind_connector_metadata`` with the metadata of a real scheduler step, ``start_load_kv``
    inside vLLM's real ``set_forward_context``) are made on it; the KV caches are zero tensors
    registered as a model runner's attention layers register theirs; the engine that receives
    them is a stand-in (``scenario.StandInEngine``)."""
    checked = 0
    for release, child in measured["children"].items():
        report = child["report"]
        handover = report.get("handover")
        if handover is None:
            continue
        checked += 1
        assert report["impl"]["has"]["register_kv_caches"] is False
        assert handover["compat"] == {
            "registered": True,
            "start_load_kv": "ok",
            "engine_got_the_caches": True,
        }, release
        theirs = handover["vllm"]
        assert theirs["registered"] is False, release
        if report["vllm_side"]["forward_context_virtual_engine"]:
            # the release's own discovery works on this vLLM: the same tensors reach it
            assert theirs["start_load_kv"] == "ok", (release, theirs)
            assert theirs["engine_got_the_caches"] is True, release
        else:
            assert theirs["start_load_kv"] == (
                "AttributeError: 'ForwardContext' object has no attribute 'virtual_engine'"
            ), (release, theirs)
    assert checked >= 3  # 0.3.9, 0.3.9.post1, 0.3.10.post2


def test_mp_connectors_build_wherever_the_release_does(fresh: dict[str, Any]) -> None:
    """Every MP release whose adapter imports here: ours (``LMCacheCompatMPConnector``, given
    the reference's own configuration, only the class name changed) builds both roles, or
    stops exactly where the release's adapter needs a running server (``n/a``, whose detail is
    exactly that reason); never ``broken``, and never worse than the reference on an aspect
    the reference reached (``n/a`` counts worse than ``ok`` here). The reference's cells stand
    beside it in the report."""
    mp = fresh["mp"]
    if (
        importlib.util.find_spec(
            "vllm.distributed.kv_transfer.kv_connector.v1.lmcache_mp_connector"
        )
        is None
    ):
        assert mp == {}  # no MP connector in this vLLM (before 0.11.2): nothing to replace
        return
    assert mp, "no MP release imports its adapter beside this vLLM"
    assert all("compat-mp" in run["connectors"] for run in mp.values())
    problems = mp_cell_problems(mp)
    assert not problems, "\n".join(problems)
