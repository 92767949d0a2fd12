"""Known breakages of vLLM x LMCache pairs, as data, and the verdict for an installed pair.

Each row names the vLLM and LMCache versions it covers (``packaging`` specifier sets, any of
which may match; pre-releases and dev builds match too), which connector it concerns, what goes
wrong, how bad it is (``broken``: fails or computes wrongly; ``degraded``: works but loses
something) and the fix. ``source`` says how we know: ``verified`` rows are re-checked by this
project's real tiers, ``scanned`` rows follow from the shipped release matrix (the method is
absent in those releases), ``reference`` rows come from reading vLLM's sources.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from lmcache_compat.core.catalog import Capability
from lmcache_compat.upstream.grid import CONNECTOR_KEYS
from lmcache_compat.upstream.locations import VLLM_LMCACHE_CONNECTOR

if TYPE_CHECKING:
    from packaging.version import Version

__all__ = ["CONNECTORS", "KNOWN_ISSUES", "USE_COMPAT", "KnownIssue", "matches", "verdict"]

#: The fix "use our connector": offered only where it can be built for the installed pair.
USE_COMPAT = "use the lmcache-compat connector"

Severity = Literal["broken", "degraded"]
Connector = Literal["vllm", "vllm-native", "vllm-mp", "any", "compat"]

#: How each connector key is shown.
CONNECTORS: dict[str, str] = {
    "vllm": VLLM_LMCACHE_CONNECTOR.name,
    "vllm-native": f"{VLLM_LMCACHE_CONNECTOR.name} (use_native=True)",
    "vllm-mp": "LMCacheMPConnector",
    "any": "any connector",
    "compat": "LMCacheCompatConnector",
}


@dataclass(frozen=True)
class Lacks:
    """The LMCache releases that lack a capability, read from the shipped matrix (a ``scanned``
    row's range: never written down a second time)."""

    capability: Capability

    def specifiers(self) -> tuple[str, ...]:
        from lmcache_compat.upstream.matrix import load_matrix

        since = load_matrix().since(self.capability)
        return (f"<{since}",) if since else ()

    def upgrade(self) -> str:
        from lmcache_compat.upstream.matrix import load_matrix

        return f"upgrade LMCache to >= {load_matrix().since(self.capability)}"


#: In ``fixes``: "upgrade LMCache to the first release with the capability" (from the matrix).
UPGRADE = "<upgrade>"


@dataclass(frozen=True)
class KnownIssue:
    key: str
    #: Specifier sets (``">=0.13.0"``); the row applies when any of them matches. ``()``: all.
    vllm: tuple[str, ...]
    lmcache: tuple[str, ...] | Lacks
    connector: Connector
    severity: Severity
    problem: str
    #: Alternatives, any of which fixes it (:data:`USE_COMPAT` is dropped by ``doctor`` where
    #: the lmcache-compat connector cannot be built for the installed pair).
    fixes: tuple[str, ...]
    source: Literal["verified", "scanned", "reference"]
    #: The grid aspect (:data:`lmcache_compat.upstream.grid.ASPECTS`) the row is about: for a
    #: measured
    #: pair the measurement replaces the row, unless it recorded ``n/a`` (a fallback ran; the
    #: row says what the fallback loses). ``None``: the grid does not measure it.
    aspect: str | None = None

    @property
    def lmcache_specifiers(self) -> tuple[str, ...]:
        return self.lmcache.specifiers() if isinstance(self.lmcache, Lacks) else self.lmcache

    @property
    def fix_texts(self) -> tuple[str, ...]:
        upgrade = self.lmcache.upgrade() if isinstance(self.lmcache, Lacks) else UPGRADE
        return tuple(upgrade if f == UPGRADE else f for f in self.fixes)

    @property
    def fix(self) -> str:
        return ", or ".join(self.fix_texts)

    @property
    def default_connector(self) -> bool:
        """Whether it concerns a connector used without ``use_native`` (it decides a verdict)."""
        return self.connector != "vllm-native"


def matches(version: Version, specifiers: tuple[str, ...]) -> bool:
    """Whether ``version`` (its public part) is in any of ``specifiers`` (``()``: always).
    Pre-releases and dev builds count (``0.5.7rc2`` is in ``>=0.5.0``)."""
    from packaging.specifiers import SpecifierSet
    from packaging.version import Version

    if not specifiers:
        return True
    public = Version(version.public)
    return any(SpecifierSet(s).contains(public, prereleases=True) for s in specifiers)


ALL: tuple[str, ...] = ()

KNOWN_ISSUES: tuple[KnownIssue, ...] = (
    KnownIssue(
        "unguarded-get-finished",
        ALL,
        Lacks(Capability.GET_FINISHED),
        "vllm",
        "broken",
        "vLLM calls get_finished/request_finished unguarded; this LMCache has neither "
        "(AttributeError)",
        (UPGRADE, USE_COMPAT),
        "scanned",
        aspect="step",
    ),
    KnownIssue(
        "unguarded-get-kv-events",
        (">=0.13.0",),
        Lacks(Capability.KV_EVENTS),
        "vllm",
        "broken",
        "vLLM calls get_kv_events() unguarded every step; this LMCache lacks it (AttributeError)",
        (UPGRADE, USE_COMPAT),
        "scanned",
        aspect="events",
    ),
    KnownIssue(
        "vllm-no-load-failure-path",
        ("<=0.11.1",),
        ALL,
        "any",
        "degraded",
        "this vLLM has no KVConnectorOutput.invalid_block_ids: a KV block that failed to load is "
        "used as if it had loaded (no recompute, no error)",
        ("upgrade vLLM to >= 0.11.2",),
        "verified",
        aspect="load_failures",
    ),
    KnownIssue(
        "no-load-error-reporting",
        (">=0.11.2",),
        Lacks(Capability.LOAD_ERROR_REPORTING),
        "any",
        "degraded",
        "KV load failures cannot be detected: requests may compute on missing KV "
        "(no get_block_ids_with_load_errors)",
        (UPGRADE,),
        "scanned",
        aspect="load_failures",
    ),
    KnownIssue(
        "mp-server-url-misbinding",
        (">=0.14.1,<=0.19.1",),
        (">=0.5.0",),
        "vllm-mp",
        "broken",
        "vLLM passes server_url positionally into LMCache's server_urls: the URL becomes a "
        "list of one-character URLs (no exception, wrong behaviour)",
        ("upgrade vLLM to >= 0.22.1", "build the adapters with lmcache_compat.MPSchedulerAdapter"),
        "reference",
    ),
    KnownIssue(
        "mp-use-mla-removed",
        (">=0.20.2,<=0.21.0",),
        (">=0.4.7",),
        "vllm-mp",
        "broken",
        "vLLM builds ParallelStrategy with 7 positionals and reads worker_adapter.use_mla, "
        "both gone in LMCache 0.4.7",
        ("upgrade vLLM to >= 0.22.1", "use LMCache <= 0.4.6"),
        "reference",
    ),
    KnownIssue(
        "native-copy-range",
        ALL,
        ("<0.3.9", ">0.3.12"),
        "vllm-native",
        "broken",
        "vLLM's vendored LMCache integration imports only with LMCache 0.3.9 ... 0.3.12",
        ("drop use_native", "use LMCache 0.3.9 ... 0.3.12"),
        "reference",
    ),
    KnownIssue(
        "shutdown-not-forwarded",
        ALL,
        (">=0.3.10",),
        "vllm",
        "degraded",
        "vLLM's connector never forwards shutdown(): LMCache's background services are not "
        "stopped cleanly",
        (USE_COMPAT + " (it forwards shutdown)",),
        "reference",
        aspect="shutdown",
    ),
)


def issue(key: str) -> KnownIssue:
    return next(row for row in KNOWN_ISSUES if row.key == key)


def applies(row: KnownIssue, vllm: Version, lmcache: Version) -> bool:
    return matches(vllm, row.vllm) and matches(lmcache, row.lmcache_specifiers)


def issue_json(row: KnownIssue, compat_buildable: bool = True) -> dict[str, Any]:
    fixes = [f for f in row.fix_texts if compat_buildable or not f.startswith(USE_COMPAT)]
    return {
        "key": row.key,
        "connector": CONNECTORS[row.connector],
        "connector_key": row.connector,
        "severity": row.severity,
        "problem": row.problem,
        "fix": ", or ".join(fixes) or "none known",
        "fixes": fixes,
        "source": row.source,
    }


def overall(issues: list[dict[str, Any]]) -> str:
    """``broken`` / ``degraded`` / ``ok`` from the issues that concern the default connectors
    (a ``use_native`` problem does not decide the verdict: it is opt-in)."""
    severities = {i["severity"] for i in issues if i["connector_key"] != "vllm-native"}
    return "broken" if "broken" in severities else "degraded" if severities else "ok"


#: How each measured aspect reads in an issue.
ASPECT_WORDS = {
    "builds": "the connector cannot be built",
    "step": "a scheduler step fails",
    "load_failures": "KV load failures are not reported",
    "recompute": "the recompute policy does not reschedule a failed load",
    "fail": "the fail policy does not fail a request whose load failed",
    "events": "KV cache events are not delivered",
    "shutdown": "shutdown does not reach LMCache",
}
#: Connectors the grid's pair measurements cover (rows for the others still apply).
_MEASURED = ("vllm", "compat", "any")


def _measured_issues(
    vllm: str, lmcache: str, compat_buildable: bool
) -> tuple[list[dict[str, Any]] | None, list[str]]:
    """Issues of a pair the shipped grid measured (``None``: not measured), and notes."""
    from packaging.version import Version

    from lmcache_compat.upstream.grid import load_grid

    grid = load_grid()
    tier = grid.leans_on(vllm)
    notes: list[str] = []
    if tier is None:
        return None, notes
    basis = f"measured on vLLM {tier.vllm}"
    if Version(Version(vllm).public) != Version(tier.vllm):
        notes.append(
            f"vLLM {vllm} was not measured: its verdict leans on vLLM {tier.vllm}, the nearest "
            f"measured release before it (measured: {', '.join(grid.versions)})"
        )
    issues: list[dict[str, Any]] = []
    imported = tier.adapter_import(lmcache)
    if imported is not None and imported != "ok":
        for key in ("vllm", "compat"):
            issues.append(
                {
                    "key": "adapter-import",
                    "connector": CONNECTORS[key],
                    "connector_key": key,
                    "severity": "broken",
                    "problem": f"LMCache's {ADAPTER_MODULE_TEXT} does not import: {imported}",
                    "fix": _upgrade_to_importing(tier, lmcache),
                    "fixes": [_upgrade_to_importing(tier, lmcache)],
                    "source": f"verified ({basis})",
                }
            )
    pair = tier.pair(lmcache)
    if pair is None:
        return (issues or None), notes
    for key, run in pair.connectors.items():
        other = pair.connectors.get("compat")
        for aspect, cell in run.problems():
            fixes: list[str] = []
            span = grid.ok_span(tier, key, aspect)
            if span is not None and Version(span[0]) > Version(Version(lmcache).public):
                first, stop = span
                fixes.append(
                    f"upgrade LMCache to >= {first}" + (f", < {stop}" if stop is not None else "")
                )
            compat_cell = other.cells.get(aspect) if other is not None and key != "compat" else None
            if compat_buildable and compat_cell is not None and compat_cell.status in ("ok", "n/a"):
                fixes.append(USE_COMPAT)
            issues.append(
                {
                    "key": f"measured-{aspect}",
                    "connector": CONNECTORS[key],
                    "connector_key": key,
                    "severity": cell.status,
                    "problem": f"{ASPECT_WORDS.get(aspect, aspect)}: {cell.detail}",
                    "fix": ", or ".join(fixes) or "none known",
                    "fixes": fixes,
                    "source": f"verified ({basis})",
                }
            )
    return issues, notes


#: How the adapter module is named in messages (its file's stem, as the grid records it).
ADAPTER_MODULE_TEXT = "vllm_v1_adapter"


def _upgrade_to_importing(tier: Any, lmcache: str) -> str:
    from packaging.version import Version

    later = sorted(
        (v for v, mods in tier.imports.items() if mods.get(ADAPTER_MODULE_TEXT) == "ok"),
        key=Version,
    )
    newer = [v for v in later if Version(v) > Version(Version(lmcache).public)]
    return f"upgrade LMCache to >= {newer[0]}" if newer else "none known"


def verdict(
    vllm: str | None, lmcache: str | None, *, compat_buildable: bool = True
) -> dict[str, Any]:
    """The issues of an installed pair and the overall verdict: ``ok``, ``degraded``,
    ``broken`` or ``unknown`` (a version is missing or unparseable).

    A pair the shipped grid measured (:mod:`lmcache_compat.upstream.grid`) is judged by the
    measurement
    (``verified``), plus the rows of connectors the grid does not run (the MP connector,
    ``use_native``); an unmeasured pair by the rows of :data:`KNOWN_ISSUES`, plus the grid's
    import measurement of the release where it has one."""
    from lmcache_compat.errors import LMCacheVersionError
    from lmcache_compat.versions import parse_version

    if vllm is None or lmcache is None:
        return {
            "verdict": "unknown",
            "issues": [],
            "reason": "vLLM and LMCache are not both installed",
            "notes": [],
        }
    try:
        v, lm = parse_version(vllm), parse_version(lmcache)
    except LMCacheVersionError as exc:
        return {"verdict": "unknown", "issues": [], "reason": str(exc), "notes": []}
    measured, notes = _measured_issues(vllm, lmcache, compat_buildable)
    rows = [
        issue_json(row, compat_buildable)
        for row in KNOWN_ISSUES
        if applies(row, v, lm) and not _measured_instead(row, vllm, lmcache)
    ]
    issues = (measured or []) + rows
    return {"verdict": overall(issues), "issues": issues, "reason": None, "notes": notes}


def _measured_instead(row: KnownIssue, vllm: str, lmcache: str) -> bool:
    """Whether the grid's measurement of the pair replaces ``row``: the pair was measured (or
    leans on a measured vLLM), the row concerns a measured connector, and every measured
    connector it concerns recorded its aspect as something other than ``n/a``. A row the grid
    does not measure (no aspect) stays, as does one whose aspect ran a fallback (``n/a``): the
    row says what the fallback loses."""
    from lmcache_compat.upstream.grid import load_grid

    tier = load_grid().leans_on(vllm)
    pair = tier.pair(lmcache) if tier is not None else None
    if pair is None or row.connector not in _MEASURED:
        return False
    if row.aspect is None:
        return True
    keys = CONNECTOR_KEYS if row.connector == "any" else (row.connector,)
    cells = [pair.connectors[k].cells.get(row.aspect) for k in keys if k in pair.connectors]
    return bool(cells) and all(c is not None and c.status != "n/a" for c in cells)
