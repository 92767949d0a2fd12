"""``LMCacheCompatConnector``: a drop-in vLLM v1 KV connector over any LMCache release.

Configure it like vLLM's own ``LMCacheConnectorV1``::

    --kv-transfer-config '{"kv_connector": "LMCacheCompatConnector",
                           "kv_connector_module_path": "lmcache_compat.vllm",
                           "kv_role": "kv_both"}'

or install lmcache-compat with its ``vllm.general_plugins`` entry point (:func:`register`) and
leave out ``kv_connector_module_path``.

What differs from vLLM's in-tree ``LMCacheConnectorV1``:

* every LMCache capability is decided once, at construction, by a
  :class:`~lmcache_compat.ConnectorAdapter` (no ``getattr``/``hasattr`` per step; the per-step
  methods are bound straight to the adapter's callables); a release without ``get_kv_events``
  yields no KV events instead of raising ``AttributeError`` each step;
* everything about the running vLLM (whether the base ``__init__`` takes ``kv_cache_config``,
  whether ``get_num_new_matched_tokens`` may answer ``None``, the fields of ``BlockStored`` and
  ``BlockRemoved``) is read once from signatures and struct fields, not from version numbers;
* ``shutdown()`` reaches the LMCache engine (vLLM's in-tree connector never forwards it);
* LMCache's ``CacheRemoveEvent`` (0.5.x) becomes a ``BlockRemoved`` and byte hashes pass through;
* one warning at start-up names what the installed LMCache release lacks and what that costs.

Importing this module imports vLLM (the connector subclasses ``KVConnectorBase_V1``);
``import lmcache_compat`` never imports it.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import inspect
import logging
from collections.abc import Callable, Iterable
from operator import attrgetter
from typing import Any

from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1

from lmcache_compat.adapter import ConnectorAdapter, first_release
from lmcache_compat.catalog import Capability, CapabilitySpec
from lmcache_compat.vllm_plugin import CONNECTOR_NAME, register

try:  # vLLM >= 0.13.0: connectors hand KV cache events to the scheduler
    from vllm.distributed.kv_events import KVConnectorKVEvents as _EventsBase
    from vllm.distributed.kv_events import KVEventAggregator as _Aggregator
except ImportError:  # pragma: no cover - older vLLM: the connector event path does not exist
    _EventsBase = object
    _Aggregator = None

__all__ = ["CONNECTOR_NAME", "CompatKVEvents", "LMCacheCompatConnector", "VllmFacts", "register"]

logger = logging.getLogger(__name__)


_LMCACHE_IMPL_MODULE = "lmcache.integration.vllm.vllm_v1_adapter"
_NATIVE_IMPL_MODULE = (
    "vllm.distributed.kv_transfer.kv_connector.v1.lmcache_integration.vllm_v1_adapter"
)
_IMPL_CLASS = "LMCacheConnectorV1Impl"

#: Absent capabilities worth a start-up warning, in catalog order. ``inference_info`` (unused
#: here) and ``register_kv_caches`` (no loss: KV caches come from the forward context) are not.
_WARN_WHEN_ABSENT = (
    Capability.GET_FINISHED,
    Capability.REQUEST_FINISHED,
    Capability.ASYNC_LOOKUP,
    Capability.LOAD_ERROR_REPORTING,
    Capability.SHUTDOWN,
    Capability.KV_EVENTS,
)

#: Per-step layerwise state vLLM's own connector resets in ``bind_connector_metadata`` for
#: engines without a bind hook (recent vLLM may call ``start_load_kv`` after the forward).
_LAYERWISE_RESET: tuple[tuple[str, Callable[[], Any], bool], ...] = (
    # (attribute, fresh value, reset only when the engine instance has it at construction)
    ("current_layer", int, True),
    ("layerwise_retrievers", list, True),
    ("layerwise_storers", list, False),
)


# --- what the running vLLM offers: read once ---------------------------------------------------


@dataclasses.dataclass(frozen=True)
class VllmFacts:
    """What this connector needs to know about the running vLLM, read from its code once."""

    #: ``KVConnectorBase_V1.__init__`` takes ``kv_cache_config`` (optional from 0.11.2,
    #: required from 0.21.0).
    base_takes_kv_cache_config: bool
    #: ``get_num_new_matched_tokens`` may answer ``None`` ("ask again later", 0.10.2 on).
    accepts_none_matched: bool
    #: The connector KV-event path exists (``get_kv_connector_kv_cache_events``,
    #: ``KVConnectorKVEvents``, ``KVEventAggregator``, ``BlockStored``: 0.13.0 on).
    connector_events: bool
    #: ``BlockStored`` / ``BlockRemoved`` classes and their ``(field, required)`` pairs.
    block_stored: type | None
    block_stored_fields: tuple[tuple[str, bool], ...]
    block_removed: type | None
    block_removed_fields: tuple[tuple[str, bool], ...]
    #: ``BlockStored.block_hashes`` accepts ``bytes`` (``ExternalBlockHash = bytes | int``).
    hashes_accept_bytes: bool
    #: vLLM carries failed KV loads back to the scheduler
    #: (``KVConnectorOutput.invalid_block_ids``: 0.11.2 on). Before it, nothing in vLLM calls
    #: ``get_block_ids_with_load_errors`` and a block that failed to load is used as loaded.
    load_failure_path: bool = True


def _struct_fields(cls: type) -> tuple[tuple[str, bool], ...]:
    """``(name, required)`` for each declared field of a msgspec Struct or a dataclass."""
    if hasattr(cls, "__struct_fields__"):
        structs: Any = importlib.import_module("msgspec.structs")
        return tuple((f.name, bool(f.required)) for f in structs.fields(cls))
    if dataclasses.is_dataclass(cls):
        missing = dataclasses.MISSING
        return tuple(
            (f.name, f.default is missing and f.default_factory is missing)
            for f in dataclasses.fields(cls)
        )
    raise TypeError(f"{cls!r} is neither a msgspec Struct nor a dataclass")


def _field_type_text(cls: type, name: str) -> str:
    if hasattr(cls, "__struct_fields__"):
        structs: Any = importlib.import_module("msgspec.structs")
        for f in structs.fields(cls):
            if f.name == name:
                return str(f.type)
    return str(getattr(cls, "__annotations__", {}).get(name, ""))


def _declares_field(module_name: str, class_name: str, field: str) -> bool:
    """Whether ``module_name.class_name`` (a dataclass or annotated class) declares ``field``."""
    try:
        module: Any = importlib.import_module(module_name)
    except ImportError:  # pragma: no cover - every vLLM v1 has the module
        return False
    cls = getattr(module, class_name, None)
    return field in getattr(cls, "__dataclass_fields__", {}) or field in getattr(
        cls, "__annotations__", {}
    )


def _annotation_allows_none(annotation: object) -> bool:
    text = annotation if isinstance(annotation, str) else repr(annotation)
    return "None" in text or "Optional" in text


@functools.cache
def vllm_facts() -> VllmFacts:
    """Read the running vLLM's connector surface (cached: vLLM does not change in a process)."""
    base_init = inspect.signature(KVConnectorBase_V1.__init__).parameters
    matched = inspect.signature(KVConnectorBase_V1.get_num_new_matched_tokens)
    stored: type | None = None
    removed: type | None = None
    try:
        kv_events: Any = importlib.import_module("vllm.distributed.kv_events")
        stored = getattr(kv_events, "BlockStored", None)
        removed = getattr(kv_events, "BlockRemoved", None)
    except ImportError:  # pragma: no cover - every vLLM v1 has the module
        pass
    stored_fields = _struct_fields(stored) if stored is not None else ()
    removed_fields = _struct_fields(removed) if removed is not None else ()
    return VllmFacts(
        base_takes_kv_cache_config="kv_cache_config" in base_init,
        accepts_none_matched=_annotation_allows_none(matched.return_annotation),
        connector_events=(
            _Aggregator is not None
            and stored is not None
            and hasattr(KVConnectorBase_V1, "get_kv_connector_kv_cache_events")
        ),
        block_stored=stored,
        block_stored_fields=stored_fields,
        block_removed=removed,
        block_removed_fields=removed_fields,
        hashes_accept_bytes=stored is not None
        and "bytes" in _field_type_text(stored, "block_hashes"),
        load_failure_path=_declares_field(
            "vllm.v1.outputs", "KVConnectorOutput", "invalid_block_ids"
        ),
    )


