"""The grid tier's measurement as ``lmcache_compat/upstream/data/vllm_grid.json`` holds it.

:func:`tier_json` turns the driver's report (and the vLLM unit-test runs) into one vLLM's entry
of the shipped file, in exactly the shape :func:`lmcache_compat.upstream.grid.tier_from_json` reads;
:func:`render` writes the whole file in its one canonical, readable layout (versions in version
order, aspects in :data:`~lmcache_compat.upstream.grid.ASPECTS` order, every other key sorted; a
release's
imports and each cell on one line); :func:`differences` says, line by line, where a shipped
entry and a fresh measurement disagree. Used by ``test_grid.py`` and
``scripts/record_vllm_grid.py``. Imports neither vLLM nor LMCache.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from lmcache_compat.upstream.grid import ASPECTS, CONNECTOR_KEYS, MP_ASPECTS, MP_CONNECTOR_KEYS

__all__ = [
    "FORMAT",
    "RECORDED_BY",
    "differences",
    "render",
    "tier_json",
    "unit_summary",
]

FORMAT = 1
RECORDED_BY = "scripts/record_vllm_grid.py; checked by the grid-vllm* tox tiers"
#: The test file vLLM's sdist ships (``tests/tiers/vllm_unit/run_vllm_tests.py``).
UNIT_TEST_FILE = "tests/v1/kv_connector/unit/test_lmcache_connector.py"


# --- the driver's report -> one tier --------------------------------------------------------------


def _crash_text(child: Mapping[str, Any]) -> str | None:
    report = child.get("report") or {}
    if child.get("failure") is None and not report.get("error"):
        return None
    how = child.get("failure") or "exit status 1"
    error = report.get("error")
    step = report.get("step") or "start-up"
    text = f"the child process ended ({how}) during {step}"
    return f"{text}: {sanitize(error)}" if error else text


def _imports(child: Mapping[str, Any]) -> dict[str, str]:
    report = child.get("report") or {}
    facts = dict(report.get("imports") or {})
    crash = _crash_text(child)
    step = str(report.get("step") or "")
    if crash is not None and step.startswith("import "):
        facts[step.removeprefix("import ")] = crash
    elif crash is not None and not facts:
        facts["child"] = crash
    return facts


def _pair(child: Mapping[str, Any]) -> dict[str, Any]:
    report = child.get("report") or {}
    connectors = (report.get("pair") or {}).get("connectors") or {}
    crash = _crash_text(child) or "the child process did not report this connector"
    out: dict[str, Any] = {}
    for key in CONNECTOR_KEYS:
        cells = connectors.get(key)
        if cells is None:
            cells = {a: {"status": "broken", "detail": crash} for a in ASPECTS}
        out[key] = {a: cells[a] for a in ASPECTS if a in cells}
    return {"connectors": out}


def _mp(child: Mapping[str, Any]) -> dict[str, Any] | None:
    """Both MP connectors' cells over this release (``None``: not an MP release here)."""
    report = child.get("report") or {}
    connectors = report.get("mp")
    if connectors is None:
        return None
    crash = _crash_text(child) or "the child process did not report this connector"
    out: dict[str, Any] = {}
    for key in MP_CONNECTOR_KEYS:
        cells = connectors.get(key)
        if cells is None:
            cells = {"builds": {"status": "broken", "detail": crash}}
        out[key] = {a: cells[a] for a in MP_ASPECTS if a in cells}
    return {"connectors": out}


def _versions(items: Iterable[str]) -> list[str]:
    from packaging.version import Version

    return sorted(items, key=Version)


