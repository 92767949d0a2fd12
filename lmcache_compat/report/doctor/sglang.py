"""``doctor`` for an installed sglang: whether sglang's own LMCache integration works with the
installed LMCache, and what the lmcache-compat backend would do, read from the installed files
of both (nothing is imported).

The installed sglang is read with :func:`~lmcache_compat.sglang.known.reader.read_sglang`
(the reader that produced the shipped sglang grid) and bound against a scan of the installed
LMCache with :func:`~lmcache_compat.sglang.known.bind.bind_pair` (the same binding): for an
sglang release of the grid the verdict is the grid's. The fix names the lmcache-compat plugin
where it serves the pair (:func:`~lmcache_compat.sglang.decisions.plan`), else the LMCache releases
sglang's own integration works with (the same binding over every release of the matrix).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict

from lmcache_compat.errors import LMCacheCompatError
from lmcache_compat.sglang.plugin import BACKEND_NAME
from lmcache_compat.upstream.known_issues import Fix, Issue, other, overall

if TYPE_CHECKING:
    from lmcache_compat.sglang.decisions import Plan
    from lmcache_compat.sglang.known.bind import ModeJSON, PairVerdict
    from lmcache_compat.sglang.known.reader import SglangFacts
    from lmcache_compat.upstream.matrix import ReleaseRow
    from lmcache_compat.upstream.scanner import ScanResult

__all__ = ["SglangCheck", "SglangJSON", "sglang_check"]

#: How the report names what an sglang issue concerns.
SGLANG_CONNECTORS = {
    "sglang": "sglang's own LMCache integration",
    "sglang-plugin": f"the lmcache-compat backend ({BACKEND_NAME})",
}
_SOURCE = "scanned (sglang and LMCache read from their installed files)"


class PluginJSON(TypedDict):
    serves: bool
    line: str
    mode: str | None
    variant: str | None


class SglangJSON(TypedDict):
    """``doctor --json``'s ``sglang_integration``."""

    sglang: str
    cache_classes: list[str]
    verdict: str
    modes: list[ModeJSON]
    #: The LMCache releases of the shipped matrix sglang's own integration works with.
    works_with: str
    plugin: PluginJSON | None
    notes: list[str]


@dataclass(frozen=True, slots=True)
class SglangCheck:
    sglang: str
    cache_classes: tuple[str, ...]
    pair: PairVerdict | None
    works_with: str
    issues: tuple[Issue, ...] = ()
    plugin: PluginJSON | None = None
    notes: tuple[str, ...] = field(default=())

    @property
    def verdict(self) -> str:
        if self.pair is None or self.pair.status == "none":
            return "unknown"
        return overall(self.issues)

    def to_json(self) -> SglangJSON:
        return {
            "sglang": self.sglang,
            "cache_classes": list(self.cache_classes),
            "verdict": self.verdict,
            "modes": list(self.pair.modes) if self.pair is not None else [],
            "works_with": self.works_with,
            "plugin": self.plugin,
            "notes": list(self.notes),
        }


def _row(lmcache: str, result: ScanResult) -> ReleaseRow:
    from lmcache_compat.upstream.matrix import ReleaseRow  # lazy: only with sglang installed

    data: dict[str, Any] = {"version": lmcache, "artifact": "", "sha256": ""}
    data.update(result.to_json())
    return ReleaseRow.from_json(data)


def works_with(facts: SglangFacts) -> str:
    """The LMCache releases of the matrix sglang's own integration works with, as spans."""
    from lmcache_compat.report.tables import _spans  # lazy: only with sglang installed
    from lmcache_compat.sglang.known.bind import bind_pair  # lazy: as above
    from lmcache_compat.upstream.matrix import load_matrix  # lazy: as above

    matrix = load_matrix()
    good = [r.version for r in matrix.rows if bind_pair(facts, r).status == "works"]
    return _spans(good, matrix.versions) or "none"


def sglang_check(
    sglang: str | None, lmcache: str | None, result: ScanResult | None, notes: list[str]
) -> SglangCheck | None:
    """The sglang part of ``doctor`` (``None``: sglang is not installed)."""
    if sglang is None:
        return None
    from lmcache_compat.sglang.decisions import plan  # lazy: only with sglang installed
    from lmcache_compat.sglang.known.bind import bind_pair, default_mode  # lazy: as above
    from lmcache_compat.sglang.known.reader import read_sglang  # lazy: as above

    try:
        facts = read_sglang()
    except LMCacheCompatError as exc:
        notes.append(f"could not read the installed sglang ({' '.join(str(exc).split())})")
        return None
    classes = tuple(i["cache_class"] for i in facts["integration"])
    if not classes:
        return SglangCheck(
            sglang, classes, None, "none", notes=(f"sglang {sglang} has no LMCache integration",)
        )
    good = works_with(facts)
    if lmcache is None or result is None:
        return SglangCheck(
            sglang,
            classes,
            None,
            good,
            notes=(
                f"LMCache is not installed (or could not be scanned): sglang {sglang}'s own "
                f"integration works with LMCache {good}",
            ),
        )
    row = _row(lmcache, result)
    pair = bind_pair(facts, row)
    found = plan(facts, lmcache, row.capabilities, config_file=True)
    plugin, fixes = _plugin_and_fixes(found, sglang, good)
    issues = _own_integration_issues(default_mode(pair.modes), classes, fixes)
    return SglangCheck(sglang, classes, pair, good, tuple(issues), plugin)


def _plugin_and_fixes(found: Plan, sglang: str, good: str) -> tuple[PluginJSON, list[Fix]]:
    """What the lmcache-compat backend does for the pair (``found``: its plan), and the fixes
    doctor offers: the backend where it serves the pair, else the LMCache releases sglang's own
    integration works with."""
    plugin: PluginJSON = {
        "serves": found.serves,
        "line": found.line(),
        "mode": found.mode,
        "variant": found.variant.name if found.variant is not None else None,
    }
    fixes: list[Fix] = []
    if found.serves:
        fixes.append(
            other(
                f"use the lmcache-compat backend: start sglang with --radix-cache-backend "
                f"{BACKEND_NAME} (it serves this pair: {found.mode} mode, variant "
                f"{plugin['variant']}{'; ' + found.note if found.note else ''})"
            )
        )
    if good != "none":
        fixes.append(
            other(f"use an LMCache release sglang {sglang}'s own integration works with: {good}")
        )
    return plugin, fixes


def _own_integration_issues(
    mode: ModeJSON | None, classes: tuple[str, ...], fixes: list[Fix]
) -> list[Issue]:
    """sglang's own integration in its default mode (``None``: nothing bound): broken, and
    each condition it works under."""
    issues: list[Issue] = []
    if mode is None:
        return issues
    if mode["status"] == "broken":
        issues.append(
            Issue(
                "sglang-own-integration",
                "sglang",
                "broken",
                f"{', '.join(classes)} ({mode['mode']} mode): {mode['reasons'][0]}",
                tuple(fixes),
                _SOURCE,
            )
        )
    for condition in mode["conditions"]:
        issues.append(
            Issue(
                "sglang-own-integration-condition",
                "sglang",
                "degraded",
                condition,
                tuple(f for f in fixes if "backend" in f.detail),
                _SOURCE,
            )
        )
    return issues