# --- KV cache events ---------------------------------------------------------------------------


class CompatKVEvents(_EventsBase):  # type: ignore[misc]
    """The KV cache events of one step, counted per worker with vLLM's ``KVEventAggregator``.

    A worker returns one of these (one worker, its converted events); vLLM's
    ``KVOutputAggregator`` merges the workers' containers (``add_events`` +
    ``increment_workers``); the scheduler-side connector keeps, per step, only the events every
    worker reported (:meth:`aggregate`), which is how vLLM's own LMCache connector publishes.
    """

    def __init__(self, num_workers: int = 1) -> None:
        if _Aggregator is None:  # pragma: no cover - the connector never builds one then
            raise RuntimeError("this vLLM has no KVEventAggregator")
        self._counts: Any = _Aggregator(num_workers)

    def add_events(self, events: list[Any]) -> None:
        self._counts.add_events(events)

    def aggregate(self) -> CompatKVEvents:
        """Keep only the events reported by every contributing worker (one copy each)."""
        common = self._counts.get_common_events()
        self._counts.clear_events()
        self._counts.add_events(common)
        self._counts.reset_workers()
        return self

    def increment_workers(self, count: int = 1) -> None:
        self._counts.increment_workers(count)

    def get_all_events(self) -> list[Any]:
        events: list[Any] = self._counts.get_all_events()
        return events

    def get_number_of_workers(self) -> int:
        return int(self._counts.get_number_of_workers())

    def clear_events(self) -> None:
        self._counts.clear_events()
        self._counts.reset_workers()

    def __repr__(self) -> str:
        return (
            f"<CompatKVEvents workers={self.get_number_of_workers()} "
            f"events={len(self.get_all_events())}>"
        )


