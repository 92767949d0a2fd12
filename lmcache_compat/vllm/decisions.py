"""What the vLLM connector binds and converts, decided once from the adapter's facts and the
running vLLM's (:class:`~lmcache_compat.vllm.facts.VllmFacts`). Imports no vLLM: the unit tier
tests every decision with facts it builds.

The per-method tables are derived from the catalog and the role, never written twice:

* every core method of ``LMCacheConnectorV1Impl`` and every catalog pass-through row of that
  role (:func:`~lmcache_compat.core.catalog.pass_through`) is forwarded under its own name,
  when vLLM's connector base class defines that name, straight to the adapter's callable;
* the methods whose call or result differ are :data:`CONVERTERS`: each names the vLLM method
  and builds what a call runs (matched tokens as vLLM's tuple, the KV caches handed to releases
  without ``register_kv_caches``, KV events converted to vLLM's classes);
* the start-up warning lists the absent capabilities of the role whose rows ask for one
  (``warn_absent``) and that this vLLM would use.

Adding a catalog row (and its fallback) is therefore the whole change needed to forward a new
optional method; a method whose result must be converted adds its converter here.

An object the adapter rejects (``NotAnEngineError``) attached by hand -- vLLM's own white-box
unit tests attach a bare ``MagicMock()`` or a stub with two methods -- is bound through a
:class:`PartialEngine`, which binds what the object has by the same tables.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn

from lmcache_compat.core.adapter import ConnectorAdapter
from lmcache_compat.core.catalog import CATALOG, Capability, CapabilitySpec, pass_through
from lmcache_compat.core.probes import Capabilities, live_surface
from lmcache_compat.core.roles import CONNECTOR
from lmcache_compat.errors import LMCacheCompatError, NotAnEngineError, UpstreamNotFoundError
from lmcache_compat.upstream import locations as loc
from lmcache_compat.upstream.known_issues import issue
from lmcache_compat.upstream.resolve import find, static_members
from lmcache_compat.versions import version_or_none
from lmcache_compat.vllm.plugin import CONNECTOR_NAME

if TYPE_CHECKING:
    from lmcache_compat.vllm.facts import VllmFacts

__all__ = [
    "CONVERTERS",
    "ConnectorPlan",
    "EventsFactory",
    "PartialEngine",
    "absent_warnings",
    "decide",
    "engine_binding",
    "engine_has_sleep_hooks",
    "impl_class",
]

#: ``(binding's get_kv_events, vLLM facts) -> get_kv_connector_kv_cache_events``: built by the
#: events module (which imports vLLM's event classes) and handed in.
EventsFactory = Callable[[Callable[[], Any]], Callable[[], Any]]

#: Per-step layerwise state vLLM's own connector resets in ``bind_connector_metadata`` for
#: engines without a bind hook (recent vLLM may call ``start_load_kv`` after the forward).
_LAYERWISE_RESET: tuple[tuple[str, Callable[[], Any], bool], ...] = (
    # (attribute, fresh value, reset only when the engine instance has it at construction)
    ("current_layer", int, True),
    ("layerwise_retrievers", list, True),
    ("layerwise_storers", list, False),
)
#: Where an engine without ``register_kv_caches`` (before 0.3.12) keeps the KV caches it
#: otherwise discovers from the forward context on the first ``start_load_kv``.
_KV_CACHES_ATTRIBUTE = "kv_caches"
#: Methods the connector class handles itself (state of its own: shut down once).
OWN = frozenset({"shutdown"})


# --- finding the engine class ---------------------------------------------------------------------


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


# --- the binding over the engine ----------------------------------------------------------------


class PartialEngine:
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
            name for name, _ in CONNECTOR.core if not callable(getattr(engine, name, None))
        )
        for name, _ in CONNECTOR.core:
            method = getattr(engine, name, None)
            setattr(self, name, method if callable(method) else _not_bound(name, cls_name))
        present: set[Capability] = set()
        if "get_num_new_matched_tokens" not in self.missing_core:
            present.add(Capability.ASYNC_LOOKUP)  # unknown: a None answer is taken as valid
        for spec in pass_through(CONNECTOR):
            method = getattr(engine, spec.method, None)
            if callable(method):
                present.add(spec.capability)
                setattr(self, spec.method, method)
            else:  # the fallback takes the binding as self, like an adapter's
                assert spec.fallback is not None  # pass_through rows all have one
                setattr(self, spec.method, types.MethodType(spec.fallback, self))
        self.capabilities = Capabilities.of(present, cls_name)

    if TYPE_CHECKING:

        def __getattr__(self, name: str) -> Any: ...


def _not_bound(name: str, cls_name: str) -> Callable[..., NoReturn]:
    def missing(*args: object, **kwargs: object) -> NoReturn:
        raise NotAnEngineError(
            f"{CONNECTOR_NAME}: the engine it was attached to ({cls_name}) has no {name}(), "
            f"which every LMCache {CONNECTOR.name} has"
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


# --- conversions: vLLM methods whose call or result differ from the engine's -------------------


@dataclass(frozen=True, slots=True)
class Context:
    """What a converter decides from."""

    binding: ConnectorAdapter | PartialEngine
    engine: Any
    facts: VllmFacts
    events: EventsFactory | None


def _matched_tokens(ctx: Context) -> Callable[[Any, int], tuple[int | None, bool]]:
    """``get_num_new_matched_tokens``: vLLM wants ``(count, load_async)``; this vLLM may not
    take "ask again later" (``None``), then a pending lookup reports no hit for now."""
    lookup = ctx.binding.get_num_new_matched_tokens
    if ctx.facts.accepts_none_matched or Capability.ASYNC_LOOKUP not in ctx.binding.capabilities:

        def matched(request: Any, num_computed_tokens: int) -> tuple[int | None, bool]:
            return lookup(request, num_computed_tokens), False

        return matched

    def matched_sync(request: Any, num_computed_tokens: int) -> tuple[int | None, bool]:
        count = lookup(request, num_computed_tokens)
        return (0 if count is None else count), False

    return matched_sync


def _after_alloc(ctx: Context) -> Callable[[Any, Any, int], None]:
    """``update_state_after_alloc(request, blocks, n)``: the engine takes no blocks."""
    update = ctx.binding.update_state_after_alloc

    def update_state_after_alloc(request: Any, blocks: Any, num_external_tokens: int) -> None:
        update(request, num_external_tokens)

    return update_state_after_alloc


def _register(ctx: Context) -> Callable[[Any], None]:
    """``register_kv_caches``: the engine's own from 0.3.12. Before it, the release finds its
    KV caches through the forward context on the first ``start_load_kv``, which fails on recent
    vLLM ("'ForwardContext' object has no attribute 'virtual_engine'"): the caches vLLM
    registers are put where the release reads them (its ``kv_caches`` dict), as 0.3.12's
    ``register_kv_caches`` does, so that discovery is never needed."""
    binding, engine = ctx.binding, ctx.engine
    if Capability.REGISTER_KV_CACHES in binding.capabilities:
        own: Callable[[Any], None] = binding.register_kv_caches
        return own
    caches = vars(engine).get(_KV_CACHES_ATTRIBUTE) if hasattr(engine, "__dict__") else None
    if not isinstance(caches, dict):
        fallback: Callable[[Any], None] = binding.register_kv_caches
        return fallback  # nowhere to put them: the catalog fallback

    def hand_over_kv_caches(kv_caches: Any) -> None:
        if not caches:  # registered once, like the release's own discovery
            caches.update(kv_caches)

    return hand_over_kv_caches


def no_events() -> None:
    return None


def _kv_events(ctx: Context) -> Callable[[], Any]:
    """``get_kv_connector_kv_cache_events``: the engine's ``get_kv_events`` converted to this
    vLLM's event classes, where the engine has it and this vLLM takes connector events."""
    if (
        ctx.events is None
        or not ctx.facts.connector_events
        or Capability.KV_EVENTS not in ctx.binding.capabilities
    ):
        return no_events
    return ctx.events(ctx.binding.engine.get_kv_events)


