"""``lmcache-compat doctor``: what is installed, and what that means, without importing it."""

from __future__ import annotations

import platform
import sys
from typing import Any

from lmcache_compat.catalog import CATALOG
from lmcache_compat.errors import LMCacheVersionError
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
    capabilities = [
        {
            "capability": row.capability.value,
            "member": row.member,
            "since": row.since,
            "expected": expectation(row.since, lmcache),
            "fallback": row.fallback_result,
            "impact": row.impact,
        }
        for row in CATALOG
    ]
    return {
        "python": platform.python_version(),
        "python_executable": sys.executable,
        "lmcache_compat": __version__,
        "lmcache": lmcache_raw,
        "vllm": installed_distribution_version("vllm"),
        "capabilities_basis": "LMCache version (from package metadata), not probed on a live "
        "engine",
        "capabilities": capabilities,
        "notes": notes,
    }


def format_doctor(report: dict[str, Any]) -> str:
    """The human-readable ``doctor`` output."""
    lines = [
        "lmcache-compat doctor",
        f"  Python          {report['python']} ({report['python_executable']})",
        f"  lmcache-compat  {report['lmcache_compat']}",
        f"  LMCache         {report['lmcache'] or 'not installed'}",
        f"  vLLM            {report['vllm'] or 'not installed'}",
        "",
        "Capabilities (expected from the installed LMCache version, not probed on a live engine):",
    ]
    rows = [("capability", "since", "expected", "without it")]
    for cap in report["capabilities"]:
        rows.append(
            (
                cap["capability"],
                cap["since"],
                _EXPECTATION_WORDS[cap["expected"]].split(" (")[0],
                cap["impact"] if cap["expected"] != "yes" else "-",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    for r in rows:
        lines.append(
            f"  {r[0]:<{widths[0]}}  {r[1]:<{widths[1]}}  {r[2]:<{widths[2]}}  {r[3]}".rstrip()
        )
    for note in report["notes"]:
        lines.append("")
        lines.append(f"Note: {note}")
    return "\n".join(lines)
