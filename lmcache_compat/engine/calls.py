"""How each ``LMCacheEngine`` / ``LMCacheEngineBuilder`` call is made on a given release.

Pure functions of the release's facts (:class:`~lmcache_compat.core.signatures.MethodFacts`), run
once at adapter construction; each returns the closure the adapter binds. What happens to an
argument a release lacks is a row of :mod:`lmcache_compat.core.arguments` (``ARG.x``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from lmcache_compat.core.arguments import ARG, Downgrades
from lmcache_compat.core.catalog import Capability as C
from lmcache_compat.core.signatures import MethodFacts

__all__ = [
    "engine_get_or_create",
    "engine_is_healthy",
    "engine_lookup",
    "engine_prefetch",
    "engine_unpin",
]


#: The keywords releases gained (each row's name is its capability's keyword).
LOOKUP_ID = ARG.lookup_id.argument  # Capability.ENGINE_LOOKUP_ID (0.3.4)
CONFIGS = ARG.engine_request_configs.argument  # Capability.ENGINE_REQUEST_CONFIGS (0.3.4)
#: 0.3.3 pinned lookups by ``request_id=`` (ARG.lookup_id maps it there).
OLD_ID = "request_id"
#: 0.3.6 on, ``lookup``'s parameters in this order (defaults None): passed straight through.
_NEWEST = ["tokens", "hashes", "offsets", "search_range", LOOKUP_ID, "pin", CONFIGS]


def engine_lookup(
    method: Callable[..., Any], facts: MethodFacts, downgrades: Downgrades
) -> Callable[..., Any]:
    """``lookup(tokens, *, lookup_id=None, pin=False, request_configs=None, **kwargs)``."""
    names = set(facts.names)
    # 0.3.4: lookup_id=; 0.3.3: request_id=; 0.3.0-0.3.2: no id at all
    id_name = LOOKUP_ID if LOOKUP_ID in names else OLD_ID if OLD_ID in names else None
    takes_configs = CONFIGS in names
    if list(facts.names)[:7] == _NEWEST:
        # 0.3.6 on: everything in this order, defaults None: pass straight through
        def lookup_newest(
            tokens: Any,
            *,
            lookup_id: str | None = None,
            pin: bool = False,
            request_configs: Mapping[str, Any] | None = None,
            **kwargs: Any,
        ) -> Any:
            if kwargs:
                return method(
                    tokens, lookup_id=lookup_id, pin=pin, request_configs=request_configs, **kwargs
                )
            return method(tokens, None, None, None, lookup_id, pin, request_configs)

        return lookup_newest

    def lookup(
        tokens: Any,
        *,
        lookup_id: str | None = None,
        pin: bool = False,
        request_configs: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> Any:
        if lookup_id is not None:
            if id_name is not None:
                kwargs[id_name] = lookup_id
            elif pin:
                downgrades.refuse(ARG.pinned_lookup)
        if pin:
            kwargs["pin"] = True
        if request_configs:
            if takes_configs:
                kwargs[CONFIGS] = request_configs
            else:
                downgrades.refuse(ARG.engine_request_configs)
        return method(tokens, **kwargs)

    return lookup


def engine_unpin(
    method: Callable[..., Any] | None, facts: MethodFacts | None
) -> Callable[[str], Any]:
    """``unpin(lookup_id)`` over ``lookup_unpin``: one id from 0.3.9, a list of ids on
    0.3.3-0.3.7 (``lookup_ids``/``request_ids``), nothing to unpin before 0.3.3."""
    if method is None or facts is None:

        def unpin_nothing(lookup_id: str) -> None:
            """Before 0.3.3 nothing is pinned by id."""

        return unpin_nothing
    # ARG.unpin (Capability.ENGINE_SINGLE_UNPIN): one id from 0.3.9, a list before
    if C.ENGINE_SINGLE_UNPIN.spec.keyword in facts.names:
        return method
    target = method

    def unpin(lookup_id: str) -> Any:  # 0.3.3-0.3.7: a list of ids
        return target([lookup_id])

    return unpin


def engine_prefetch(
    async_method: Callable[..., Any] | None,
    sync_method: Callable[..., Any] | None,
    sync_facts: MethodFacts | None,
    downgrades: Downgrades,
) -> Callable[..., Any] | None:
    """``prefetch(tokens, *, lookup_id, **kwargs)``: ``async_lookup_and_prefetch`` from 0.3.6,
    the synchronous ``prefetch(tokens, mask)`` of 0.3.0-0.3.5 before."""
    if async_method is not None:  # ARG.prefetch (Capability.ENGINE_ASYNC_PREFETCH): 0.3.6
        target = async_method

        def prefetch_async(tokens: Any, *, lookup_id: str, **kwargs: Any) -> Any:
            return target(lookup_id=lookup_id, tokens=tokens, **kwargs)

        return prefetch_async
    if sync_method is None or sync_facts is None:
        return None
    names = set(sync_facts.names)
    takes_configs = CONFIGS in names
    old = sync_method

    def prefetch_sync(
        tokens: Any,
        *,
        lookup_id: str | None = None,
        request_configs: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> Any:
        if request_configs:
            if takes_configs:
                kwargs[CONFIGS] = request_configs
            else:
                downgrades.refuse(ARG.engine_request_configs)
        return old(tokens, **kwargs)

    return prefetch_sync


def engine_is_healthy(
    is_healthy: Callable[[], Any] | None, health: Callable[[], Any] | None
) -> Callable[[], bool]:
    """``is_healthy()``: the release's own from 0.3.13; ``health() == 0`` on 0.3.4-0.3.12
    ("0 if healthy, otherwise the error code"); unknown before 0.3.4 (documented: True)."""
    if is_healthy is not None:
        own = is_healthy

        def healthy() -> bool:
            return bool(own())

        return healthy
    if health is not None:
        code = health

        def healthy_by_code() -> bool:
            return bool(code() == 0)

        return healthy_by_code

    def unknown() -> bool:
        return True

    return unknown


def _no_broadcast(tensor: Any, src: int) -> None:
    """Single-process ``broadcast_fn``: there is no other rank to send to."""


def _same_object(obj: Any, src: int) -> Any:
    """Single-process ``broadcast_object_fn``: every rank already has the object."""
    return obj


def engine_get_or_create(
    method: Callable[..., Any], facts: MethodFacts, downgrades: Downgrades
) -> Callable[..., Any]:
    """``get_or_create(instance_id, config, metadata, gpu_connector, *, broadcast_fn=None,
    broadcast_object_fn=None)`` over ``LMCacheEngineBuilder.get_or_create``: the broadcast
    functions appeared in 0.3.4 (optional) and are required from 0.3.5; where required and not
    given, single-process defaults are passed (correct for one rank only)."""
    takes = "broadcast_fn" in facts.names  # 0.3.4
    required = facts.required("broadcast_fn")  # 0.3.5

    def get_or_create(
        instance_id: str,
        config: Any,
        metadata: Any,
        gpu_connector: Any,
        *,
        broadcast_fn: Callable[[Any, int], None] | None = None,
        broadcast_object_fn: Callable[[Any, int], Any] | None = None,
        **kwargs: Any,
    ) -> Any:
        if takes:  # ARG.broadcast_required: single-process defaults where required (0.3.5)
            if broadcast_fn is not None or required:
                kwargs["broadcast_fn"] = broadcast_fn or _no_broadcast
            if broadcast_object_fn is not None or required:
                kwargs["broadcast_object_fn"] = broadcast_object_fn or _same_object
        elif broadcast_fn is not None or broadcast_object_fn is not None:
            downgrades.refuse(ARG.broadcast_fn)
        return method(instance_id, config, metadata, gpu_connector, **kwargs)

    return get_or_create
