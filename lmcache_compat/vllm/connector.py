"""``LMCacheCompatConnector``: a drop-in vLLM v1 KV connector over any LMCache release.

Configure it like vLLM's own ``LMCacheConnectorV1``::

    --kv-transfer-config '{"kv_connector": "LMCacheCompatConnector",
                           "kv_connector_module_path": "lmcache_compat.vllm",
                           "kv_role": "kv_both"}'

or install lmcache-compat with its ``vllm.general_plugins`` entry point (:func:`register`) and
leave out ``kv_connector_module_path``.

What differs from vLLM's in-tree ``LMCacheConnectorV1``:

* LMCache's ``LMCacheConnectorV1Impl`` is found where the installed release defines it (0.5.7rc2
  moved it under ``lmcache.inprocess``; vLLM's connector, which imports it by path, fails there),
  and only its module is imported;
* every LMCache capability is decided once, at construction, by a
  :class:`~lmcache_compat.ConnectorAdapter` (no ``getattr``/``hasattr`` per step; the per-step
  methods are bound straight to the adapter's callables); a release without ``get_kv_events``
  yields no KV events instead of raising ``AttributeError`` each step;
* everything about the running vLLM is read once from signatures and struct fields
  (:mod:`lmcache_compat.vllm.facts`), not from version numbers;
* ``shutdown()`` reaches the LMCache engine (vLLM's in-tree connector never forwards it);
* releases before 0.3.12 (no ``register_kv_caches``) are handed the KV caches vLLM registers,
  as later releases take them (their own discovery through the forward context fails on recent
  vLLM);
* sleep mode (vLLM 0.33): ``supports_sleep_mode`` answers from the installed release's files
  (no LMCache release can release and restore its KV-cache registrations yet: refused up
  front), and ``unregister_kv_caches`` / ``restore_kv_caches`` reach an engine that has them;
* one warning at start-up names what the installed LMCache release lacks and what that costs.

Drop-in for vLLM's own unit tests of its connector
(``tests/v1/kv_connector/unit/test_lmcache_connector.py``, run against this class by
``tests/vllm_unit``): the engine and the scheduler side's pending events keep vLLM's field
names (``_lmcache_engine``, ``_kv_cache_events``); ``get_kv_connector_kv_cache_events``,
``update_connector_output`` and ``take_events`` work on any object carrying those two fields;
events are converted attribute by attribute whatever their class; and :meth:`attach` over an
object that is not an LMCache impl (a bare ``MagicMock()``, a stub with two methods) binds what
that object has, a missing core method raising :class:`~lmcache_compat.NotAnEngineError` when
called. :class:`~lmcache_compat.ConnectorAdapter` itself stays strict, and so does construction
by vLLM (``__init__``).

Importing this module imports vLLM (the connector subclasses ``KVConnectorBase_V1``);
``import lmcache_compat`` never imports it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1

from lmcache_compat.core.adapter import ConnectorAdapter, first_release
from lmcache_compat.core.catalog import CONNECTOR_IMPL, Capability, CapabilitySpec
from lmcache_compat.core.probes import live_surface
from lmcache_compat.upstream.known_issues import issue
from lmcache_compat.vllm.decisions import (
    PartialEngine,
    engine_binding,
    engine_has_sleep_hooks,
    impl_class,
    kv_events_of,
)
from lmcache_compat.vllm.events import (
    CompatKVEvents,
    EventConverter,
    events_collector,
    shared_converter,
)
from lmcache_compat.vllm.facts import VllmFacts, vllm_facts
from lmcache_compat.vllm.plugin import CONNECTOR_NAME, register

__all__ = ["CONNECTOR_NAME", "CompatKVEvents", "LMCacheCompatConnector", "VllmFacts", "register"]

logger = logging.getLogger(__name__)

#: Absent capabilities worth a start-up warning, in catalog order. ``inference_info`` (unused
#: here) and ``register_kv_caches`` (handed over by this connector) are not.
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

#: Where an engine without ``register_kv_caches`` (before 0.3.12) keeps the KV caches it
#: otherwise discovers from the forward context on the first ``start_load_kv``.
_KV_CACHES_ATTRIBUTE = "kv_caches"


def _ignore_output(connector_output: Any) -> None:
    return None


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


def _native(vllm_config: Any) -> bool:
    extra = getattr(vllm_config.kv_transfer_config, "kv_connector_extra_config", None) or {}
    return bool(extra.get("use_native", False))


class LMCacheCompatConnector(KVConnectorBase_V1):  # type: ignore[misc]
    """vLLM v1 KV connector over LMCache's ``LMCacheConnectorV1Impl`` through a
    :class:`~lmcache_compat.ConnectorAdapter`: same behaviour as vLLM's ``LMCacheConnectorV1``
    where LMCache has the capability, the catalog's fallback where it does not.

    ``kv_connector_extra_config["use_native"] = True`` wraps vLLM's vendored copy of the LMCache
    adapter instead of LMCache's own. ``_lmcache_engine`` is the wrapped impl and
    ``_kv_cache_events`` the scheduler side's events not yet taken (the names vLLM's connector
    uses), ``compat_adapter`` the adapter over the impl.
    """

    #: The wrapped LMCache impl (vLLM's name for it).
    _lmcache_engine: Any
    #: Scheduler side: the workers' events collected since the last ``take_events`` (vLLM's
    #: name; its white-box tests set it by hand).
    _kv_cache_events: CompatKVEvents | None

    @classmethod
    def requires_piecewise_for_cudagraph(cls, extra_config: dict[str, Any]) -> bool:
        """Layerwise loads/saves synchronise per layer, which CUDA graphs cannot capture."""
        return bool(extra_config.get("use_layerwise", False))

    @classmethod
    def supports_sleep_mode(cls, kv_transfer_config: Any) -> bool:
        """Sleep mode (vLLM 0.33) drops and restores the KV-cache registrations: only where the
        installed engine class has every hook vLLM defines for it. Decided from the installed
        release's files, before any engine exists; False for every LMCache release so far, so
        vLLM refuses sleep mode with this connector up front instead of failing later."""
        extra = getattr(kv_transfer_config, "kv_connector_extra_config", None) or {}
        native = bool(extra.get("use_native", False))
        return engine_has_sleep_hooks(native, vllm_facts().sleep_hooks)

    def __init__(self, vllm_config: Any, role: Any, kv_cache_config: Any = None) -> None:
        facts = vllm_facts()
        if facts.base_takes_kv_cache_config:
            super().__init__(vllm_config=vllm_config, role=role, kv_cache_config=kv_cache_config)
        else:
            super().__init__(vllm_config=vllm_config, role=role)
        native = _native(vllm_config)
        self.attach(impl_class(native)(vllm_config, role, self), native=native, strict=True)

    def attach(self, engine: Any, *, native: bool = False, strict: bool = False) -> None:
        """Decide and bind everything over an already-built engine, once.

        ``__init__`` calls it with ``strict``: an object that is not an LMCache impl is an
        error. Without ``strict`` (an engine attached by hand: tests, benchmarks, vLLM's own
        white-box unit tests) such an object is bound through
        :class:`~lmcache_compat.vllm.decisions.PartialEngine`: what it has is bound, a core method
        it lacks raises ``NotAnEngineError`` when called, and one warning says so. Attaching
        again (another engine) decides everything again."""
        facts = vllm_facts()
        adapter = engine_binding(engine, require_engine=strict)
        self._lmcache_engine = engine
        self.compat_adapter: ConnectorAdapter | PartialEngine = adapter
        self.vllm_facts: VllmFacts = facts
        self._shut_down = False
        self._kv_cache_events = None

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
        self._bind_engine = self._engine_binder(
            engine, from_instance=isinstance(adapter, PartialEngine)
        )
        self._register = self._kv_cache_registrar(adapter, engine)
        self._kv_events: Callable[[], Any] = kv_events_of(adapter, facts)
        self._convert_events = EventConverter(facts) if facts.connector_events else None
        self._collect_events = events_collector(self._kv_events, self._convert_events)
        self._sleep_hooks = self._sleep_hook_binding(engine, facts)
        self._shadow_forwarders()

        if isinstance(adapter, PartialEngine):
            self._warn_partial(adapter)
        else:
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
            "register_kv_caches": self._register,
            "get_kv_connector_kv_cache_events": self._collect_events,
            **self._sleep_hooks,
        }
        if not self.vllm_facts.connector_events:  # KVConnectorOutput has no kv_cache_events
            fast["update_connector_output"] = _ignore_output
        cls = type(self)
        shadows = self.__dict__
        for name, bound in fast.items():
            if getattr(cls, name, None) is getattr(LMCacheCompatConnector, name, None):
                shadows[name] = bound

    @staticmethod
    def _matched_tokens_callable(
        adapter: ConnectorAdapter | PartialEngine, facts: VllmFacts
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
    def _engine_binder(engine: Any, *, from_instance: bool = False) -> Callable[[Any], None]:
        """The engine's own ``bind_connector_metadata`` when its class (for a
        :class:`PartialEngine`, the object itself) has one; otherwise reset the per-step
        layerwise state the engine keeps (as vLLM's connector does), or nothing."""
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

    @staticmethod
    def _kv_cache_registrar(
        adapter: ConnectorAdapter | PartialEngine, engine: Any
    ) -> Callable[[Any], None]:
        """``register_kv_caches``: the engine's own from 0.3.12. Before it, the release finds
        its KV caches through the forward context on the first ``start_load_kv``, which fails on
        recent vLLM ("'ForwardContext' object has no attribute 'virtual_engine'"): the caches
        vLLM registers are put where the release reads them (its ``kv_caches`` dict), as
        0.3.12's ``register_kv_caches`` does, so that discovery is never needed."""
        if Capability.REGISTER_KV_CACHES in adapter.capabilities:
            return adapter.register_kv_caches
        caches = vars(engine).get(_KV_CACHES_ATTRIBUTE) if hasattr(engine, "__dict__") else None
        if not isinstance(caches, dict):
            return adapter.register_kv_caches  # nowhere to put them: the catalog fallback

        def hand_over_kv_caches(kv_caches: Any) -> None:
            if not caches:  # registered once, like the release's own discovery
                caches.update(kv_caches)

        return hand_over_kv_caches

    @staticmethod
    def _sleep_hook_binding(engine: Any, facts: VllmFacts) -> dict[str, Callable[[], Any]]:
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

    @staticmethod
    def _warn_partial(partial: PartialEngine) -> None:
        if partial.missing_core:
            lacks = ", ".join(f"{name}()" for name in partial.missing_core)
            core = f"it lacks {lacks}, which raise NotAnEngineError when called"
        else:
            core = "it has every core method"
        logger.warning(
            "%s attached to %s, which is not an LMCache %s: bound the methods the object has "
            "(%s); optional methods it lacks use lmcache-compat's fallbacks",
            CONNECTOR_NAME,
            partial.capabilities.cls_name,
            CONNECTOR_IMPL,
            core,
        )

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
            # the known issue's fix names the first vLLM with the path ("... >= X")
            first = issue("vllm-no-load-failure-path").fix_texts[0].rsplit(" ", 1)[-1]
            texts.append(
                f"{Capability.LOAD_ERROR_REPORTING.spec.impact} (this vLLM's "
                "KVConnectorOutput has no invalid_block_ids, so it never asks the connector "
                f"for failed loads; first vLLM with it: {first})"
            )
        if not texts:
            return
        logger.warning("%s over %s: %s", CONNECTOR_NAME, source, "; ".join(texts))

    # --- worker side ---------------------------------------------------------------------------

    def register_kv_caches(self, kv_caches: dict[str, Any]) -> None:
        self._register(kv_caches)

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
        without ``get_kv_events``).

        An attached connector answers from the collector :meth:`attach` bound into its
        instance (this body runs only through ``super()`` from a subclass that overrides it).
        An object :meth:`attach` never saw -- vLLM's unit tests call this on a
        ``MagicMock(spec=...)`` carrying only ``_lmcache_engine`` -- is answered by deciding
        from that engine now."""
        try:
            collect = self._collect_events
        except AttributeError:
            binding = engine_binding(self._lmcache_engine, require_engine=False)
            collect = events_collector(kv_events_of(binding, vllm_facts()), shared_converter())
        return collect()

    def shutdown(self) -> None:
        """Stop LMCache's services (once; later calls do nothing)."""
        if self._shut_down:
            return
        self._shut_down = True
        self._kv_cache_events = None
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
        vLLM's ``KVOutputAggregator``). On a vLLM without connector events (< 0.13.0)
        :meth:`attach` replaces this with a no-op on the instance."""
        try:
            events = connector_output.kv_cache_events
        except AttributeError:  # vLLM < 0.13.0, reached only on a connector attach never saw
            return
        # ``is None`` first: the idle step's answer, without isinstance's ABC machinery
        if events is None or not isinstance(events, CompatKVEvents):
            return
        pending = self._kv_cache_events
        if pending is None:
            self._kv_cache_events = events
        else:
            pending.add_events(events.get_all_events())
            pending.increment_workers(events.get_number_of_workers())

    def take_events(self) -> Iterable[Any]:
        """The events every worker reported since the last call (each once)."""
        pending = self._kv_cache_events
        if pending is None:
            return ()
        self._kv_cache_events = None
        return pending.aggregate().get_all_events()
