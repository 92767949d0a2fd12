"""How each ``LMCacheEngine`` / ``LMCacheEngineBuilder`` call is made on a given release.

Pure functions of the release's facts (:class:`~lmcache_compat.core.signatures.MethodFacts`), run
once at adapter construction; each returns the closure the adapter binds. What happens to an
argument a release lacks is a row of :mod:`lmcache_compat.core.arguments` (``ARG.x``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from lmcache_compat.core.arguments import ARG, Applied, Downgrades, apply
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
_NEWEST = ("tokens", "hashes", "offsets", "search_range", LOOKUP_ID, "pin", CONFIGS)


def engine_lookup(
    method: Callable[..., Any], facts: MethodFacts, downgrades: Downgrades
) -> Callable[..., Any]:
    """``lookup(tokens, *, lookup_id=None, pin=False, request_configs=None, **kwargs)``."""
    # ARG.lookup_id: 0.3.4 lookup_id=; 0.3.3 request_id=; 0.3.0-0.3.2 no id at all (then only
    # a pinned lookup is a loss: ARG.pinned_lookup)
    pinned = apply(ARG.pinned_lookup, facts, downgrades, given=_given)
    older = _older_id(facts.accepts_keyword(OLD_ID), pinned)
    lookup_id = apply(ARG.lookup_id, facts, downgrades, given=_given, emulate=older)
    configs = apply(ARG.engine_request_configs, facts, downgrades, keyword=CONFIGS)
    if lookup_id.takes and configs.takes and facts.call_shape(_NEWEST) == "positional":
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
        if pin:
            kwargs["pin"] = True
        put_id(kwargs, lookup_id)
        configs.put(kwargs, request_configs)
        return method(tokens, **kwargs)

    put_id = lookup_id.put
    return lookup


def _given(value: Any) -> bool:
    return value is not None


def _older_id(takes_old_id: bool, pinned: Applied) -> Callable[[dict[str, Any], Any], None]:
    """``ARG.lookup_id`` before 0.3.4: ``request_id=`` on 0.3.3; before, dropped unless the
    lookup is pinned (a pinned lookup could never be unpinned: ``ARG.pinned_lookup``)."""

    def older(kwargs: dict[str, Any], lookup_id: Any) -> None:
        if lookup_id is None:
            return
        if takes_old_id:
            kwargs[OLD_ID] = lookup_id
        elif kwargs.get("pin"):
            pinned.put(kwargs, lookup_id)

    return older


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
    if facts.accepts_keyword(C.ENGINE_SINGLE_UNPIN.spec.keyword or ""):
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
    configs = apply(ARG.engine_request_configs, sync_facts, downgrades, keyword=CONFIGS)
    old = sync_method

    def prefetch_sync(
        tokens: Any,
        *,
        lookup_id: str | None = None,
        request_configs: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> Any:
        configs.put(kwargs, request_configs)
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
    # ARG.broadcast_fn (0.3.4); ARG.broadcast_required (0.3.5): single-process defaults
    broadcast = apply(ARG.broadcast_fn, facts, downgrades, given=_given)
    takes = broadcast.takes
    required = facts.required(broadcast.keyword)

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
        else:
            broadcast.put(kwargs, broadcast_fn or broadcast_object_fn)
        return method(instance_id, config, metadata, gpu_connector, **kwargs)

    return get_or_create
