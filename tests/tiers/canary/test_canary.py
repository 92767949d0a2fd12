"""``tox -e canary``: the newest LMCache (pre-releases and dev builds included) and the newest
vLLM, as the index publishes them today (see :mod:`tests.tiers.canary.prepare`). Not in ``ci``: its
answer changes when upstream publishes.

1. static: the downloaded artifact is scanned (nothing imported) and compared with the shipped
   matrix's newest row (or its own row when the matrix has it): capabilities added or lost,
   classes moved or missing, parameter and type changes, found by name where they moved;
2. live: the release's classes imported beside the newest vLLM and probed; the probe must agree
   with the static scan;
3. the seed scenario of the grid (:mod:`tests.tiers.grid.scenario`) over the pair, both connectors.

What fails the canary: a capability the newest matrix row has and this release lacks, a catalog
class that cannot be found, a probe that disagrees with the scan, a degraded or broken cell of
``LMCacheCompatConnector``. Everything else new is reported (the end of the pytest output and
``$LMCACHE_COMPAT_CANARY_REPORT``) for a maintainer to add to the shipped data.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from lmcache_compat.errors import NotInMatrixError
from lmcache_compat.upstream.diff import ChangeKind, ReleaseView, diff_releases
from lmcache_compat.upstream.grid import ASPECTS, CONNECTOR_KEYS, load_grid
from lmcache_compat.upstream.matrix import load_matrix
from lmcache_compat.upstream.scanner import ScanResult, scan

pytestmark = [pytest.mark.real, pytest.mark.canary]

ROOT = Path(__file__).resolve().parents[3]
DRIVER_TIMEOUT = 1800


@pytest.fixture(scope="module")
def plan() -> dict[str, Any]:
    where = os.environ.get("LMCACHE_COMPAT_CANARY_DIR")
    if not where or not Path(where, "plan.json").exists():
        pytest.fail("no canary plan: run through tox -e canary (tests/tiers/canary/prepare.py)")
    data: dict[str, Any] = json.loads(Path(where, "plan.json").read_text())
    return data


@pytest.fixture(scope="module")
def scanned(plan: dict[str, Any]) -> ScanResult:
    return scan(plan["lmcache"]["artifact"])


def test_static_scan_against_the_shipped_matrix(
    plan: dict[str, Any], scanned: ScanResult, report: dict[str, dict[str, Any]]
) -> None:
    version = plan["lmcache"]["version"]
    matrix = load_matrix()
    try:
        base = matrix.row(version)
        relation = f"in the shipped matrix: compared with its own row ({base.version})"
    except NotInMatrixError:
        from packaging.version import Version

        before = [r for r in matrix.rows if Version(r.version) < Version(version)]
        base = before[-1] if before else matrix.rows[0]
        newest = " (newer than every row)" if base is matrix.newest else ""
        relation = (
            f"NEW: not in the shipped matrix{newest}; compared with the release before it, "
            f"{base.version}"
        )
    d = diff_releases(ReleaseView.from_row(base), ReleaseView.from_scan(scanned))
    lost = sorted(c.member or "" for c in d.of_kind(ChangeKind.CAPABILITY_REMOVED))
    added = sorted(c.member or "" for c in d.of_kind(ChangeKind.CAPABILITY_ADDED))
    moved = [f"{c.cls}: {c.before} -> {c.after}" for c in d.of_kind(ChangeKind.CLASS_MOVED)]
    by_search = sorted(k for k, how in scanned.found_by.items() if how == "search")
    artifact, chosen = Path(plan["lmcache"]["artifact"]).name, plan["lmcache"]["chosen"]
    present, total = sum(scanned.capabilities.values()), len(scanned.capabilities)
    unlisted = ", ".join(by_search) or "none"
    lines = [
        f"LMCache {version} ({artifact}, {chosen})",
        relation,
        f"capabilities: {present} of {total} present",
        f"capabilities added: {', '.join(added) or 'none'}",
        f"capabilities LOST: {', '.join(lost) or 'none'}",
        f"classes moved: {'; '.join(moved) or 'none'}",
        f"classes found by name at a path locations.py does not list: {unlisted}"
        + (" (add the path to lmcache_compat/upstream/locations.py)" if by_search else ""),
        f"classes MISSING: {', '.join(sorted(scanned.missing_classes)) or 'none'}",
        f"breaking surface changes: {sum(c.breaking for c in d.changes)} of {len(d.changes)}",
        *d.format().splitlines()[1:],
    ]
    report["static"] = {"lines": lines, "diff": d.to_json(), "base": base.version}
    catalog_owners = {"LMCacheConnectorV1Impl", "LMCacheEngine"}
    missing = catalog_owners & set(scanned.missing_classes)
    assert not missing, f"LMCache {version}: {sorted(missing)} not found anywhere in the package"
    assert not lost, (
        f"LMCache {version} lacks {lost}, which {base.version} has: a user upgrading loses them "
        "(see the diff above)"
    )
    if base.version == version:
        assert not d.changes, f"the shipped row of {version} is stale: {d.format()}"


def test_live_probe_agrees_with_the_static_scan(
    plan: dict[str, Any], scanned: ScanResult, tmp_path: Path, report: dict[str, dict[str, Any]]
) -> None:
    from tests.tiers.real.sweep import introspect

    target = plan["lmcache"]["target"]
    if target is None:
        pytest.fail(f"LMCache {plan['lmcache']['version']} ships no wheel: nothing to import")
    live = introspect(Path(target), tmp_path)
    errors = {m: o["error"] for m, o in live["modules"].items() if "error" in o}
    static = {k: v for k, v in scanned.capabilities.items() if k in (live["capabilities"] or {})}
    lines = [
        f"imported beside vLLM {plan['vllm']['version']}: "
        + (", ".join(f"{m}: {e}" for m, e in errors.items()) or "every scanned module imports"),
        "live probe == static scan"
        if live["capabilities"] == static
        else f"live probe {live['capabilities']} != static scan {static}",
    ]
    report["live"] = {"lines": lines, "introspect": live}
    assert live["capabilities"] is not None, f"the engine class did not import: {errors}"
    assert live["capabilities"] == static


def test_seed_scenario_on_the_newest_vllm(
    plan: dict[str, Any], tmp_path: Path, report: dict[str, dict[str, Any]]
) -> None:
    from tools.lmcache_targets import quiet_env

    version = plan["lmcache"]["version"]
    target = plan["lmcache"]["target"]
    if target is None:
        pytest.fail(f"LMCache {version} ships no wheel: the scenario needs an installed release")
    releases = Path(target).parent
    out = tmp_path / "report.json"
    env = quiet_env(tmp_path / "parent")
    env["PYTHONPATH"] = str(ROOT)
    env["PYTHONHASHSEED"] = "0"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.tiers.grid.driver",
            str(releases),
            str(tmp_path),
            str(out),
            "--releases",
            version,
            "--pairs",
            version,
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=str(tmp_path),
        timeout=DRIVER_TIMEOUT,
    )
    assert r.returncode == 0 and out.exists(), r.stdout[-3000:] + r.stderr[-6000:]
    child = json.loads(out.read_text())["children"][version]
    assert child["failure"] is None, child["failure"]
    cells = child["report"]["pair"]["connectors"]
    vllm = plan["vllm"]
    measured = load_grid().tier(vllm["version"])
    lines = [
        f"vLLM {vllm['version']} ({vllm['chosen']}; "
        + ("measured by the grid" if measured else "NOT in the shipped grid")
        + f"; pins from {'generated' if vllm['constraints_generated'] else 'shipped'} "
        f"{Path(vllm['constraints']).name})",
        f"torch {vllm['torch']}" + (f" ({vllm['torch_note']})" if vllm["torch_note"] else ""),
    ]
    bad: list[str] = []
    for key in CONNECTOR_KEYS:
        run = cells[key]
        lines.append(f"{key}: " + ", ".join(f"{a} {run[a]['status']}" for a in ASPECTS if a in run))
        for aspect in ASPECTS:
            cell = run.get(aspect)
            if cell is not None and cell["status"] in ("degraded", "broken"):
                lines.append(f"  {aspect} {cell['status']}: {cell['detail']}")
                if key == "compat":
                    bad.append(f"{aspect}: {cell['detail']}")
    report["scenario"] = {"lines": lines, "cells": cells, "imports": child["report"]["imports"]}
    assert not bad, (
        f"LMCacheCompatConnector over LMCache {version} on vLLM {vllm['version']}: {bad}"
    )
