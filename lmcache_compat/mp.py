"""Uniform adapters over LMCache's multi-process (MP) adapters, 0.3.13 on.

``MPSchedulerAdapter`` wraps an ``LMCacheMPSchedulerAdapter`` and ``MPWorkerAdapter`` an
``LMCacheMPWorkerAdapter``: either one you built, or one built for you from the caller's facts
(:class:`MPConfig`) with :meth:`MPSchedulerAdapter.create` / :meth:`MPWorkerAdapter.create`,
mapped onto whichever constructor the installed release has. Calls take the newest upstream
names and keywords; :mod:`lmcache_compat.version_specific` maps them onto the release, once, at
construction. Nothing here imports LMCache unless :meth:`create` is asked to find the classes.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from types import ModuleType
from typing import Any, ClassVar, NoReturn, TypeVar

from lmcache_compat.adapter import BoundAdapter
from lmcache_compat.catalog import MP_SCHEDULER, MP_WORKER, Capability
from lmcache_compat.errors import NotAnEngineError
from lmcache_compat.probe import ClassFacts, probe_target
from lmcache_compat.version_specific import (
    Downgrades,
    MPConfig,
    load_store_op_factory,
    mp_free_lookup_locks,
    mp_init_call,
    mp_lookup,
    mp_register_kv_caches,
    mp_submit,
)

__all__ = ["MP_MODULE", "MPConfig", "MPSchedulerAdapter", "MPWorkerAdapter", "mp_init_kwargs"]

#: Where LMCache defines the MP adapters (vLLM's vendored copy has them in
#: ``vllm.distributed.kv_transfer.kv_connector.v1.lmcache_integration.multi_process_adapter``).
MP_MODULE = "lmcache.integration.vllm.vllm_multi_process_adapter"

_M = TypeVar("_M", bound="_MPAdapter")


def _module_of(target: object) -> ModuleType | None:
    return sys.modules.get(probe_target(target).__dict__.get("__module__", ""))


def _resolve_module(module: ModuleType | str | None) -> ModuleType:
    if isinstance(module, ModuleType):
        return module
    import importlib

    return importlib.import_module(module or MP_MODULE)


def mp_init_kwargs(
    adapter_cls: type,
    config: MPConfig,
    context: Any,
    *,
    parallel_strategy_cls: type | None = None,
    allow: Iterable[str] | bool = (),
    version: str | None = None,
) -> dict[str, Any]:
    """The keyword arguments :meth:`create` passes to ``adapter_cls(...)`` (scheduler or worker,
    told apart by the class's role), without constructing anything."""
    from lmcache_compat.probe import class_facts

    role = class_facts(adapter_cls).role
    if role not in (MP_SCHEDULER, MP_WORKER):
        raise NotAnEngineError(f"{adapter_cls.__qualname__} is not an LMCache MP adapter class")
    where = f"{adapter_cls.__qualname__}.__init__"
    return mp_init_call(
        adapter_cls,
        config,
        context,
        worker=role == MP_WORKER,
        parallel_strategy_cls=parallel_strategy_cls,
        downgrades=Downgrades(allow, where, version),
    )


class _MPAdapter(BoundAdapter):
    __slots__ = ("allow", "is_healthy")
    _CLASS_NAME: ClassVar[str]

    is_healthy: Callable[[], bool]

    @classmethod
    def create(
        cls: type[_M],
        context: Any,
        config: MPConfig,
        *,
        module: ModuleType | str | None = None,
        allow: Iterable[str] | bool = (),
        require: Iterable[Capability | str] = (),
        strict: bool = False,
    ) -> _M:
        """Build the release's adapter from the caller's facts and wrap it.

        ``module``: where the classes live (default: LMCache's
        ``lmcache.integration.vllm.vllm_multi_process_adapter``, imported now).
        ``allow``: argument names whose downgrade is accepted (see the argument table in
        :mod:`lmcache_compat.version_specific`), or ``True`` for all.
        """
        from lmcache_compat.versions import installed_distribution_version

        mod = _resolve_module(module)
        adapter_cls = vars(mod).get(cls._CLASS_NAME)
        if not isinstance(adapter_cls, type):
            raise NotAnEngineError(f"{mod.__name__} has no {cls._CLASS_NAME} class")
        kwargs = mp_init_kwargs(
            adapter_cls,
            config,
            context,
            parallel_strategy_cls=vars(mod).get("ParallelStrategy"),
            allow=allow,
            version=installed_distribution_version("lmcache"),
        )
        return cls(adapter_cls(**kwargs), require=require, strict=strict, allow=allow)

    def _downgrades(self, options: dict[str, Any]) -> Downgrades:
        allow = options.pop("allow", ())
        self._set("allow", allow)
        return Downgrades(allow, self.capabilities.cls_name, self.lmcache_version)


class MPSchedulerAdapter(_MPAdapter):
    """Uniform adapter over ``LMCacheMPSchedulerAdapter`` (0.3.13 on).

    =============================================  ===========================================
    method                                          on a release without it
    =============================================  ===========================================
    lookup(request_id, token_ids, block_hashes, *,  keywords mapped per the argument table
    cache_salt, request_configs,                    (``cache_salt``/``request_configs``: error
    reserve_last_token)                             unless allowed; reserve: emulated)
    check_lookup_result, cleanup_lookup_result,     the release's own (every release)
    num_blocks_per_chunk
    end_session(request_id)                         no-op (before 0.3.14)
    free_lookup_locks(token_ids, start, end,        no-op (before 0.4.1: no locks)
    request_id, *, cache_salt, request_configs)
    is_healthy()                                    True: unknown (before 0.4.2)
    report_block_allocations(records)               no-op (before 0.4.3)
    shutdown()                                      no-op (before 0.5.0)
    reset_cache()                                   False: nothing reset (before 0.5.6)
    =============================================  ===========================================
    """

    __slots__ = (
        "check_lookup_result",
        "cleanup_lookup_result",
        "end_session",
        "free_lookup_locks",
        "lookup",
        "num_blocks_per_chunk",
        "report_block_allocations",
        "reset_cache",
        "shutdown",
    )
    _ROLE = MP_SCHEDULER
    _CLASS_NAME = MP_SCHEDULER
    _PASS_THROUGH = ("check_lookup_result", "cleanup_lookup_result", "num_blocks_per_chunk")

    lookup: Callable[..., None]
    check_lookup_result: Callable[[str], int | None]
    cleanup_lookup_result: Callable[[str], None]
    num_blocks_per_chunk: Callable[[], int]
    end_session: Callable[[str], None]
    free_lookup_locks: Callable[..., None]
    report_block_allocations: Callable[[Any], None]
    shutdown: Callable[[], None]
    reset_cache: Callable[[], bool]

    def _bind_specific(self, facts: ClassFacts, options: dict[str, Any]) -> None:
        downgrades = self._downgrades(options)
        super()._bind_specific(facts, options)
        target, cls_name = self.target, downgrades.where
        lookup = mp_lookup(
            target.maybe_submit_lookup_request,
            downgrades.at(f"{cls_name}.maybe_submit_lookup_request"),
        )
        self._set("lookup", lookup)
        if Capability.MP_FREE_LOOKUP_LOCKS in self.capabilities:
            free = mp_free_lookup_locks(
                target.free_lookup_locks, downgrades.at(f"{cls_name}.free_lookup_locks")
            )
            self._set("free_lookup_locks", free)


class MPWorkerAdapter(_MPAdapter):
    """Uniform adapter over ``LMCacheMPWorkerAdapter`` (0.3.13 on).

    ==============================================  ==========================================
    method                                           on a release without it
    ==============================================  ==========================================
    register_kv_caches(kv_caches, *,                 one group / hints dropped; several groups:
    engine_group_infos, layout_hints)                error unless allowed (before 0.4.7)
    submit_store_request / submit_retrieve_request   ``cache_salt``/``request_configs``: error
    (request_id, op, event, *, cache_salt,           unless allowed
    request_configs); batched_* with lists
    make_load_store_op(block_ids, token_ids, *,      the release's ``LoadStoreOp`` field set
    block_hashes, start, end, skip_first_n_tokens)
    get_finished, num_blocks_per_chunk, shutdown     the release's own (every release)
    get_block_ids_with_load_errors()                 set() (before 0.4.2)
    is_healthy()                                     True: unknown (before 0.4.2)
    handle_preemptions(need_flush_before_forward)    no-op (before 0.5.2)
    get_finished_with_lazy_offload()                 MissingCapabilityError (before 0.5.4)
    get_kv_events()                                  [] (before 0.5.6)
    get_failed_request_ids()                         set() (before 0.5.6)
    ==============================================  ==========================================
    """

    __slots__ = (
        "batched_submit_retrieve_requests",
        "batched_submit_store_requests",
        "get_block_ids_with_load_errors",
        "get_failed_request_ids",
        "get_finished",
        "get_finished_with_lazy_offload",
        "get_kv_events",
        "handle_preemptions",
        "make_load_store_op",
        "num_blocks_per_chunk",
        "register_kv_caches",
        "shutdown",
        "submit_retrieve_request",
        "submit_store_request",
    )
    _ROLE = MP_WORKER
    _CLASS_NAME = MP_WORKER
    _PASS_THROUGH = ("get_finished", "num_blocks_per_chunk", "shutdown")
    _RAISE_WHEN_ABSENT = (Capability.MP_LAZY_OFFLOAD,)

    register_kv_caches: Callable[..., None]
    submit_store_request: Callable[..., None]
    submit_retrieve_request: Callable[..., None]
    batched_submit_store_requests: Callable[..., None]
    batched_submit_retrieve_requests: Callable[..., None]
    make_load_store_op: Callable[..., Any]
    get_finished: Callable[[set[str]], tuple[set[str] | None, set[str] | None]]
    num_blocks_per_chunk: Callable[[], int]
    shutdown: Callable[[], None]
    get_block_ids_with_load_errors: Callable[[], set[int]]
    handle_preemptions: Callable[[bool], None]
    get_finished_with_lazy_offload: Callable[[], tuple[set[str] | None, set[str] | None]]
    get_kv_events: Callable[[], list[Any]]
    get_failed_request_ids: Callable[[], set[str]]

    def _bind_specific(self, facts: ClassFacts, options: dict[str, Any]) -> None:
        load_store_op = options.pop("load_store_op", None)
        downgrades = self._downgrades(options)
        super()._bind_specific(facts, options)
        target, cls_name = self.target, downgrades.where
        register = mp_register_kv_caches(
            target.register_kv_caches, downgrades.at(f"{cls_name}.register_kv_caches")
        )
        self._set("register_kv_caches", register)
        for name, batched in (
            ("submit_store_request", False),
            ("submit_retrieve_request", False),
            ("batched_submit_store_requests", True),
            ("batched_submit_retrieve_requests", True),
        ):
            where = downgrades.at(f"{cls_name}.{name}")
            self._set(name, mp_submit(getattr(target, name), where, batched=batched))
        if load_store_op is None:
            module = _module_of(target)
            load_store_op = vars(module).get("LoadStoreOp") if module is not None else None
        if isinstance(load_store_op, type):
            factory = load_store_op_factory(
                load_store_op, downgrades.at(load_store_op.__qualname__)
            )
            self._set("make_load_store_op", factory)
        else:
            cls_name = self.capabilities.cls_name

            def no_op_class(*args: object, **kwargs: object) -> NoReturn:
                raise NotAnEngineError(
                    f"no LoadStoreOp class found beside {cls_name}; pass load_store_op= "
                    "when wrapping the adapter"
                )

            self._set("make_load_store_op", no_op_class)