def _ignore_output(connector_output: Any) -> None:
    return None


#: vLLM connector method -> ``(the engine method it stands for, its converter)``. The
#: ``update_connector_output`` entry applies only on a vLLM without connector events.
CONVERTERS: Mapping[str, tuple[str, Callable[[Context], Callable[..., Any]]]] = {
    "get_num_new_matched_tokens": ("get_num_new_matched_tokens", _matched_tokens),
    "update_state_after_alloc": ("update_state_after_alloc", _after_alloc),
    "register_kv_caches": ("register_kv_caches", _register),
    "get_kv_connector_kv_cache_events": ("get_kv_events", _kv_events),
}


def engine_binder(engine: Any, *, from_instance: bool = False) -> Callable[[Any], None]:
    """The engine's own ``bind_connector_metadata`` when its class (for a
    :class:`PartialEngine`, the object itself) has one; otherwise reset the per-step layerwise
    state the engine keeps (as vLLM's connector does), or nothing."""
    owner = engine if from_instance else type(engine)
    if callable(getattr(owner, "bind_connector_metadata", None)):
        bound: Callable[[Any], None] = engine.bind_connector_metadata
        return bound
    resets = tuple(
        (name, fresh)
        for name, fresh, only_if_present in _LAYERWISE_RESET
        if not only_if_present or hasattr(engine, name)
    )

    def reset_layerwise_state(metadata: Any) -> None:
        for name, fresh in resets:
            setattr(engine, name, fresh())

    return reset_layerwise_state


