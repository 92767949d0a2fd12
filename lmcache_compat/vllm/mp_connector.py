"""``LMCacheCompatMPConnector``: the thin ``KVConnectorBase_V1`` subclass for LMCache's
multi-process (MP) mode, a drop-in for vLLM's ``LMCacheMPConnector`` on every vLLM that has one
(0.11.2 on) over every MP release (0.3.13 on).

The reference is the class vLLM itself resolves under that name (:func:`reference_connector`):
its in-tree connector, or LMCache's own ``lmcache.integration.vllm.lmcache_mp_connector`` where
vLLM hands over (0.22.1 on, when that module imports). Its ``kv_connector_extra_config`` keys are
read from its module's source (:func:`lmcache_compat.vllm.mp_plan.reference_keys`) and taken as
they are: switching is changing ``kv_connector`` to ``LMCacheCompatMPConnector``.

What it does differently: the adapters are lmcache-compat's
:class:`~lmcache_compat.mp.MPSchedulerAdapter` / :class:`~lmcache_compat.mp.MPWorkerAdapter`,
built from :class:`~lmcache_compat.mp.MPConfig` onto whichever constructor the release has (no
``server_url`` split into characters, no ``use_mla`` read from a release that dropped it); the
per-step calls are bound once (:mod:`lmcache_compat.vllm.mp_plan`), with the hooks this vLLM's
base class defines (:func:`~lmcache_compat.vllm.facts.vllm_facts`); KV events are converted to
this vLLM's classes by the same machinery as ``LMCacheCompatConnector``; failed loads are the
worker adapter's ``get_block_ids_with_load_errors()``; ``shutdown()`` reaches the adapter.

Importing this module imports vLLM; ``import lmcache_compat.vllm`` never does.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vllm.distributed.kv_transfer.kv_connector.v1.base import (
    KVConnectorBase_V1,
    KVConnectorMetadata,
    KVConnectorRole,
)

from lmcache_compat.core.catalog import Capability
from lmcache_compat.mp.adapters import MPSchedulerAdapter, MPWorkerAdapter
from lmcache_compat.mp.config import MPConfig
from lmcache_compat.upstream import locations as loc
from lmcache_compat.vllm.connector import LMCacheCompatConnector
from lmcache_compat.vllm.decisions import no_events
from lmcache_compat.vllm.events import CompatKVEvents, events_factory
from lmcache_compat.vllm.facts import VllmFacts, vllm_facts
from lmcache_compat.vllm.mp_plan import (
    SchedulerCore,
    Transfer,
    WorkerCore,
    reference_keys,
    settings_from_extra,
)
from lmcache_compat.vllm.plugin import MP_CONNECTOR_NAME

__all__ = ["CompatMPMetadata", "LMCacheCompatMPConnector", "Reference", "reference_connector"]

logger = logging.getLogger("lmcache_compat.vllm")

#: Argument downgrades the reference accepts too: vLLM's in-tree connector never passes
#: ``extra_config`` (the release reads no keys there before 0.4.6), and the timeouts are
#: timing only on releases without them.
_ALLOW = frozenset({"extra_config", "mq_timeout", "heartbeat_interval"})


@dataclass(frozen=True)
class Reference:
    """The connector vLLM runs as ``LMCacheMPConnector`` here, and the keys it reads."""

    #: ``module.QualName`` of the class vLLM resolved (its own file when its module fails to
    #: import: then the reference is broken and its keys are read from the file).
    name: str
    keys: dict[str, Any]
    #: the import error of vLLM's module, when it does not import
    error: str | None = None


def reference_connector() -> Reference:
    """What vLLM's ``lmcache_mp_connector`` module resolves ``LMCacheMPConnector`` to (it
    decides at import: LMCache's own module where it imports, else its in-tree class), and the
    extra-config keys that class's module reads."""
    module = loc.VLLM_LMCACHE_MP_CONNECTOR.modules[0]
    try:
        cls = getattr(importlib.import_module(module), loc.VLLM_LMCACHE_MP_CONNECTOR.name)
        path = inspect.getsourcefile(cls)
        name = f"{cls.__module__}.{cls.__qualname__}"
        error = None
    except Exception as exc:  # the reference is broken here: say why, read its file
        spec = importlib.util.find_spec(module)
        path = spec.origin if spec is not None else None
        name = f"{module}.{loc.VLLM_LMCACHE_MP_CONNECTOR.name}"
        error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}".strip()
    if path is None:
        raise ImportError(
            f"{MP_CONNECTOR_NAME}: this vLLM has no {module}, so it has no MP connector to "
            "replace: upgrade vLLM to a release that ships it"
        )
    return Reference(name, reference_keys(Path(path).read_text(encoding="utf-8")), error)