def _source_fields(cls: type) -> frozenset[str]:
    """Field names of an LMCache event class (dataclass fields, else annotations)."""
    if dataclasses.is_dataclass(cls):
        return frozenset(f.name for f in dataclasses.fields(cls))
    names: set[str] = set()
    for klass in cls.__mro__:
        names.update(getattr(klass, "__annotations__", {}))
    return frozenset(names)


def _hash_to_int(value: Any) -> Any:
    return int.from_bytes(value, "big") if isinstance(value, (bytes, bytearray)) else value


_Plan = tuple[Any, Any, "Callable[[Any], Any] | None"]


def _positional_prefix(target: type) -> tuple[str, ...]:
    """The names ``target`` accepts positionally, in order (from its signature)."""
    try:
        params = inspect.signature(target).parameters.values()
    except (TypeError, ValueError):
        return ()
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    names: list[str] = []
    for param in params:
        if param.kind not in positional:
            break
        names.append(param.name)
    return tuple(names)


class _EventConverter:
    """LMCache event objects -> the running vLLM's ``BlockStored`` / ``BlockRemoved``.

    The arguments for each target are decided once per LMCache event class from the target's
    declared fields: fields the event has are copied, required fields it lacks (``lora_name``
    before LMCache 0.3.13) are ``None``, fields the target does not declare (``medium`` before
    vLLM 0.10.2, ``lora_name`` before 0.14.1) are left out. Byte hashes (LMCache 0.5.x) pass
    through unchanged where ``ExternalBlockHash`` takes bytes and become big-endian ints where
    it does not. When the copied fields are the target's leading fields (every current pairing)
    an event becomes ``target(*attrgetter(event))`` with no per-event Python frame.
    """

    def __init__(self, facts: VllmFacts) -> None:
        self._facts = facts
        self._plans: dict[type, _Plan | None] = {}
        for name in ("CacheStoreEvent", "CacheRemoveEvent"):
            cls = _lmcache_event_class(name)
            if cls is not None:
                self._plans[cls] = self._plan(cls)

    def __call__(self, events: Iterable[Any]) -> list[Any]:
        plans = self._plans
        out: list[Any] = []
        append = out.append
        last: type | None = None
        plan: _Plan | None = None
        for event in events:
            cls = type(event)
            if cls is not last:
                last = cls
                try:
                    plan = plans[cls]
                except KeyError:  # a class not seen at construction: decided once, here
                    plan = plans[cls] = self._plan(cls)
            if plan is None:
                continue
            target, getter, convert = plan
            if convert is None:
                append(target(*getter(event)))
            else:
                append(convert(event))
        return out

    def _plan(self, cls: type) -> _Plan | None:
        facts = self._facts
        fields = _source_fields(cls)
        if "block_hashes" not in fields:
            logger.warning("Ignoring KV cache events of unknown type %s", cls.__qualname__)
            return None
        is_store = "token_ids" in fields or "parent_block_hash" in fields
        target = facts.block_stored if is_store else facts.block_removed
        declared = facts.block_stored_fields if is_store else facts.block_removed_fields
        if target is None:
            return None
        copied = tuple(name for name, _ in declared if name in fields)
        filled = {name: None for name, required in declared if required and name not in fields}
        getter = attrgetter(*copied)
        positional = (
            len(copied) >= 2
            and not filled
            and facts.hashes_accept_bytes
            and _positional_prefix(target)[: len(copied)] == copied
        )
        if positional:
            return (target, getter, None)
        single = len(copied) == 1
        fix_hashes = not facts.hashes_accept_bytes

        def convert(event: Any) -> Any:
            values = getter(event)
            kwargs = dict(zip(copied, (values,) if single else values, strict=True))
            if fix_hashes:
                kwargs["block_hashes"] = [_hash_to_int(h) for h in kwargs["block_hashes"]]
                if "parent_block_hash" in kwargs:
                    kwargs["parent_block_hash"] = _hash_to_int(kwargs["parent_block_hash"])
            kwargs.update(filled)
            return target(**kwargs)

        return (target, getter, convert)