def notes(report: Mapping[str, Any], tier: Mapping[str, Any]) -> list[str]:
    """What a reader of the tier needs besides the cells (deterministic, from the report)."""
    out: list[str] = []
    side: dict[str, Any] = {}
    built: list[str] = []
    not_built: dict[str, str] = {}
    handover: dict[str, dict[str, Any]] = {}
    for release in _versions(report.get("pairs", ())):
        child = (report.get("children") or {}).get(release, {})
        data = child.get("report") or {}
        side = data.get("vllm_side") or side
        worker = ((data.get("facts") or {}).get("compat") or {}).get("worker")
        if worker == "built":
            built.append(release)
        elif worker:
            not_built[release] = str(worker)
        if data.get("handover"):
            handover[release] = data["handover"]
    pin = report.get("torch_pin")
    out.append(
        f"measured with torch {report.get('torch')} (vLLM {report.get('vllm')} pins "
        f"{pin or 'no torch'}) on a CPU-only machine"
    )
    if side:
        if not side.get("invalid_block_ids"):
            out.append(
                "no failed-load path: KVConnectorOutput has no invalid_block_ids (vLLM 0.11.2 "
                "on), so a block LMCache failed to load is used as if it had loaded"
            )
        elif not side.get("has_policy"):
            out.append("no kv_load_failure_policy: vLLM always recomputes a failed load")
        else:
            out.append(f"kv_load_failure_policy defaults to {side.get('default_policy')!r}")
    if built:
        out.append(
            "worker role built on CPU (no LMCache engine; a stand-in engine served vLLM's real "
            f"worker step) for LMCache {', '.join(built)}"
        )
    if not_built:
        errors = sorted(set(not_built.values()))
        out.append(
            f"worker role needs a GPU for LMCache {', '.join(not_built)} ({'; '.join(errors)}): "
            "the worker-side calls ran on the scheduler-role connector"
        )
    if handover:
        ours = {r: h.get("compat", {}) for r, h in handover.items()}
        theirs = {r: h.get("vllm", {}) for r, h in handover.items()}
        good = all(
            o.get("registered")
            and o.get("start_load_kv") == "ok"
            and o.get("engine_got_the_caches")
            for o in ours.values()
        )
        outcomes = sorted({str(t.get("start_load_kv")) for t in theirs.values()})
        out.append(
            f"LMCache {', '.join(handover)} (no register_kv_caches): with LMCacheCompatConnector "
            + (
                "the registered KV caches reach the release's start_load_kv"
                if good
                else "the KV-cache hand-over FAILED"
            )
            + f"; with vLLM's connector start_load_kv gives: {'; '.join(outcomes)}"
        )
    unit = tier.get("unit_tests")
    if unit is None:
        out.append(f"vLLM {report.get('vllm')}'s sdist does not ship {UNIT_TEST_FILE}")
    return out


def tier_json(report: Mapping[str, Any], unit_tests: Mapping[str, Any] | None) -> dict[str, Any]:
    """One vLLM's entry of ``vllm_grid.json`` from the driver's report and the unit tests."""
    children: Mapping[str, Any] = report.get("children") or {}
    pairs = set(report.get("pairs") or ())
    tier: dict[str, Any] = {
        "torch": report.get("torch", ""),
        "imports": {v: _imports(children[v]) for v in _versions(children)},
        "pairs": {v: _pair(children[v]) for v in _versions(pairs) if v in children},
        "unit_tests": None if unit_tests is None else dict(unit_tests),
    }
    mp = {v: _mp(children[v]) for v in _versions(children)}
    tier["mp"] = {v: run for v, run in mp.items() if run is not None}
    tier["notes"] = notes(report, tier)
    return tier


# --- vLLM's unit tests ------------------------------------------------------------------------


def sanitize(text: str) -> str:
    """One line, without addresses, object ids or directories."""
    line = text.strip().splitlines()[0] if text.strip() else ""
    line = re.sub(r" at 0x[0-9a-fA-F]+", "", line)
    line = re.sub(r"id='\d+'", "id=...", line)
    line = re.sub(r"(/[^\s'\"]+)+/", "", line)
    return line[:240]


def unit_summary(result: Any) -> dict[str, Any]:
    """Counts and the tests that did not pass, from a ``run_vllm_tests.RunResult``."""
    not_passed = {
        nodeid.split("::", 1)[-1]: f"{o.outcome} ({o.phase}): {sanitize(o.message)}".rstrip(": ")
        for nodeid, o in sorted(result.outcomes.items())
        if o.outcome != "passed"
    }
    return {
        "passed": result.count("passed"),
        "failed": result.count("failed"),
        "error": result.count("error"),
        "skipped": result.count("skipped"),
        "collection_errors": len(result.collect_errors),
        "not_passed": not_passed,
    }