class CompatMPMetadata(KVConnectorMetadata):  # type: ignore[misc]
    """The step's loads and stores (:class:`~lmcache_compat.vllm.mp_plan.Transfer`)."""

    def __init__(self, transfers: list[Transfer]) -> None:
        self.transfers = transfers


def _resumed_reader(facts_cls: Any) -> Callable[[Any], Any]:
    """The ids of resumed (preempted) requests in ``CachedRequestData``: ``resumed_req_ids``
    (a set, newer vLLM) or ``resumed_from_preemption`` (a list of flags); decided once."""
    fields = set(getattr(facts_cls, "__dataclass_fields__", ()))
    if "resumed_req_ids" in fields:
        return lambda cached: cached.resumed_req_ids
    if "resumed_from_preemption" in fields:
        return lambda cached: [
            rid
            for rid, flag in zip(cached.req_ids, cached.resumed_from_preemption, strict=False)
            if flag
        ]
    return lambda cached: ()


def _event_maker(worker: MPWorkerAdapter) -> Callable[[], Any]:
    """What the release's submits take as their event: the release's own recorded event
    (0.5.x ``create_recorded_event``), else a recorded interprocess CUDA event, else (CPU)
    ``None``. Decided once."""
    own = vars(type(worker.target)).get("create_recorded_event")
    if callable(own):
        maker: Callable[[], Any] = worker.target.create_recorded_event
        return maker
    import torch  # lazy: only the worker role needs it

    if not torch.cuda.is_available():
        return lambda: None

    def recorded() -> Any:
        event = torch.cuda.Event(interprocess=True)
        event.record(torch.cuda.current_stream())
        return event

    return recorded