def _sleep_hooks(engine: Any, facts: VllmFacts) -> dict[str, Callable[[], Any]]:
    """Sleep-mode hooks (vLLM 0.33) the engine's class has, bound to the engine; the others
    keep vLLM's default (a no-op; ``supports_sleep_mode`` is False then)."""
    if not facts.sleep_hooks:
        return {}
    surface = live_surface(type(engine), facts.sleep_hooks)
    return {
        name: getattr(engine, name)
        for name, hook in surface.items()
        if hook.kind == "method" and not hook.is_async and hook.binds(0)
    }


# --- the plan -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConnectorPlan:
    """Everything the connector binds, decided once by :func:`decide`."""

    #: vLLM method name -> what a call runs (the connector puts each on its instance unless a
    #: subclass overrides the method).
    calls: dict[str, Callable[..., Any]]
    #: What ``bind_connector_metadata`` runs after vLLM's own bookkeeping.
    bind_engine: Callable[[Any], None]
    #: The start-up warning's parts (empty: nothing to say).
    warnings: tuple[str, ...]


def forwarded(facts: VllmFacts) -> tuple[str, ...]:
    """The engine methods forwarded as they are: the role's core methods and catalog
    pass-through rows, under names vLLM's base class defines, minus converted and own ones."""
    converted = {engine_name for engine_name, _ in CONVERTERS.values()}
    names = [name for name, _ in CONNECTOR.core] + [s.method for s in pass_through(CONNECTOR)]
    return tuple(
        name
        for name in dict.fromkeys(names)
        if name in facts.base_methods and name not in converted and name not in OWN
    )


def decide(
    binding: ConnectorAdapter | PartialEngine,
    engine: Any,
    facts: VllmFacts,
    *,
    native: bool,
    events: EventsFactory | None,
) -> ConnectorPlan:
    """The connector's whole binding over ``engine``, for this vLLM."""
    ctx = Context(binding, engine, facts, events)
    calls: dict[str, Callable[..., Any]] = {
        name: getattr(binding, name) for name in forwarded(facts)
    }
    for vllm_name, (_, convert) in CONVERTERS.items():
        calls[vllm_name] = convert(ctx)
    if not facts.connector_events:  # KVConnectorOutput has no kv_cache_events: idle steps
        calls["update_connector_output"] = _ignore_output
    calls.update(_sleep_hooks(engine, facts))
    if isinstance(binding, PartialEngine):
        warnings, from_instance = partial_warnings(binding), True
    else:
        warnings, from_instance = absent_warnings(binding, facts, native), False
    return ConnectorPlan(calls, engine_binder(engine, from_instance=from_instance), warnings)


def partial_warnings(binding: PartialEngine) -> tuple[str, ...]:
    if binding.missing_core:
        lacks = ", ".join(f"{name}()" for name in binding.missing_core)
        core = f"it lacks {lacks}, which raise NotAnEngineError when called"
    else:
        core = "it has every core method"
    return (
        f"attached to {binding.capabilities.cls_name}, which is not an LMCache "
        f"{CONNECTOR.name}: bound the methods the object has ({core}); optional methods it "
        "lacks use lmcache-compat's fallbacks",
    )


def _absent_text(spec: CapabilitySpec, source: str, native: bool) -> str:
    if spec.returns_none:
        lacks = f"{source}'s {spec.method}() never returns None"
    else:
        lacks = f"{source} lacks {spec.method}"
    if native:
        hint = f"LMCache's own adapter has it from {spec.since}: drop use_native"
    else:
        hint = f"first release with it: {spec.since}"
    return f"{spec.impact} ({lacks}; {hint})"


def _used_by(spec: CapabilitySpec, facts: VllmFacts) -> bool:
    """Whether this vLLM would use the capability (a loss it cannot feel is not warned)."""
    if spec.capability is Capability.ASYNC_LOOKUP:
        return facts.accepts_none_matched
    if spec.capability is Capability.KV_EVENTS:
        return facts.connector_events
    if spec.capability is Capability.LOAD_ERROR_REPORTING:
        return facts.load_failure_path
    return True


def absent_warnings(
    binding: ConnectorAdapter | PartialEngine, facts: VllmFacts, native: bool
) -> tuple[str, ...]:
    """The start-up warning over a real engine: what the release lacks that this vLLM would use,
    and what vLLM itself cannot do (report failed loads before 0.11.2)."""
    caps = binding.capabilities
    version = binding.lmcache_version or "unknown"
    source = "vLLM's vendored LMCache adapter" if native else f"LMCache {version}"
    texts = [
        _absent_text(spec, source, native)
        for spec in CATALOG
        if CONNECTOR in spec.owners
        and spec.warn_absent
        and spec.capability not in caps
        and _used_by(spec, facts)
    ]
    if not facts.load_failure_path:
        fix = issue("vllm-no-load-failure-path").fixes[0]
        texts.append(
            f"{Capability.LOAD_ERROR_REPORTING.spec.impact} (this vLLM's KVConnectorOutput has "
            "no invalid_block_ids, so it never asks the connector for failed loads; first vLLM "
            f"with it: {fix.version})"
        )
    return tuple(texts)
