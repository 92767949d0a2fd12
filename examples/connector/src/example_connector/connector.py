"""The example connector: every LMCache call goes through an lmcache-compat adapter, so one
code path serves every release, and what a release cannot do is known at construction."""

from __future__ import annotations

import time
import warnings
from collections.abc import Iterable
from typing import Any

from lmcache_compat import Capability, ConnectorAdapter, MPServerError


class ExampleConnector:
    """Wraps an LMCache ``LMCacheConnectorV1Impl`` (any release) for a serving loop."""

    def __init__(self, engine: object, *, slow_save_s: float = 1.0) -> None:
        self.adapter = ConnectorAdapter(engine)
        # decided once: a release before load-error reporting cannot tell us about failures
        self.reports_failed_loads = Capability.LOAD_ERROR_REPORTING in self.adapter.capabilities
        if not self.reports_failed_loads:
            warnings.warn(
                "this LMCache release cannot report failed KV loads: failures are invisible",
                stacklevel=2,
            )
        self.slow_save_s = slow_save_s
        self.slow_saves = 0
        self.closed = False

    def failed_blocks(self) -> set[int] | None:
        """Blocks whose KV failed to load (to recompute); ``None``: unknown on this release
        (an empty set from a release that cannot report is not "no failures")."""
        failed = self.adapter.get_block_ids_with_load_errors()
        if not self.reports_failed_loads:
            return None
        return set(failed)

    def events(self) -> list[Any]:
        """KV cache events since the last call (none on a release without events)."""
        return list(self.adapter.get_kv_events())

    def save(self) -> float:
        """Wait for this step's saves; counts the slow ones. Returns the seconds waited."""
        start = time.perf_counter()
        self.adapter.wait_for_save()
        took = time.perf_counter() - start
        if took > self.slow_save_s:
            self.slow_saves += 1
        return took

    def close(self) -> None:
        """Shut the engine down once (a no-op on releases without ``shutdown``)."""
        if not self.closed:
            self.adapter.shutdown()
            self.closed = True


def lookup_hits(scheduler: Any, request_id: str) -> int | None:
    """Cached tokens of an MP lookup (an ``MPSchedulerAdapter``): ``None`` while pending; a
    server that failed to answer counts as no hits (and is reported), never as a crash."""
    try:
        hits: int | None = scheduler.check_lookup_result(request_id)
    except MPServerError as exc:
        warnings.warn(f"LMCache MP server failed: {exc}", stacklevel=2)
        return 0
    return hits


def loaded_tokens(mask: Iterable[object]) -> int:
    """Tokens a retrieve actually loaded (its mask may be short of what was asked)."""
    return sum(1 for hit in mask if hit)