def _lmcache_event_class(name: str) -> type | None:
    try:
        module: Any = importlib.import_module("lmcache.utils")
    except ImportError:
        return None
    cls = getattr(module, name, None)
    return cls if isinstance(cls, type) else None


def _no_events() -> list[Any]:
    return []


def _none() -> None:
    return None


# --- the connector -----------------------------------------------------------------------------


def _impl_class(native: bool) -> type:
    """LMCache's ``LMCacheConnectorV1Impl``, or vLLM's vendored copy for ``use_native``."""
    name = _NATIVE_IMPL_MODULE if native else _LMCACHE_IMPL_MODULE
    try:
        module: Any = importlib.import_module(name)
    except ModuleNotFoundError as exc:
        # Only when the vendored package itself is missing (vLLM 0.11.0 has none); an LMCache
        # module the vendored copy fails to import keeps its own error.
        if not native or not exc.name or not name.startswith(exc.name):
            raise
        raise ImportError(
            f"{CONNECTOR_NAME}: use_native=True needs vLLM's vendored copy of LMCache's "
            f"adapter ({name}), which this vLLM does not ship; drop use_native to use "
            "LMCache's own adapter"
        ) from exc
    cls: type = getattr(module, _IMPL_CLASS)
    return cls


def _absent_text(spec: CapabilitySpec, source: str, native: bool) -> str:
    if spec.returns_none:
        lacks = f"{source}'s {spec.method}() never returns None"
    else:
        lacks = f"{source} lacks {spec.method}"
    if native:
        hint = f"LMCache's own adapter has it from {first_release(spec)}: drop use_native"
    else:
        hint = f"first release with it: {first_release(spec)}"
    return f"{spec.impact} ({lacks}; {hint})"


