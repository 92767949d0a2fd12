"""Known breakages of vLLM x LMCache pairs, as data, and the verdict for an installed pair.

Each row names the vLLM and LMCache ranges it covers, which of vLLM's connectors it concerns,
what goes wrong, how bad it is (``broken``: fails or computes wrongly; ``degraded``: works but
loses something) and the fix. ``source`` says how we know: ``verified`` rows are re-checked by
this project's real-import tier, ``scanned`` rows follow from the shipped release matrix (the
method is absent in those releases), ``reference`` rows come from reading vLLM's sources (see
``shared/reference/vllm-side.md``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["KNOWN_ISSUES", "KnownIssue", "verdict"]

Severity = Literal["broken", "degraded"]


@dataclass(frozen=True)
class KnownIssue:
    key: str
    vllm: tuple[str | None, str | None]  # inclusive range; None: unbounded
    lmcache: tuple[str | None, str | None]
    connector: str
    severity: Severity
    problem: str
    fix: str
    source: Literal["verified", "scanned", "reference"]


KNOWN_ISSUES: tuple[KnownIssue, ...] = (
    KnownIssue(
        "unguarded-get-finished",
        (None, None),
        ("0.3.0", "0.3.0"),
        "LMCacheConnectorV1",
        "broken",
        "vLLM calls get_finished/request_finished unguarded; LMCache 0.3.0 has neither "
        "(AttributeError)",
        "upgrade LMCache to >= 0.3.1, or use the lmcache-compat connector",
        "scanned",
    ),
    KnownIssue(
        "adapter-import-cdiv",
        ("0.32.0", "0.32.0"),
        ("0.3.1", "0.3.7"),
        "LMCacheConnectorV1",
        "broken",
        "LMCache's vllm_v1_adapter does not import: cannot import name 'cdiv' from 'vllm.utils'",
        "upgrade LMCache to >= 0.3.9",
        "verified",
    ),
    KnownIssue(
        "adapter-import-vllm-0.11",
        ("0.11.0", "0.11.0"),
        ("0.3.1", "0.3.6"),
        "LMCacheConnectorV1",
        "broken",
        "LMCache's vllm_v1_adapter does not import (missing vLLM modules, nvtx, libcudart.so.12)",
        "upgrade LMCache to >= 0.3.9",
        "reference",
    ),
    KnownIssue(
        "unguarded-get-kv-events",
        ("0.13.0", None),
        (None, "0.3.10.post1"),
        "LMCacheConnectorV1",
        "broken",
        "vLLM calls get_kv_events() unguarded every step; this LMCache lacks it (AttributeError)",
        "upgrade LMCache to >= 0.3.10.post2, or use the lmcache-compat connector",
        "scanned",
    ),
    KnownIssue(
        "vllm-no-load-failure-path",
        (None, "0.11.1"),
        (None, None),
        "any connector",
        "degraded",
        "this vLLM has no KVConnectorOutput.invalid_block_ids: a KV block that failed to load is "
        "used as if it had loaded (no recompute, no error)",
        "upgrade vLLM to >= 0.11.2",
        "verified",
    ),
    KnownIssue(
        "no-load-error-reporting",
        ("0.11.2", None),
        (None, "0.3.9"),
        "LMCacheConnectorV1",
        "degraded",
        "KV load failures cannot be detected: requests may compute on missing KV "
        "(no get_block_ids_with_load_errors)",
        "upgrade LMCache to >= 0.3.9.post1",
        "scanned",
    ),
    KnownIssue(
        "event-lora-name",
        ("0.14.1", None),
        ("0.3.10.post2", "0.3.12"),
        "LMCacheConnectorV1",
        "broken",
        "vLLM's BlockStored requires lora_name from 0.14.1; LMCache's events lack it before "
        "0.3.13, so converting a KV event raises TypeError (with KV events enabled)",
        "upgrade LMCache to >= 0.3.13, or use the lmcache-compat connector",
        "reference",
    ),
    KnownIssue(
        "mp-server-url-misbinding",
        ("0.14.1", "0.19.1"),
        ("0.5.0", None),
        "LMCacheMPConnector",
        "broken",
        "vLLM passes server_url positionally into LMCache's server_urls: the URL becomes a "
        "list of one-character URLs (no exception, wrong behaviour)",
        "upgrade vLLM to >= 0.22.1, or build the adapters with lmcache_compat.MPSchedulerAdapter",
        "reference",
    ),
    KnownIssue(
        "mp-use-mla-removed",
        ("0.20.2", "0.21.0"),
        ("0.4.7", None),
        "LMCacheMPConnector",
        "broken",
        "vLLM builds ParallelStrategy with 7 positionals and reads worker_adapter.use_mla, "
        "both gone in LMCache 0.4.7",
        "upgrade vLLM to >= 0.22.1, or use LMCache <= 0.4.6",
        "reference",
    ),
    KnownIssue(
        "native-copy-range",
        (None, None),
        ("0.3.13", None),
        "LMCacheConnectorV1 (use_native=True)",
        "broken",
        "vLLM's vendored LMCache integration imports only with LMCache 0.3.9 ... 0.3.12",
        "drop use_native, or use LMCache 0.3.9 ... 0.3.12",
        "reference",
    ),
    KnownIssue(
        "shutdown-not-forwarded",
        (None, None),
        ("0.3.10", None),
        "LMCacheConnectorV1",
        "degraded",
        "vLLM's connector never forwards shutdown(): LMCache's background services are not "
        "stopped cleanly",
        "use the lmcache-compat connector (it forwards shutdown)",
        "reference",
    ),
)


def _in(version: Any, bounds: tuple[str | None, str | None]) -> bool:
    from packaging.version import Version

    low, high = bounds
    public = Version(version.public) if hasattr(version, "public") else version
    return (low is None or public >= Version(low)) and (high is None or public <= Version(high))


def verdict(vllm: str | None, lmcache: str | None) -> dict[str, Any]:
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
    issues = [
        {
            "key": row.key,
            "connector": row.connector,
            "severity": row.severity,
            "problem": row.problem,
            "fix": row.fix,
            "source": row.source,
        }
        for row in KNOWN_ISSUES
        if _in(v, row.vllm) and _in(lm, row.lmcache)
    ]
    severities = {i["severity"] for i in issues if "use_native" not in i["connector"]}
    overall = "broken" if "broken" in severities else "degraded" if severities else "ok"
    return {"verdict": overall, "issues": issues, "reason": None}
