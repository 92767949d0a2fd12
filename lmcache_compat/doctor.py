"""``lmcache-compat doctor``: what is installed, and what that means, without importing it."""

from __future__ import annotations

import contextlib
import platform
import sys
from typing import Any

from lmcache_compat.catalog import CATALOG
from lmcache_compat.errors import LMCacheVersionError
from lmcache_compat.known_issues import verdict
from lmcache_compat.versions import (
    expectation,
    installed_distribution_version,
    installed_lmcache_version,
)

__all__ = ["doctor_report", "format_doctor"]

_EXPECTATION_WORDS = {
    "yes": "yes",
    "no": "NO",
    "maybe": "maybe (pre-release of the first release that has it)",
    "unknown": "unknown (LMCache version unknown)",
}


def doctor_report() -> dict[str, Any]:
    """Everything ``doctor`` knows, as one JSON-ready object. Imports neither LMCache nor vLLM."""
    from lmcache_compat import __version__

    lmcache_raw = installed_distribution_version("lmcache")
    notes: list[str] = []
    try:
        lmcache = installed_lmcache_version()
    except LMCacheVersionError as exc:
        lmcache = None
        notes.append(f"{exc}; capability expectations are unknown.")
    if lmcache_raw is None:
        notes.append(
            "LMCache is not installed: the table shows when each capability appeared "
            "(pip install lmcache to use it)."
        )
    vllm_raw = installed_distribution_version("vllm")
    scanned, basis = _scan_installed(lmcache_raw, notes)
    capabilities = [
        {
            "capability": row.capability.value,
            "member": row.member,
            "since": row.since,
            "expected": expectation(row.since, lmcache),
            "present": None if scanned is None else scanned.get(row.capability.value, False),
            "fallback": row.fallback_result,
            "impact": row.impact,
        }
        for row in CATALOG
    ]
    pair = verdict(vllm_raw, lmcache_raw)
    return {
        "python": platform.python_version(),
        "python_executable": sys.executable,
        "lmcache_compat": __version__,
        "lmcache": lmcache_raw,
        "vllm": vllm_raw,
        "engine_sources": _engine_sources(lmcache_raw, vllm_raw),
        "capabilities_basis": basis,
        "capabilities": capabilities,
        "verdict": pair["verdict"],
        "issues": pair["issues"],
        "notes": notes + ([pair["reason"]] if pair["reason"] else []),
    }


def _scan_installed(
    lmcache_raw: str | None, notes: list[str]
) -> tuple[dict[str, bool] | None, str]:
    """Capabilities of the installed LMCache, read statically from its files (never imported)."""
    if lmcache_raw is None:
        return None, "LMCache is not installed: 'expected' shows when each capability appeared"
    from lmcache_compat.scanner import scan
    from lmcache_compat.sources import ScanError

    try:
        result = scan()
    except ScanError as exc:
        notes.append(
            f"could not scan the installed LMCache ({exc}); 'expected' is from its version"
        )
        return None, "LMCache version (package metadata); the files could not be scanned"
    return result.capabilities, (
        "'present': read with ast from the installed LMCache files (nothing imported); "
        "'expected': from its version alone"
    )


_NATIVE = "vllm/distributed/kv_transfer/kv_connector/v1/lmcache_integration/vllm_v1_adapter.py"
_OWN = "lmcache/integration/vllm/vllm_v1_adapter.py"


def _engine_sources(lmcache_raw: str | None, vllm_raw: str | None) -> list[dict[str, Any]]:
    """Where an LMCacheConnectorV1Impl would come from: LMCache's module (the default) and vLLM's
    vendored copy (``use_native=True``), located through package metadata."""
    from importlib import metadata
    from pathlib import Path

    from lmcache_compat.known_issues import _in
    from lmcache_compat.versions import parse_version

    out: list[dict[str, Any]] = []
    for dist, rel, label in (
        ("lmcache", _OWN, "LMCache's own module (default)"),
        ("vllm", _NATIVE, "vLLM's vendored copy (use_native=True)"),
    ):
        try:
            path = Path(str(metadata.distribution(dist).locate_file(rel)))
        except metadata.PackageNotFoundError:
            continue
        entry: dict[str, Any] = {"source": label, "path": str(path), "present": path.is_file()}
        if dist == "vllm" and lmcache_raw is not None:
            with contextlib.suppress(ValueError):  # unparseable: say nothing
                entry["imports_with_installed_lmcache"] = _in(
                    parse_version(lmcache_raw), ("0.3.9", "0.3.12")
                )
        out.append(entry)
    return out


def format_doctor(report: dict[str, Any]) -> str:
    """The human-readable ``doctor`` output."""
    lines = [
        "lmcache-compat doctor",
        f"  Python          {report['python']} ({report['python_executable']})",
        f"  lmcache-compat  {report['lmcache_compat']}",
        f"  LMCache         {report['lmcache'] or 'not installed'}",
        f"  vLLM            {report['vllm'] or 'not installed'}",
    ]
    for src in report["engine_sources"]:
        state = "found" if src["present"] else "absent"
        extra = ""
        if "imports_with_installed_lmcache" in src:
            extra = (
                " (imports with this LMCache)"
                if src["imports_with_installed_lmcache"]
                else " (does NOT import with this LMCache: needs 0.3.9 ... 0.3.12)"
            )
        lines.append(f"  engine source   {src['source']}: {state}{extra}")
    lines += ["", f"Capabilities ({report['capabilities_basis']}):"]
    scanned = any(c["present"] is not None for c in report["capabilities"])
    header = ("capability", "since", "present" if scanned else "expected", "without it")
    rows = [header]
    for cap in report["capabilities"]:
        have = cap["present"] if scanned else cap["expected"] == "yes"
        shown = (
            ("yes" if have else "NO")
            if scanned
            else _EXPECTATION_WORDS[cap["expected"]].split(" (")[0]
        )
        rows.append((cap["capability"], cap["since"], shown, "-" if have else cap["impact"]))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    for r in rows:
        lines.append(
            f"  {r[0]:<{widths[0]}}  {r[1]:<{widths[1]}}  {r[2]:<{widths[2]}}  {r[3]}".rstrip()
        )
    lines += [
        "",
        f"Verdict for vLLM {report['vllm'] or '-'} + LMCache {report['lmcache'] or '-'}: "
        f"{report['verdict'].upper()}",
    ]
    for issue in report["issues"]:
        lines.append(f"  [{issue['severity']}] {issue['connector']}: {issue['problem']}")
        lines.append(f"      fix: {issue['fix']} ({issue['source']})")
    for note in report["notes"]:
        lines.append("")
        lines.append(f"Note: {note}")
    return "\n".join(lines)
