"""Fallbacks: what an adapter does when the wrapped release lacks a capability.

Each is installed as a plain method of the adapter class of its role (so a call costs exactly a
method call) and takes the adapter as ``self``; an adapter over a release that has the method
shadows it with the engine's own bound method. Each returns a *new* object per call where the
result is mutable, so callers may mutate it. The catalog
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


def no_finished(self: object, finished_req_ids: Any) -> tuple[None, None]:
    """Fallback of ``get_finished(ids)``: no asynchronous sends or receives are tracked."""
    return (None, None)


def request_not_held(self: object, request: Any, block_ids: Any) -> tuple[bool, None]:
    """Fallback of ``request_finished(request, block_ids)``: blocks may be freed at once."""
    return (False, None)


def no_inference_info(self: object) -> dict[str, Any]:
    """Fallback of ``get_inference_info()``: an empty dict."""
    return {}


def no_load_errors(self: object) -> set[int]:
    """Fallback of ``get_block_ids_with_load_errors()``: a new empty set."""
    return set()


def noop(self: object) -> None:
    """Fallback of ``shutdown()``: nothing to stop."""


def no_kv_events(self: object) -> list[Any]:
    """Fallback of ``get_kv_events()``: a new empty list."""
    return []


def noop_register(self: object, kv_caches: Any) -> None:
    """Fallback of ``register_kv_caches(kv_caches)``: releases before 0.3.12 take the KV caches
    from the forward context on the first ``start_load_kv``."""


def noop_any(self: object, *args: Any, **kwargs: Any) -> None:
    """Fallback of an optional notification (end_session, free_lookup_locks,
    report_block_allocations, handle_preemptions, scheduler shutdown): nothing to tell."""


def assume_healthy(self: object) -> bool:
    """Fallback of ``is_healthy``: the release cannot tell, so health is unknown and reported
    as healthy (documented; it is what every caller did before the check existed)."""
    return True


def not_reset(self: object) -> bool:
    """Fallback of ``reset_cache()``: the release cannot reset, so nothing was reset."""
    return False


def no_failed_requests(self: object) -> set[str]:
    """Fallback of ``get_failed_request_ids()``: a new empty set."""
    return set()
