"""The mutation tier (``tox run -e mutation``): plausible next releases made from the newest real
one, one change each (:mod:`tests.tiers.mutation`), checked by ``scan``, ``diff``, ``doctor
--json``, ``resolve`` and the adapters against the rows of :mod:`tests.tiers.mutation.expected`.

``scan`` and ``diff`` run here; ONE subprocess of this (real vLLM) environment imports every
mutated tree in turn under a fresh set of ``lmcache`` modules (:mod:`tests.tiers.mutation.probe`)
for ``resolve`` and the adapters; ``doctor --json`` runs once per tree with the tree first on
``PYTHONPATH``. The table of outcomes is printed and written to ``LMCACHE_COMPAT_MUTATION_REPORT``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from lmcache_compat.upstream.diff import ChangeKind as K
from lmcache_compat.upstream.diff import ReleaseDiff, ReleaseView, diff_releases
from lmcache_compat.upstream.matrix import load_matrix
from lmcache_compat.upstream.scanner import ScanResult, scan
from tests.tiers.mutation.edits import copy_tree
from tests.tiers.mutation.expected import EXPECTED, Expected
from tests.tiers.mutation.mutations import MUTATIONS, Mutation
from tools.paths import ROOT

pytestmark = pytest.mark.real

BY_KIND = {e.kind: e for e in EXPECTED}
CHECKS = ("scan", "diff", "doctor", "resolve", "adapter")


@dataclass
class Outcome:
    mutation: Mutation
    root: Path
    scan: ScanResult
    diff: ReleaseDiff
    doctor: dict[str, Any] = field(default_factory=dict)
    doctor_status: int = 0
    doctor_stderr: str = ""
    probe: dict[str, Any] = field(default_factory=dict)
    cells: dict[str, str] = field(default_factory=dict)


@dataclass
class Run:
    base_scan: ScanResult
    base_doctor: dict[str, Any]
    base_probe: dict[str, dict[str, Any]]
    outcomes: dict[str, Outcome]


def _release() -> Path:
    releases = os.environ.get("LMCACHE_COMPAT_MUTATION_RELEASES")
    if not releases:
        pytest.fail(
            "LMCACHE_COMPAT_MUTATION_RELEASES is unset: run this tier with `tox run -e mutation`"
        )
    return Path(releases) / load_matrix().newest.version


def _doctor(root: Path) -> tuple[dict[str, Any], int, str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), str(ROOT)])}
    proc = subprocess.run(
        [sys.executable, "-m", "lmcache_compat", "doctor", "--json"],
        capture_output=True,
        text=True,
        env=env,
        cwd=root,
        timeout=120,
    )
    try:
        data = json.loads(proc.stdout)
    except json.JSONDecodeError:
        data = {}
    return data, proc.returncode, proc.stderr


def _probe(jobs: list[dict[str, str]], work: Path) -> list[dict[str, Any]]:
    jobs_file = work / "jobs.json"
    jobs_file.write_text(json.dumps(jobs))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-m", "tests.tiers.mutation.probe", str(jobs_file)],
        capture_output=True,
        text=True,
        env=env,
        cwd=work,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    results: list[dict[str, Any]] = json.loads(proc.stdout.strip().splitlines()[-1])
    return results


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    release = _release()
    work = tmp_path_factory.mktemp("mutations")
    base_scan = scan(release)
    base = ReleaseView.from_scan(base_scan)
    outcomes: dict[str, Outcome] = {}
    for i, mutation in enumerate(MUTATIONS):
        root = copy_tree(release, work / f"m{i:02d}")
        mutation.apply(root)
        mutated = scan(root)
        outcomes[mutation.kind] = Outcome(
            mutation, root, mutated, diff_releases(base, ReleaseView.from_scan(mutated))
        )
    places = sorted({m.place.name for m in MUTATIONS})
    jobs = [{"kind": f"baseline {p}", "root": str(release), "place": p} for p in places]
    jobs += [
        {"kind": o.mutation.kind, "root": str(o.root), "place": o.mutation.place.name}
        for o in outcomes.values()
    ]
    with ThreadPoolExecutor(max_workers=2) as pool:
        probed = pool.submit(_probe, jobs, work)
        doctors = list(pool.map(_doctor, [release, *(o.root for o in outcomes.values())]))
        results = probed.result()
    base_doctor = doctors[0][0]
    base_probe = {r["kind"].removeprefix("baseline "): r for r in results[: len(places)]}
    for outcome, (data, status, stderr), result in zip(
        outcomes.values(), doctors[1:], results[len(places) :], strict=True
    ):
        outcome.doctor, outcome.doctor_status, outcome.doctor_stderr = data, status, stderr
        outcome.probe = result
    return Run(base_scan, base_doctor, base_probe, outcomes)


def _expected_caps(base: dict[str, bool], expected: Expected) -> dict[str, bool]:
    lost = {c.value for c in expected.lost}
    return {k: v and k not in lost for k, v in base.items()}


def _undecided_caps(result: ScanResult, cls: str | None) -> set[str]:
    return {k for k, why in result.undecided.items() if cls is not None and cls in why}


def _check_module(base: ScanResult, result: ScanResult, cls: str, e: Expected) -> None:
    """A move changes the class's module (and records the old one as a shim iff it re-exports
    it); every other change keeps it where it was."""
    old, new = base.modules[cls], result.modules.get(cls)
    assert new, "scan: the class was not found"
    moved = e.changes & {K.CLASS_MOVED, K.CLASS_MOVED_REEXPORTED}
    assert (new != old) is bool(moved), f"scan: module {new} (was {old})"
    shim = old in result.reexported_at.get(cls, ())
    assert shim is (K.CLASS_MOVED_REEXPORTED in e.changes), f"scan: shims {result.reexported_at}"


def check_scan(run: Run, o: Outcome, e: Expected) -> str:
    result = o.scan
    undecided = _undecided_caps(result, e.undecided)
    if e.undecided is not None:
        assert e.undecided in result.ambiguous, f"scan: {e.undecided} not reported ambiguous"
        assert len(result.ambiguous[e.undecided]) == 2, result.ambiguous
        assert undecided, "scan: no capability reported undecided"
    else:
        assert not result.ambiguous, f"scan: ambiguous {result.ambiguous}"
        _check_module(run.base_scan, result, o.mutation.place.name, e)
    want = _expected_caps(run.base_scan.capabilities, e)
    got = {k: v for k, v in result.capabilities.items() if k not in undecided}
    assert got == {k: v for k, v in want.items() if k not in undecided}, (
        f"scan: capabilities differ: "
        f"{sorted(k for k in want if want[k] != result.capabilities.get(k))}"
    )
    if e.undecided is not None:
        return f"ambiguous ({len(undecided)} undecided)"
    lost = ", ".join(sorted(c.value for c in e.lost))
    return f"{lost} absent, the rest unchanged" if lost else "unchanged"


def check_diff(run: Run, o: Outcome, e: Expected) -> str:
    kinds = {c.kind for c in o.diff.changes}
    assert kinds == e.changes, f"diff: {sorted(k.name for k in kinds)}"
    assert o.diff.breaking is e.breaking, f"diff: breaking is {o.diff.breaking}"
    names = ", ".join(sorted({c.kind.label for c in o.diff.changes})) or "no change"
    return f"{names}{' (breaking)' if e.breaking else ''}"


def _doctor_caps(data: dict[str, Any]) -> dict[str, bool | None]:
    return {c["capability"]: c["present"] for c in data.get("capabilities", [])}


def check_doctor(run: Run, o: Outcome, e: Expected) -> str:
    assert "Traceback" not in o.doctor_stderr, o.doctor_stderr[-2000:]
    assert o.doctor, f"doctor printed no JSON (status {o.doctor_status}): {o.doctor_stderr}"
    assert o.doctor["verdict"] == run.base_doctor["verdict"], o.doctor["verdict"]
    base = {k: bool(v) for k, v in _doctor_caps(run.base_doctor).items()}
    want: dict[str, bool | None] = dict(_expected_caps(base, e))
    if e.undecided is not None:
        named = o.doctor.get("ambiguous", {}).get(e.undecided, [])
        assert sorted(named) == sorted(o.scan.ambiguous[e.undecided]), "doctor: candidates"
        for cap in _undecided_caps(o.scan, e.undecided):
            want[cap] = None
    got = _doctor_caps(o.doctor)
    assert got == want, f"doctor: {sorted(k for k in want if want[k] != got.get(k))}"
    unknown = sum(v is None for v in got.values())
    return f"verdict {o.doctor['verdict']} as before" + (f", {unknown} unknown" if unknown else "")


def check_resolve(run: Run, o: Outcome, e: Expected) -> str:
    cell: str = o.probe["resolve"]
    assert cell.startswith(e.resolve), cell
    assert "\n" not in cell
    return cell


def check_adapter(run: Run, o: Outcome, e: Expected) -> str:
    cell: str = o.probe["adapter"]
    assert cell.startswith(e.adapter), cell
    assert "\n" not in cell, cell
    if e.adapter == "adapts":
        base = set(run.base_probe[o.mutation.place.name]["capabilities"])
        want = base - {c.value for c in e.lost}
        assert set(o.probe["capabilities"]) == want, (
            f"adapter: {sorted(want ^ set(o.probe['capabilities']))}"
        )
    return cell


CHECKERS = {
    "scan": check_scan,
    "diff": check_diff,
    "doctor": check_doctor,
    "resolve": check_resolve,
    "adapter": check_adapter,
}


def test_every_mutation_has_one_expected_row() -> None:
    assert [m.kind for m in MUTATIONS] == [e.kind for e in EXPECTED]


@pytest.mark.parametrize("check", CHECKS)
@pytest.mark.parametrize("kind", [m.kind for m in MUTATIONS])
def test_mutation(run: Run, kind: str, check: str) -> None:
    outcome = run.outcomes[kind]
    try:
        outcome.cells[check] = CHECKERS[check](run, outcome, BY_KIND[kind])
    except AssertionError as exc:
        outcome.cells[check] = f"FAILED: {str(exc).splitlines()[0]}"
        raise


def test_report(run: Run) -> None:
    """The table the closing note quotes (runs last: the cells come from the tests above)."""
    head = ["change kind", *CHECKS]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for kind, o in run.outcomes.items():
        cells = [o.cells.get(c, "not run").replace("|", "\\|") for c in CHECKS]
        lines.append("| " + " | ".join([kind.replace("|", "\\|"), *cells]) + " |")
    release = load_matrix().newest.version
    text = f"Mutation tier: LMCache {release}, {len(run.outcomes)} mutations\n\n" + "\n".join(lines)
    print("\n" + text)
    report = os.environ.get("LMCACHE_COMPAT_MUTATION_REPORT")
    if report:
        Path(report).write_text(text + "\n")
    assert all("FAILED" not in c for o in run.outcomes.values() for c in o.cells.values())
