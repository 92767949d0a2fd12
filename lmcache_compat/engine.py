"""Uniform adapter over ``LMCacheEngine`` (``lmcache/v1/cache_engine.py``), 0.3.0 on, as
SGLang-style integrations call it directly, and over ``LMCacheEngineBuilder.get_or_create``.

======================================  ======================================================
method                                   on a release without the newest form
======================================  ======================================================
lookup(tokens, *, lookup_id, pin,        ``request_id=`` on 0.3.3; no id before (error if
request_configs, **kw)                   ``pin``); ``request_configs`` error unless allowed
unpin(lookup_id)                         ``lookup_unpin([id])`` 0.3.3-0.3.7; no-op before
prefetch(tokens, *, lookup_id, **kw)     ``prefetch(tokens)`` (synchronous) before 0.3.6
is_healthy()                             ``health() == 0`` 0.3.4-0.3.12; True (unknown) before
get_kv_events()                          ``[]`` before 0.3.10.post2
freeze(enabled) / is_frozen()            MissingCapabilityError / False before 0.3.11
store, retrieve, close                   the release's own (every release)
======================================  ======================================================
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, NoReturn

from lmcache_compat.adapter import BoundAdapter
from lmcache_compat.catalog import ENGINE, Capability
from lmcache_compat.errors import MissingCapabilityError
from lmcache_compat.probe import ClassFacts
from lmcache_compat.version_specific import (
    Downgrades,
    engine_get_or_create,
    engine_is_healthy,
    engine_lookup,
    engine_prefetch,
    engine_unpin,
)

__all__ = ["EngineAdapter", "get_or_create_engine"]


class EngineAdapter(BoundAdapter):
    """Uniform adapter over an ``LMCacheEngine`` of any release (see the module table)."""

    __slots__ = (
        "allow",
        "close",
        "freeze",
        "get_kv_events",
        "is_frozen",
        "is_healthy",
        "lookup",
        "prefetch",
        "retrieve",
        "store",
        "unpin",
    )
    _ROLE = ENGINE
    _PASS_THROUGH = ("store", "retrieve", "close")
    _RAISE_WHEN_ABSENT = (Capability.ENGINE_FREEZE,)

    store: Callable[..., Any]
    retrieve: Callable[..., Any]
    close: Callable[[], None]
    lookup: Callable[..., int]
    unpin: Callable[[str], None]
    prefetch: Callable[..., Any]
    is_healthy: Callable[[], bool]
    get_kv_events: Callable[[], list[Any]]
    freeze: Callable[[bool], None]
    is_frozen: Callable[[], bool]

    def _bind_specific(self, facts: ClassFacts, options: dict[str, Any]) -> None:
        allow = options.pop("allow", ())
        super()._bind_specific(facts, options)
        self._set("allow", allow)
        target, caps = self.target, self.capabilities
        cls_name = caps.cls_name
        downgrades = Downgrades(allow, f"{cls_name}.lookup", self.lmcache_version)
        surface = facts.surface
        self._set("lookup", engine_lookup(target.lookup, downgrades))
        self._set("unpin", engine_unpin(target.lookup_unpin if "lookup_unpin" in surface else None))
        prefetch = engine_prefetch(
            target.async_lookup_and_prefetch if Capability.ENGINE_ASYNC_PREFETCH in caps else None,
            target.prefetch if "prefetch" in surface else None,
            downgrades.at(f"{cls_name}.prefetch"),
        )
        if prefetch is None:
            version = self.lmcache_version

            def no_prefetch(*args: object, **kwargs: object) -> NoReturn:
                raise MissingCapabilityError(
                    Capability.ENGINE_ASYNC_PREFETCH.value,
                    member=Capability.ENGINE_ASYNC_PREFETCH.spec.member,
                    cls_name=cls_name,
                    installed=version,
                    since=Capability.ENGINE_ASYNC_PREFETCH.since,
                )

            prefetch = no_prefetch
        self._set("prefetch", prefetch)
        self._set(
            "is_healthy",
            engine_is_healthy(
                target.is_healthy if Capability.ENGINE_IS_HEALTHY in caps else None,
                target.health if Capability.ENGINE_HEALTH in caps else None,
            ),
        )
        if Capability.ENGINE_FREEZE in caps and "is_frozen" in surface:
            self._set("is_frozen", target.is_frozen)
        else:
            self._set("is_frozen", _not_frozen)


def _not_frozen() -> bool:
    return False


def get_or_create_engine(
    builder: Any,
    instance_id: str,
    config: Any,
    metadata: Any,
    gpu_connector: Any,
    *,
    broadcast_fn: Callable[[Any, int], None] | None = None,
    broadcast_object_fn: Callable[[Any, int], Any] | None = None,
    allow: Iterable[str] | bool = (),
    **kwargs: Any,
) -> Any:
    """``LMCacheEngineBuilder.get_or_create`` on any release: the broadcast functions are
    passed where the release takes them and, where it requires them (0.3.5 on) but none were
    given, single-process defaults are (correct for one rank only)."""
    from lmcache_compat.versions import installed_distribution_version

    downgrades = Downgrades(
        allow,
        f"{getattr(builder, '__qualname__', type(builder).__qualname__)}.get_or_create",
        installed_distribution_version("lmcache"),
    )
    call = engine_get_or_create(builder.get_or_create, downgrades)
    return call(
        instance_id,
        config,
        metadata,
        gpu_connector,
        broadcast_fn=broadcast_fn,
        broadcast_object_fn=broadcast_object_fn,
        **kwargs,
    )
