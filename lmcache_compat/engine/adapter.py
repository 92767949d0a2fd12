"""Uniform adapter over ``LMCacheEngine`` (``lmcache/v1/cache_engine.py``; 0.5.7rc2 moved it to
``lmcache/inprocess/v1/cache_engine.py``), 0.3.0 on, as SGLang-style integrations call it
directly, and over ``LMCacheEngineBuilder.get_or_create``.

``lookup(tokens, *, lookup_id, pin, request_configs, **kw)``, ``unpin(lookup_id)``,
``prefetch(tokens, *, lookup_id, **kw)``, ``is_healthy()``, ``get_kv_events()``,
``freeze(enabled)`` / ``is_frozen()``; ``store``, ``retrieve`` and ``close`` are the release's
own. How each call maps onto older releases: :mod:`lmcache_compat.engine.calls` and the
argument table (:mod:`lmcache_compat.core.arguments`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, NoReturn

from lmcache_compat.core.adapter import BoundAdapter
from lmcache_compat.core.arguments import Downgrades, normalise_allow
from lmcache_compat.core.binding import missing_error
from lmcache_compat.core.catalog import Capability, fallback_table
from lmcache_compat.core.roles import ENGINE
from lmcache_compat.core.signatures import facts_of
from lmcache_compat.engine.calls import (
    engine_get_or_create,
    engine_is_healthy,
    engine_lookup,
    engine_prefetch,
    engine_unpin,
)
from lmcache_compat.upstream import locations as loc
from lmcache_compat.upstream.resolve import find
from lmcache_compat.versions import version_or_none

__all__ = ["EngineAdapter", "get_or_create_engine"]


class EngineAdapter(BoundAdapter):
    """Uniform adapter over an ``LMCacheEngine`` of any release (see the module docstring)."""

    role = ENGINE

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
    #: The argument downgrades the caller accepted (``True``: all).

    def __init__(
        self,
        engine: object,
        *,
        require: Iterable[Capability | str] | Capability | str = (),
        strict: bool = False,
        allow: Iterable[str] | str | bool = (),
    ) -> None:
        binding = self._bind(
            engine,
            require,
            strict,
            allow,
            core=("store", "retrieve", "close"),
            raise_absent=(Capability.ENGINE_FREEZE,),
        )
        target, caps, surface = binding.target, binding.capabilities, binding.facts.surface
        downgrades = binding.downgrades("lookup")
        self.lookup = engine_lookup(target.lookup, surface["lookup"], downgrades)
        unpin = surface.get("lookup_unpin")
        self.unpin = engine_unpin(target.lookup_unpin if unpin else None, unpin)
        sync = surface.get("prefetch")
        prefetch = engine_prefetch(
            target.async_lookup_and_prefetch if Capability.ENGINE_ASYNC_PREFETCH in caps else None,
            target.prefetch if sync is not None else None,
            sync,
            binding.downgrades("prefetch"),
        )
        if prefetch is None:
            error = Capability.ENGINE_ASYNC_PREFETCH.spec
            cls_name, version = caps.cls_name, self.lmcache_version

            def no_prefetch(*args: object, **kwargs: object) -> NoReturn:
                raise missing_error(error, cls_name, version)

            prefetch = no_prefetch
        self.prefetch = prefetch
        self.is_healthy = engine_is_healthy(
            target.is_healthy if Capability.ENGINE_IS_HEALTHY in caps else None,
            target.health if Capability.ENGINE_HEALTH in caps else None,
        )
        if Capability.ENGINE_FREEZE in caps and "is_frozen" in surface:
            self.is_frozen = target.is_frozen
        else:
            self.is_frozen = _not_frozen

    @property
    def engine(self) -> Any:
        """The wrapped ``LMCacheEngine``."""
        return self.target


EngineAdapter.__doc__ = (EngineAdapter.__doc__ or "") + fallback_table(ENGINE)


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
    given, single-process defaults are (correct for one rank only). ``builder=None`` finds
    ``LMCacheEngineBuilder`` in the installed LMCache (see
    :mod:`lmcache_compat.upstream.locations`)."""

    if builder is None:
        builder = find(loc.ENGINE_BUILDER)
    name = getattr(builder, "__qualname__", type(builder).__qualname__)
    downgrades = Downgrades(
        normalise_allow(allow), f"{name}.get_or_create", version_or_none("lmcache")
    )
    method = builder.get_or_create
    call = engine_get_or_create(method, facts_of(method), downgrades)
    return call(
        instance_id,
        config,
        metadata,
        gpu_connector,
        broadcast_fn=broadcast_fn,
        broadcast_object_fn=broadcast_object_fn,
        **kwargs,
    )
