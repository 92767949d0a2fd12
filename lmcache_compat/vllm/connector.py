"""``LMCacheCompatConnector``: the thin ``KVConnectorBase_V1`` subclass.

Everything it binds is decided once by :func:`lmcache_compat.vllm.decisions.decide` from the
adapter's facts and the running vLLM's (:func:`lmcache_compat.vllm.facts.vllm_facts`); this
module only turns that plan into a vLLM connector. What differs from vLLM's in-tree
``LMCacheConnectorV1``:

* LMCache's ``LMCacheConnectorV1Impl`` is found where the installed release defines it (0.5.7rc2
  moved it under ``lmcache.inprocess``; vLLM's connector, which imports it by path, fails there),
  and only its module is imported;
* every LMCache capability is decided once, at construction, by a
  :class:`~lmcache_compat.ConnectorAdapter`; the per-step methods vLLM calls are the adapter's
  callables themselves, put on the instance; a release without ``get_kv_events`` yields no KV
  events instead of raising ``AttributeError`` each step;
* ``shutdown()`` reaches the LMCache engine (vLLM's in-tree connector never forwards it);
* releases before 0.3.12 (no ``register_kv_caches``) are handed the KV caches vLLM registers;
* sleep mode (vLLM 0.33): ``supports_sleep_mode`` answers from the installed release's files,
  and ``unregister_kv_caches`` / ``restore_kv_caches`` reach an engine that has them;
* one warning at start-up names what the installed LMCache release lacks and what that costs;
* the scheduler side logs, once, what the installed release would ignore or read differently in
  its configuration (:mod:`~lmcache_compat.vllm.startup_config`).

Drop-in for vLLM's own unit tests of its connector
(``tests/v1/kv_connector/unit/test_lmcache_connector.py``, run against this class by the grid
tiers): the engine and the scheduler side's pending events keep vLLM's field names
(``_lmcache_engine``, ``_kv_cache_events``), and :meth:`attach` over an object that is not an
LMCache impl binds what that object has (:class:`~lmcache_compat.vllm.decisions.PartialEngine`).

Importing this module imports vLLM (the connector subclasses ``KVConnectorBase_V1``);
``import lmcache_compat`` and ``import lmcache_compat.vllm`` never import it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1

from lmcache_compat.core.adapter import ConnectorAdapter
from lmcache_compat.vllm.decisions import (
    ConnectorPlan,
    PartialEngine,
    decide,
    engine_binding,
    engine_has_sleep_hooks,
    impl_class,
)
from lmcache_compat.vllm.events import CompatKVEvents, events_factory, shared_collector
from lmcache_compat.vllm.facts import VllmFacts, vllm_facts
from lmcache_compat.vllm.plugin import CONNECTOR_NAME
from lmcache_compat.vllm.shutdown import (
    bound_socket_files,
    remove_socket_files,
    stop_offload_threads,
)
from lmcache_compat.vllm.startup_config import log_startup_check, wants_config_check

__all__ = ["LMCacheCompatConnector"]

logger = logging.getLogger("lmcache_compat.vllm")


def _native(extra: Any) -> bool:
    return bool((extra or {}).get("use_native", False))


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
        extra = getattr(kv_transfer_config, "kv_connector_extra_config", None)
        return engine_has_sleep_hooks(_native(extra), vllm_facts().sleep_hooks)

    def __init__(self, vllm_config: Any, role: Any, kv_cache_config: Any = None) -> None:
        facts = vllm_facts()
        if facts.base_takes_kv_cache_config:
            super().__init__(vllm_config=vllm_config, role=role, kv_cache_config=kv_cache_config)
        else:
            super().__init__(vllm_config=vllm_config, role=role)
        native = _native(getattr(vllm_config.kv_transfer_config, "kv_connector_extra_config", None))
        if wants_config_check(role):  # once per process, before LMCache reads its configuration
            log_startup_check()
        self.attach(impl_class(native)(vllm_config, role, self), native=native, strict=True)

    def attach(self, engine: Any, *, native: bool = False, strict: bool = False) -> None:
        """Decide and bind everything over an already-built engine, once.

        ``__init__`` calls it with ``strict``: an object that is not an LMCache impl is an
        error. Without ``strict`` (an engine attached by hand: tests, benchmarks, vLLM's own
        white-box unit tests) such an object is bound through a
        :class:`~lmcache_compat.vllm.decisions.PartialEngine`. Attaching again (another
        engine) decides everything again."""
        facts = vllm_facts()
        binding = engine_binding(engine, require_engine=strict)
        plan = decide(binding, engine, facts, native=native, events=events_factory(facts))
        self._lmcache_engine = engine
        self.compat_adapter: ConnectorAdapter | PartialEngine = binding
        self.vllm_facts: VllmFacts = facts
        self._plan: ConnectorPlan = plan
        self._shut_down = False
        self._kv_cache_events = None
        # Per-step fast path: vLLM's call lands on the plan's callable itself (no forwarding
        # frame); a method a subclass overrides keeps the subclass's version.
        cls, shadows = type(self), self.__dict__
        for name in shadows.pop("_bound_calls", ()):  # attached again: no old engine's call stays
            shadows.pop(name, None)
        bound = []
        for name, call in plan.calls.items():
            if getattr(cls, name, None) is getattr(LMCacheCompatConnector, name, None):
                shadows[name] = call
                bound.append(name)
        self._bound_calls = tuple(bound)
        if plan.warnings:
            source = (
                f"LMCache {binding.lmcache_version or 'unknown'}"
                if not native
                else "vLLM's vendored LMCache adapter"
            )
            logger.warning("%s over %s: %s", CONNECTOR_NAME, source, "; ".join(plan.warnings))

    # --- what a call runs when a subclass reaches these through super() ----------------------

    def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        call = self._plan.calls.get(name)
        if call is None:  # a name this vLLM's base class does not define: the adapter's own
            call = getattr(self.compat_adapter, name)
        return call(*args, **kwargs)

    def register_kv_caches(self, kv_caches: dict[str, Any]) -> None:
        self._call("register_kv_caches", kv_caches)

    def bind_connector_metadata(self, connector_metadata: Any) -> None:
        super().bind_connector_metadata(connector_metadata)
        self._plan.bind_engine(connector_metadata)

    def start_load_kv(self, forward_context: Any, **kwargs: Any) -> None:
        self._call("start_load_kv", forward_context, **kwargs)

    def wait_for_layer_load(self, layer_name: str) -> None:
        self._call("wait_for_layer_load", layer_name)

    def save_kv_layer(
        self, layer_name: str, kv_layer: Any, attn_metadata: Any, **kwargs: Any
    ) -> None:
        self._call("save_kv_layer", layer_name, kv_layer, attn_metadata, **kwargs)

    def wait_for_save(self) -> None:
        self._call("wait_for_save")

    def get_finished(self, finished_req_ids: set[str]) -> tuple[set[str] | None, set[str] | None]:
        result: tuple[set[str] | None, set[str] | None] = self._call(
            "get_finished", finished_req_ids
        )
        return result

    def get_block_ids_with_load_errors(self) -> set[int]:
        ids: set[int] = self._call("get_block_ids_with_load_errors")
        return ids

    def get_kv_connector_kv_cache_events(self) -> CompatKVEvents | None:
        """This worker's KV cache events since the last call, as the running vLLM's
        ``BlockStored``/``BlockRemoved``; ``None`` when there are none (always, on a release
        without ``get_kv_events``). An object :meth:`attach` never saw -- vLLM's unit tests call
        this on a ``MagicMock(spec=...)`` carrying only ``_lmcache_engine`` -- is answered by
        deciding from that engine now."""
        plan: ConnectorPlan | None = self.__dict__.get("_plan")
        if plan is None:
            return shared_collector(self._lmcache_engine)()
        return plan.calls["get_kv_connector_kv_cache_events"]()  # type: ignore[no-any-return]

    def shutdown(self) -> None:
        """Stop LMCache's services (once; later calls do nothing)."""
        if self._shut_down:
            return
        self._shut_down = True
        self._kv_cache_events = None
        # LMCache's offload server closes its socket under its own reading thread (see
        # lmcache_compat.vllm.shutdown): its thread is stopped first, decided from its code.
        files = bound_socket_files(self._lmcache_engine)
        stopped = stop_offload_threads(self._lmcache_engine)
        logger.info(
            "%s: shutdown() reached (LMCache %s)%s",
            CONNECTOR_NAME,
            self.compat_adapter.lmcache_version or "unknown",
            f"; {', '.join(stopped)} before LMCache's close" if stopped else "",
        )
        self.compat_adapter.shutdown()
        remove_socket_files(files)

    # --- scheduler side ------------------------------------------------------------------------

    def get_num_new_matched_tokens(
        self, request: Any, num_computed_tokens: int
    ) -> tuple[int | None, bool]:
        result: tuple[int | None, bool] = self._call(
            "get_num_new_matched_tokens", request, num_computed_tokens
        )
        return result

    def update_state_after_alloc(self, request: Any, blocks: Any, num_external_tokens: int) -> None:
        self._call("update_state_after_alloc", request, blocks, num_external_tokens)

    def build_connector_meta(self, scheduler_output: Any) -> Any:
        return self._call("build_connector_meta", scheduler_output)

    def request_finished(
        self, request: Any, block_ids: list[int]
    ) -> tuple[bool, dict[str, Any] | None]:
        result: tuple[bool, dict[str, Any] | None] = self._call(
            "request_finished", request, block_ids
        )
        return result

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


# The public path (``kv_connector_module_path: lmcache_compat.vllm``, the package that loads this
# module on first use): what vLLM's factory, logs and pickles name.
LMCacheCompatConnector.__module__ = "lmcache_compat.vllm"
