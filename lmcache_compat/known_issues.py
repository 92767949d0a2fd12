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

from lmcache_compat.catalog import Capability
from lmcache_compat.locations import VLLM_LMCACHE_CONNECTOR

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
        from lmcache_compat.matrix import load_matrix

        since = load_matrix().since(self.capability)
        return (f"<{since}",) if since else ()

    def upgrade(self) -> str:
        from lmcache_compat.matrix import load_matrix

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
    ),
    KnownIssue(
        "adapter-import-cdiv",
        ("==0.32.0",),
        (">=0.3.1,<=0.3.7",),
        "vllm",
        "broken",
        "LMCache's vllm_v1_adapter does not import: it imports cdiv from vLLM's utils module, "
        "which this vLLM no longer has (ImportError)",
        ("upgrade LMCache to >= 0.3.9",),
        "verified",
    ),
    KnownIssue(
        "adapter-import-vllm-0.11",
        ("==0.11.0",),
        (">=0.3.1,<=0.3.6",),
        "vllm",
        "broken",
        "LMCache's vllm_v1_adapter does not import (missing vLLM modules, nvtx, libcudart.so.12)",
        ("upgrade LMCache to >= 0.3.9",),
        "reference",
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
    ),
    KnownIssue(
        "no-load-error-reporting",
        (">=0.11.2",),
        Lacks(Capability.LOAD_ERROR_REPORTING),
        "vllm",
        "degraded",
        "KV load failures cannot be detected: requests may compute on missing KV "
        "(no get_block_ids_with_load_errors)",
        (UPGRADE,),
        "scanned",
    ),
    KnownIssue(
        "event-lora-name",
        (">=0.14.1",),
        (">=0.3.10.post2,<=0.3.12",),
        "vllm",
        "broken",
        "vLLM's BlockStored requires lora_name from 0.14.1; LMCache's events lack it before "
        "0.3.13, so converting a KV event raises TypeError (with KV events enabled)",
        ("upgrade LMCache to >= 0.3.13", USE_COMPAT),
        "reference",
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


def verdict(
    vllm: str | None, lmcache: str | None, *, compat_buildable: bool = True
) -> dict[str, Any]:
    """The rows that apply to an installed pair and the overall verdict: ``ok``, ``degraded``,
    ``broken`` or ``unknown`` (a version is missing or unparseable)."""
    from lmcache_compat.errors import LMCacheVersionError
    from lmcache_compat.versions import parse_version

    if vllm is None or lmcache is None:
        return {
            "verdict": "unknown",
            "issues": [],
            "reason": "vLLM and LMCache are not both installed",
        }
    try:
        v, lm = parse_version(vllm), parse_version(lmcache)
    except LMCacheVersionError as exc:
        return {"verdict": "unknown", "issues": [], "reason": str(exc)}
    issues = [issue_json(row, compat_buildable) for row in KNOWN_ISSUES if applies(row, v, lm)]
    return {"verdict": overall(issues), "issues": issues, "reason": None}
