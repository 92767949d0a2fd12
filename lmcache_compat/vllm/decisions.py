"""What the connector binds to: LMCache's ``LMCacheConnectorV1Impl`` (found wherever the
installed release put it) through a :class:`~lmcache_compat.ConnectorAdapter`, or -- for an
object the adapter rejects, attached by hand (vLLM's white-box unit tests do that) -- a
:class:`PartialEngine` that binds what the object has. Also the decisions a connector class
must take before any engine exists (sleep mode), from a static read of the installed files.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable
from typing import Any, NoReturn

from lmcache_compat.core.adapter import ConnectorAdapter, ConnectorMethods
from lmcache_compat.core.catalog import CATALOG, CONNECTOR_CORE_METHODS, CONNECTOR_IMPL, Capability
from lmcache_compat.core.probes import Capabilities
from lmcache_compat.errors import LMCacheCompatError, NotAnEngineError, UpstreamNotFoundError
from lmcache_compat.upstream import locations as loc
from lmcache_compat.upstream.resolve import find, static_members
from lmcache_compat.versions import version_or_none
from lmcache_compat.vllm.facts import VllmFacts
from lmcache_compat.vllm.plugin import CONNECTOR_NAME

__all__ = [
    "PartialEngine",
    "engine_binding",
    "engine_has_sleep_hooks",
    "impl_class",
    "kv_events_of",
    "no_events",
]


def no_events() -> list[Any]:
    return []


def impl_class(native: bool) -> type:
    """LMCache's ``LMCacheConnectorV1Impl`` where the installed release defines it (0.5.7rc2
    moved it; a future move is found by name), or vLLM's vendored copy for ``use_native``."""
    place = loc.NATIVE_CONNECTOR_IMPL if native else loc.CONNECTOR_IMPL
    try:
        cls: type = find(place)
    except UpstreamNotFoundError as exc:
        if not native:
            raise
        raise ImportError(
            f"{CONNECTOR_NAME}: use_native=True needs vLLM's vendored copy of LMCache's "
            f"adapter ({place.modules[0]}), which this vLLM does not ship; drop use_native to "
            "use LMCache's own adapter"
        ) from exc
    return cls


@functools.cache
def engine_has_sleep_hooks(native: bool, hooks: tuple[str, ...]) -> bool:
    """Whether the installed engine class has every sleep-mode hook vLLM's base class defines,
    read from its files (``supports_sleep_mode`` is asked before any engine exists). No LMCache
    release has them yet: a release that adds them is answered True without a code change."""
    if not hooks:
        return False
    place = loc.NATIVE_CONNECTOR_IMPL if native else loc.CONNECTOR_IMPL
    try:
        members = static_members(place)
    except LMCacheCompatError:
        return False
    return all(hook in members for hook in hooks)


class PartialEngine(ConnectorMethods):
    """The connector's binding over an object :class:`~lmcache_compat.ConnectorAdapter` rejects
    (``NotAnEngineError``): a test double attached by hand, such as vLLM's unit tests use (a bare
    ``MagicMock()``, a stub with only ``save_kv_layer`` and ``wait_for_save``).

    Decided once, from the object itself (not its class, which says nothing about a mock): each
    method the object has is bound as is; a core method it lacks raises ``NotAnEngineError``
    when called (naming the object and the method); an optional one it lacks gets the
    catalog's fallback. Same attribute names as ``ConnectorAdapter``, so the connector binds
    from either the same way.
    """

    def __init__(self, engine: Any, rejected: NotAnEngineError) -> None:
        cls_name = type(engine).__qualname__
        self.engine = engine
        self.rejected = rejected
        self.lmcache_version = version_or_none("lmcache")
        self.missing_core = tuple(
            name for name in CONNECTOR_CORE_METHODS if not callable(getattr(engine, name, None))
        )
        for name in CONNECTOR_CORE_METHODS:
            method = getattr(engine, name, None)
            setattr(self, name, method if callable(method) else _not_bound(name, cls_name))
        present: set[Capability] = set()
        if "get_num_new_matched_tokens" not in self.missing_core:
            present.add(Capability.ASYNC_LOOKUP)  # unknown: a None answer is taken as valid
        for spec in CATALOG:
            if (
                CONNECTOR_IMPL not in spec.owners
                or spec.fallback is None
                or spec.keyword is not None
                or spec.kind != "method"
            ):
                continue
            method = getattr(engine, spec.method, None)
            if callable(method):
                present.add(spec.capability)
                setattr(self, spec.method, method)
            else:
                setattr(self, spec.method, types.MethodType(spec.fallback, self))
        self.capabilities = Capabilities(present, cls_name)


def _not_bound(name: str, cls_name: str) -> Callable[..., NoReturn]:
    def missing(*args: object, **kwargs: object) -> NoReturn:
        raise NotAnEngineError(
            f"{CONNECTOR_NAME}: the engine it was attached to ({cls_name}) has no {name}(), "
            f"which every LMCache {CONNECTOR_IMPL} has"
        )

    missing.__name__ = missing.__qualname__ = name
    return missing


def engine_binding(engine: Any, *, require_engine: bool) -> ConnectorAdapter | PartialEngine:
    """A ``ConnectorAdapter`` over ``engine``; for an object that is not an LMCache impl, a
    :class:`PartialEngine` (or, with ``require_engine``, the adapter's ``NotAnEngineError``;
    a class passed instead of an instance always gets it)."""
    try:
        return ConnectorAdapter(engine)
    except NotAnEngineError as exc:
        if require_engine or issubclass(type(engine), type):
            raise
        return PartialEngine(engine, exc)


def kv_events_of(binding: ConnectorAdapter | PartialEngine, facts: VllmFacts) -> Callable[[], Any]:
    """The engine's own ``get_kv_events`` where it has it and this vLLM takes connector events
    (its result is only tested for emptiness and iterated, so the adapter's list normalisation
    is not needed on this per-step path), else no events."""
    if facts.connector_events and Capability.KV_EVENTS in binding.capabilities:
        method: Callable[[], Any] = binding.engine.get_kv_events
        return method
    return no_events