class LMCacheCompatConnector(KVConnectorBase_V1):  # type: ignore[misc]
    """vLLM v1 KV connector over LMCache's ``LMCacheConnectorV1Impl`` through a
    :class:`~lmcache_compat.ConnectorAdapter`: same behaviour as vLLM's ``LMCacheConnectorV1``
    where LMCache has the capability, the catalog's fallback where it does not.

    ``kv_connector_extra_config["use_native"] = True`` wraps vLLM's vendored copy of the LMCache
    adapter instead of LMCache's own. ``_lmcache_engine`` is the wrapped impl (the same name
    vLLM's connector uses), ``compat_adapter`` the adapter over it.
    """

    @classmethod
    def requires_piecewise_for_cudagraph(cls, extra_config: dict[str, Any]) -> bool:
        """Layerwise loads/saves synchronise per layer, which CUDA graphs cannot capture."""
        return bool(extra_config.get("use_layerwise", False))

    def __init__(self, vllm_config: Any, role: Any, kv_cache_config: Any = None) -> None:
        facts = vllm_facts()
        if facts.base_takes_kv_cache_config:
            super().__init__(vllm_config=vllm_config, role=role, kv_cache_config=kv_cache_config)
        else:
            super().__init__(vllm_config=vllm_config, role=role)
        extra = getattr(vllm_config.kv_transfer_config, "kv_connector_extra_config", None) or {}
        native = bool(extra.get("use_native", False))
        self._attach(_impl_class(native)(vllm_config, role, self), native=native)

    def _attach(self, engine: Any, *, native: bool = False) -> None:
        """Decide and bind everything over an already-built LMCache impl (called by
        ``__init__``; ``benchmarks/bench_connector.py`` calls it on a connector built with
        ``object.__new__`` over a stand-in engine, skipping the LMCache impl's construction)."""
        facts = vllm_facts()
        adapter = ConnectorAdapter(engine)
        self._lmcache_engine: Any = engine
        self.compat_adapter: ConnectorAdapter = adapter
        self.vllm_facts: VllmFacts = facts
        self._shut_down = False
        self._pending_events: CompatKVEvents | None = None

        # Bound once: every call below is one attribute load and one call.
        self._start_load_kv = adapter.start_load_kv
        self._wait_for_layer_load = adapter.wait_for_layer_load
        self._save_kv_layer = adapter.save_kv_layer
        self._wait_for_save = adapter.wait_for_save
        self._get_finished = adapter.get_finished
        self._load_errors = adapter.get_block_ids_with_load_errors
        self._build_connector_meta = adapter.build_connector_meta
        self._update_state_after_alloc = adapter.update_state_after_alloc
        self._request_finished = adapter.request_finished
        self._matched = self._matched_tokens_callable(adapter, facts)
        self._bind_engine = self._engine_binder(engine)
        # The capability is the adapter's decision; with it, the engine's own get_kv_events
        # is called directly (its result is only tested for emptiness and iterated here, so
        # the adapter's list normalisation is not needed on this per-step path).
        self._kv_events: Callable[[], Any] = (
            engine.get_kv_events
            if facts.connector_events and Capability.KV_EVENTS in adapter.capabilities
            else _no_events
        )
        self._convert_events = _EventConverter(facts) if facts.connector_events else None
        self._events_path = facts.connector_events
        self._collect_events = self._events_getter()
        self._shadow_forwarders()

        self._warn_absent(adapter, native, facts)

    # --- decisions made once -------------------------------------------------------------------

    def _shadow_forwarders(self) -> None:
        """Per-step fast path: where this class's forwarding method has the adapter's exact
        signature, the instance gets the adapter's bound callable under the method's name, so
        vLLM's call lands on it without a forwarding frame. Methods a subclass overrides keep
        the subclass's version (decided here, once)."""
        fast: dict[str, Callable[..., Any]] = {
            "start_load_kv": self._start_load_kv,
            "wait_for_layer_load": self._wait_for_layer_load,
            "save_kv_layer": self._save_kv_layer,
            "wait_for_save": self._wait_for_save,
            "get_finished": self._get_finished,
            "get_block_ids_with_load_errors": self._load_errors,
            "build_connector_meta": self._build_connector_meta,
            "request_finished": self._request_finished,
            "get_kv_connector_kv_cache_events": self._collect_events,
        }
        cls = type(self)
        shadows = self.__dict__
        for name, bound in fast.items():
            if getattr(cls, name) is getattr(LMCacheCompatConnector, name):
                shadows[name] = bound

    def _events_getter(self) -> Callable[[], CompatKVEvents | None]:
        kv_events, convert = self._kv_events, self._convert_events
        if convert is None:
            return _none

        def get_kv_connector_kv_cache_events() -> CompatKVEvents | None:
            events = kv_events()
            if not events:
                return None
            converted = convert(events)
            if not converted:
                return None
            container = CompatKVEvents(num_workers=1)
            container.add_events(converted)
            return container

        return get_kv_connector_kv_cache_events

    @staticmethod
    def _matched_tokens_callable(
        adapter: ConnectorAdapter, facts: VllmFacts
    ) -> Callable[[Any, int], int | None]:
        lookup = adapter.get_num_new_matched_tokens
        if facts.accepts_none_matched or Capability.ASYNC_LOOKUP not in adapter.capabilities:
            return lookup

        # This vLLM cannot take "ask again later" (None): report no hit for now instead.
        def sync_lookup(request: Any, num_computed_tokens: int) -> int:
            count = lookup(request, num_computed_tokens)
            return 0 if count is None else count

        return sync_lookup

    @staticmethod
    def _engine_binder(engine: Any) -> Callable[[Any], None]:
        """The engine's own ``bind_connector_metadata`` when its class has one; otherwise reset
        the per-step layerwise state the engine keeps (as vLLM's connector does), or nothing."""
        if callable(getattr(type(engine), "bind_connector_metadata", None)):
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

    def _warn_absent(self, adapter: ConnectorAdapter, native: bool, facts: VllmFacts) -> None:
        caps = adapter.capabilities
        version = adapter.lmcache_version or "unknown"
        source = "vLLM's vendored LMCache adapter" if native else f"LMCache {version}"
        relevant = [
            c
            for c in _WARN_WHEN_ABSENT
            if c not in caps
            and (c is not Capability.ASYNC_LOOKUP or facts.accepts_none_matched)
            and (c is not Capability.KV_EVENTS or facts.connector_events)
            and (c is not Capability.LOAD_ERROR_REPORTING or facts.load_failure_path)
        ]
        texts = [_absent_text(c.spec, source, native) for c in relevant]
        if not facts.load_failure_path:
            texts.append(
                f"{Capability.LOAD_ERROR_REPORTING.spec.impact} (this vLLM's "
                "KVConnectorOutput has no invalid_block_ids, so it never asks the connector "
                "for failed loads; first vLLM with it: 0.11.2)"
            )
        if not texts:
            return
        logger.warning("%s over %s: %s", CONNECTOR_NAME, source, "; ".join(texts))

    # --- worker side ---------------------------------------------------------------------------

    def register_kv_caches(self, kv_caches: dict[str, Any]) -> None:
        self.compat_adapter.register_kv_caches(kv_caches)

    def bind_connector_metadata(self, connector_metadata: Any) -> None:
        super().bind_connector_metadata(connector_metadata)
        self._bind_engine(connector_metadata)

    def start_load_kv(self, forward_context: Any, **kwargs: Any) -> None:
        self._start_load_kv(forward_context, **kwargs)

    def wait_for_layer_load(self, layer_name: str) -> None:
        self._wait_for_layer_load(layer_name)

    def save_kv_layer(
        self, layer_name: str, kv_layer: Any, attn_metadata: Any, **kwargs: Any
    ) -> None:
        self._save_kv_layer(layer_name, kv_layer, attn_metadata, **kwargs)

    def wait_for_save(self) -> None:
        self._wait_for_save()

    def get_finished(self, finished_req_ids: set[str]) -> tuple[set[str] | None, set[str] | None]:
        return self._get_finished(finished_req_ids)

    def get_block_ids_with_load_errors(self) -> set[int]:
        return self._load_errors()

    def get_kv_connector_kv_cache_events(self) -> CompatKVEvents | None:
        """This worker's KV cache events since the last call, as the running vLLM's
        ``BlockStored``/``BlockRemoved``; ``None`` when there are none (always, on a release
        without ``get_kv_events``)."""
        return self._collect_events()

    def shutdown(self) -> None:
        """Stop LMCache's services (once; later calls do nothing)."""
        if self._shut_down:
            return
        self._shut_down = True
        self._pending_events = None
        self.compat_adapter.shutdown()

    # --- scheduler side ------------------------------------------------------------------------

    def get_num_new_matched_tokens(
        self, request: Any, num_computed_tokens: int
    ) -> tuple[int | None, bool]:
        return self._matched(request, num_computed_tokens), False

    def update_state_after_alloc(self, request: Any, blocks: Any, num_external_tokens: int) -> None:
        self._update_state_after_alloc(request, num_external_tokens)

    def build_connector_meta(self, scheduler_output: Any) -> Any:
        return self._build_connector_meta(scheduler_output)

    def request_finished(
        self, request: Any, block_ids: list[int]
    ) -> tuple[bool, dict[str, Any] | None]:
        return self._request_finished(request, block_ids)

    def update_connector_output(self, connector_output: Any) -> None:
        """Collect the workers' KV cache events of this step (already merged across workers by
        vLLM's ``KVOutputAggregator``)."""
        if not self._events_path:  # this vLLM's KVConnectorOutput has no kv_cache_events
            return
        events = connector_output.kv_cache_events
        if events is None or not isinstance(events, CompatKVEvents):
            return
        pending = self._pending_events
        if pending is None:
            self._pending_events = events
        else:
            pending.add_events(events.get_all_events())
            pending.increment_workers(events.get_number_of_workers())

    def take_events(self) -> Iterable[Any]:
        """The events every worker reported since the last call (each once)."""
        pending = self._pending_events
        if pending is None:
            return ()
        self._pending_events = None
        return pending.aggregate().get_all_events()
