"""Fallbacks: what an adapter does when the wrapped release lacks a capability.

Each is a plain function taking the method's own arguments; an adapter stores it where the
engine's bound method would be, so a call costs exactly a function call. Each returns a *new*
object per call where the result is mutable, so callers may mutate it. The catalog
(:mod:`lmcache_compat.core.catalog`) names the fallback of each capability and says in words
what it returns; the adapters' docstrings and the documentation's tables are rendered from
there.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "assume_healthy",
    "no_failed_requests",
    "no_finished",
    "no_inference_info",
    "no_kv_events",
    "no_load_errors",
    "noop",
    "noop_any",
    "noop_register",
    "not_reset",
    "request_not_held",
]


def no_finished(finished_req_ids: Any) -> tuple[None, None]:
    """Fallback of ``get_finished(ids)``: no asynchronous sends or receives are tracked."""
    return (None, None)


def request_not_held(request: Any, block_ids: Any) -> tuple[bool, None]:
    """Fallback of ``request_finished(request, block_ids)``: blocks may be freed at once."""
    return (False, None)


def no_inference_info() -> dict[str, Any]:
    """Fallback of ``get_inference_info()``: an empty dict."""
    return {}


def no_load_errors() -> set[int]:
    """Fallback of ``get_block_ids_with_load_errors()``: a new empty set."""
    return set()


def noop() -> None:
    """Fallback of ``shutdown()``: nothing to stop."""


def no_kv_events() -> list[Any]:
    """Fallback of ``get_kv_events()``: a new empty list."""
    return []


def noop_register(kv_caches: Any) -> None:
    """Fallback of ``register_kv_caches(kv_caches)``: releases before 0.3.12 take the KV caches
    from the forward context on the first ``start_load_kv``."""


def noop_any(*args: Any, **kwargs: Any) -> None:
    """Fallback of an optional notification (end_session, free_lookup_locks,
    report_block_allocations, handle_preemptions, scheduler shutdown): nothing to tell."""


def assume_healthy() -> bool:
    """Fallback of ``is_healthy``: the release cannot tell, so health is unknown and reported
    as healthy (documented; it is what every caller did before the check existed)."""
    return True


def not_reset() -> bool:
    """Fallback of ``reset_cache()``: the release cannot reset, so nothing was reset."""
    return False


def no_failed_requests() -> set[str]:
    """Fallback of ``get_failed_request_ids()``: a new empty set."""
    return set()