def unit_tests_json(
    sha256: str, compat: Mapping[str, Any], vllm: Mapping[str, Any]
) -> dict[str, Any]:
    ours, theirs = compat["not_passed"], vllm["not_passed"]
    worse = sorted(t for t in ours if t not in theirs)
    shared = sorted(t for t in ours if t in theirs)
    if worse:
        verdict = f"LMCacheCompatConnector fails {len(worse)} test(s) vLLM's own class passes"
    elif shared:
        verdict = (
            f"every test vLLM's own class passes passes with LMCacheCompatConnector; "
            f"{len(shared)} fail with both classes"
            + (
                " the same way"
                if all(ours[t] == theirs[t] for t in shared)
                else " (differently: see not_passed)"
            )
        )
    else:
        verdict = "every test passes with both classes"
    return {
        "file": UNIT_TEST_FILE,
        "sdist_sha256": sha256,
        "compat": dict(compat),
        "vllm": dict(vllm),
        "verdict": verdict,
    }


# --- the file -------------------------------------------------------------------------------------


def _is_version(key: str) -> bool:
    from packaging.version import InvalidVersion, Version

    try:
        Version(key)
    except InvalidVersion:
        return False
    return key[:1].isdigit()


def _ordered_keys(data: Mapping[str, Any]) -> list[str]:
    keys = list(data)
    if keys and all(_is_version(k) for k in keys):
        return _versions(keys)
    if keys and set(keys) <= set(ASPECTS):
        return [a for a in ASPECTS if a in data]
    if set(keys) == {"status", "detail"}:
        return ["status", "detail"]
    return sorted(keys)


def _one_line(value: Any) -> bool:
    return isinstance(value, dict) and all(
        isinstance(v, (str, int, float, bool)) or v is None for v in value.values()
    )


def _render(value: Any, indent: int) -> str:
    pad = " " * (indent + 1)
    if isinstance(value, dict):
        if not value:
            return "{}"
        if _one_line(value):
            inner = ", ".join(
                f"{json.dumps(k)}: {json.dumps(value[k])}" for k in _ordered_keys(value)
            )
            return "{" + inner + "}"
        items = [
            f"{pad}{json.dumps(k)}: {_render(value[k], indent + 1)}" for k in _ordered_keys(value)
        ]
        return "{\n" + ",\n".join(items) + "\n" + " " * indent + "}"
    if isinstance(value, list):
        if not value:
            return "[]"
        items = [f"{pad}{_render(v, indent + 1)}" for v in value]
        return "[\n" + ",\n".join(items) + "\n" + " " * indent + "]"
    return json.dumps(value)


def render(grid: Mapping[str, Any]) -> str:
    """The canonical text of ``vllm_grid.json``."""
    return _render(dict(grid), 0) + "\n"


# --- comparing --------------------------------------------------------------------------------


def _text(value: Any) -> str:
    if isinstance(value, dict) and set(value) == {"status", "detail"}:
        return f"{value['status']}: {value['detail']}" if value["detail"] else value["status"]
    return json.dumps(value, sort_keys=True)


def differences(shipped: Any, fresh: Any, path: tuple[str, ...] = ()) -> list[str]:
    """``where: shipped X, measured Y`` for every leaf (or cell) that differs."""
    where = " / ".join(path) or "(the tier)"
    if isinstance(shipped, dict) and isinstance(fresh, dict):
        if set(shipped) == {"status", "detail"} and set(fresh) == {"status", "detail"}:
            if shipped != fresh:
                return [f"{where}:\n    shipped  {_text(shipped)}\n    measured {_text(fresh)}"]
            return []
        lines: list[str] = []
        for key in _ordered_keys({**shipped, **fresh}):
            if key not in fresh:
                lines.append(f"{where} / {key}: shipped, not measured now")
            elif key not in shipped:
                lines.append(f"{where} / {key}: measured now, not in the shipped grid")
            else:
                lines += differences(shipped[key], fresh[key], (*path, key))
        return lines
    if shipped != fresh:
        return [f"{where}:\n    shipped  {_text(shipped)}\n    measured {_text(fresh)}"]
    return []