class LMCacheCompatMPConnector(KVConnectorBase_V1):  # type: ignore[misc]
    """vLLM v1 KV connector for LMCache's MP mode over lmcache-compat's MP adapters.

    ``scheduler_adapter`` / ``worker_adapter`` are the adapters (by role), ``reference`` what
    vLLM would have run (:class:`Reference`), ``settings`` what was read from the keys."""

    _kv_cache_events: CompatKVEvents | None

    @classmethod
    def supports_sleep_mode(cls, kv_transfer_config: Any) -> bool:
        """No MP release can drop and restore its KV-cache registration: vLLM refuses sleep
        mode up front (0.33) instead of failing later."""
        return not vllm_facts().sleep_hooks

    def __init__(self, vllm_config: Any, role: Any, kv_cache_config: Any = None) -> None:
        facts: VllmFacts = vllm_facts()
        if facts.base_takes_kv_cache_config:
            super().__init__(vllm_config=vllm_config, role=role, kv_cache_config=kv_cache_config)
        else:
            super().__init__(vllm_config=vllm_config, role=role)
        zmq: Any = importlib.import_module("zmq")  # lazy: a dependency of every MP release

        transfer = vllm_config.kv_transfer_config
        extra = dict(transfer.kv_connector_extra_config or {})
        self.vllm_facts = facts
        self.reference = reference_connector()
        self.settings = settings_from_extra(extra, self.reference.keys)
        parallel = vllm_config.parallel_config
        config = MPConfig(
            server_urls=self.settings.server_urls,
            model_name=vllm_config.model_config.model,
            block_size=vllm_config.cache_config.block_size,
            world_size=parallel.world_size,
            rank=parallel.rank,
            tp_size=parallel.tensor_parallel_size,
            pp_size=parallel.pipeline_parallel_size,
            use_mla=bool(vllm_config.model_config.use_mla),
            mq_timeout=self.settings.mq_timeout,
            heartbeat_interval=self.settings.heartbeat_interval,
            extra_config=extra or None,
            enable_kv_events=bool(
                vllm_config.kv_events_config is not None
                and vllm_config.kv_events_config.enable_kv_cache_events
            ),
        )
        context = zmq.Context.instance()
        self._kv_cache_events = None
        self._shut_down = False
        calls: dict[str, Callable[..., Any]]
        if role == KVConnectorRole.SCHEDULER:
            scheduler = MPSchedulerAdapter.create(context, config, allow=_ALLOW)
            self.mp_adapter: MPSchedulerAdapter | MPWorkerAdapter = scheduler
            calls = self._scheduler_calls(scheduler, vllm_config, transfer, facts)
        else:
            worker = MPWorkerAdapter.create(context, config, allow=_ALLOW)
            self.mp_adapter = worker
            calls = self._worker_calls(worker, facts)
        cls, shadows = type(self), self.__dict__
        for name, call in calls.items():  # a method a subclass overrides keeps its version
            if name in facts.base_methods and getattr(cls, name, None) is getattr(
                LMCacheCompatMPConnector, name, None
            ):
                shadows[name] = call
        self._calls = calls

    # --- what each role binds -------------------------------------------------------------------

    def _scheduler_calls(
        self, scheduler: MPSchedulerAdapter, vllm_config: Any, transfer: Any, facts: VllmFacts
    ) -> dict[str, Callable[..., Any]]:
        from vllm.v1.core.sched.output import CachedRequestData

        core = SchedulerCore(
            scheduler,
            vllm_config.cache_config.block_size,
            can_store=bool(transfer.is_kv_producer),
            accepts_none=facts.accepts_none_matched,
            resumed=_resumed_reader(CachedRequestData),
        )
        self.scheduler_core = core

        def build_connector_meta(scheduler_output: Any) -> CompatMPMetadata:
            return CompatMPMetadata(core.build_connector_meta(scheduler_output))

        return {
            "get_num_new_matched_tokens": core.get_num_new_matched_tokens,
            "update_state_after_alloc": core.update_state_after_alloc,
            "build_connector_meta": build_connector_meta,
            "request_finished": core.request_finished,
        }

    def _worker_calls(
        self, worker: MPWorkerAdapter, facts: VllmFacts
    ) -> dict[str, Callable[..., Any]]:
        core = WorkerCore(worker, _event_maker(worker))
        self.worker_core = core

        def start_load_kv(forward_context: Any, **kwargs: Any) -> None:
            core.start_load(self._connector_metadata.transfers)

        def wait_for_save() -> None:
            core.save(self._connector_metadata.transfers)

        events: Callable[[], Any] = no_events
        factory = events_factory(facts)
        if (
            factory is not None
            and facts.connector_events
            and Capability.MP_KV_EVENTS in worker.capabilities
        ):
            events = factory(worker.get_kv_events)
        return {
            "register_kv_caches": worker.register_kv_caches,
            "start_load_kv": start_load_kv,
            "wait_for_save": wait_for_save,
            "get_finished": core.get_finished,
            "get_block_ids_with_load_errors": worker.get_block_ids_with_load_errors,
            "get_kv_connector_kv_cache_events": events,
        }

    def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        call = self._calls.get(name)
        if call is None:
            raise RuntimeError(
                f"{MP_CONNECTOR_NAME}: {name}() is not a {self._role.name.lower()}-role call"
            )
        return call(*args, **kwargs)

    # --- the base class's methods, for a subclass reaching them through super() -------------

    def register_kv_caches(self, kv_caches: dict[str, Any]) -> None:
        self._call("register_kv_caches", kv_caches)

    def start_load_kv(self, forward_context: Any, **kwargs: Any) -> None:
        self._call("start_load_kv", forward_context, **kwargs)

    def wait_for_layer_load(self, layer_name: str) -> None:
        return None

    def save_kv_layer(
        self, layer_name: str, kv_layer: Any, attn_metadata: Any, **kwargs: Any
    ) -> None:
        return None

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
        return self._call("get_kv_connector_kv_cache_events")  # type: ignore[no-any-return]

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

    def shutdown(self) -> None:
        """Stop the adapter (once; later calls do nothing)."""
        if self._shut_down:
            return
        self._shut_down = True
        self._kv_cache_events = None
        self.mp_adapter.shutdown()

    # the scheduler side collects the workers' events exactly as the in-process connector does
    update_connector_output = LMCacheCompatConnector.update_connector_output
    take_events = LMCacheCompatConnector.take_events


# The public path (``kv_connector_module_path: lmcache_compat.vllm``).
LMCacheCompatMPConnector.__module__ = "lmcache_compat.vllm"
