"""Uniform adapters over LMCache's multi-process (MP) adapters, 0.3.13 on.

``MPSchedulerAdapter`` wraps an ``LMCacheMPSchedulerAdapter`` and ``MPWorkerAdapter`` an
``LMCacheMPWorkerAdapter``: either one you built, or one built for you from the caller's facts
(:class:`MPConfig`) with :meth:`MPSchedulerAdapter.create` / :meth:`MPWorkerAdapter.create`,
mapped onto whichever constructor the installed release has. Calls take the newest upstream
names and keywords; :mod:`lmcache_compat.mp.scheduler_calls` maps them onto the release, once, at
construction. Nothing here imports LMCache unless :meth:`create` is asked to find the classes
(where :mod:`lmcache_compat.upstream.locations` says, or wherever the release moved them).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from types import ModuleType
from typing import Any, ClassVar, NoReturn, TypeVar

from lmcache_compat.core.adapter import BoundAdapter, _property_getter
from lmcache_compat.core.arguments import Downgrades
from lmcache_compat.core.catalog import MP_SCHEDULER, MP_WORKER, Capability, fallback_table
from lmcache_compat.core.probes import facts_for_class
from lmcache_compat.core.tokens import Pack, key_encoding, token_field
from lmcache_compat.errors import NotAnEngineError
from lmcache_compat.mp.config import SERVERS, MPConfig, mp_init_call
from lmcache_compat.mp.scheduler_calls import (
    mp_check_lookup_result,
    mp_free_lookup_locks,
    mp_lookup,
)
from lmcache_compat.mp.worker_calls import load_store_op_factory, mp_register_kv_caches, mp_submit
from lmcache_compat.upstream import locations as loc

__all__ = ["MPConfig", "MPSchedulerAdapter", "MPWorkerAdapter", "mp_init_kwargs"]

_M = TypeVar("_M", bound="_MPAdapter")
_S = TypeVar("_S", bound="MPSchedulerAdapter")
_W = TypeVar("_W", bound="MPWorkerAdapter")


def _module_of(cls: type) -> ModuleType | None:
    return sys.modules.get(cls.__dict__.get("__module__", ""))


def _resolve_module(module: ModuleType | str | None, place: loc.Place) -> ModuleType:
    import importlib

    if isinstance(module, ModuleType):
        return module
    if module is not None:
        return importlib.import_module(module)
    from lmcache_compat.upstream.resolve import where

    dotted, _ = where(place)
    return importlib.import_module(dotted)


def _release_packer(cls: type, needed: bool) -> Pack | None:
    """The release's own ``pack_token_ids``: the one its adapter module imports, if it does, else
    the codec module :mod:`lmcache_compat.upstream.locations` names (0.5.7rc2's adapter module
    imports
    only ``unpack_token_ids``; its metadata module packs with
    ``lmcache.v1.multiprocess.token_codec.pack_token_ids``). Looked up only when the release
    takes packed token ids."""
    if not needed:
        return None
    module = _module_of(cls)
    pack = vars(module).get(loc.PACK_TOKEN_IDS.name) if module is not None else None
    if callable(pack):
        return pack  # type: ignore[no-any-return]
    from lmcache_compat.errors import UpstreamNotFoundError
    from lmcache_compat.upstream.resolve import find

    try:
        found = find(loc.PACK_TOKEN_IDS)
    except UpstreamNotFoundError:
        return None  # mp_calls raises a clear error when the packer is needed
    return found if callable(found) else None


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
    role = facts_for_class(adapter_cls).role
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
    __slots__ = ("allow", "is_healthy", "servers")
    _PLACE: ClassVar[loc.Place]

    is_healthy: Callable[[], bool]
    allow: Iterable[str] | bool
    #: ``{server URL: its LMCache release, or None when unknown}`` for the servers the adapter
    #: talks to, as :meth:`create` learned them (``MPConfig.http_urls``); ``{}`` when the
    #: release's adapter was wrapped directly. Error messages read it.
    servers: dict[str, str | None]

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

        ``module``: where the classes live (default: found in the installed LMCache, see
        :mod:`lmcache_compat.upstream.locations`; imported now). ``allow``: argument names whose
        downgrade is accepted (see :mod:`lmcache_compat.core.arguments`), or ``True`` for all.

        With ``config.http_urls``, each server this adapter talks to is asked for its release
        over HTTP first (:mod:`lmcache_compat.mp.server`, a short timeout, nothing connected
        yet): :class:`~lmcache_compat.errors.MPVersionMismatchError` if it is not the installed
        LMCache, :class:`~lmcache_compat.errors.MPServerError` if a front end cannot be reached.
        A front end that does not report its release leaves it unknown.
        """
        from lmcache_compat.versions import version_or_none

        mod = _resolve_module(module, cls._PLACE)
        adapter_cls = vars(mod).get(cls._PLACE.name)
        if not isinstance(adapter_cls, type):
            raise NotAnEngineError(f"{mod.__name__} has no {cls._PLACE.name} class")
        version = version_or_none("lmcache")
        kwargs = mp_init_kwargs(
            adapter_cls,
            config,
            context,
            parallel_strategy_cls=vars(mod).get(loc.PARALLEL_STRATEGY.name),
            allow=allow,
            version=version,
        )
        urls = kwargs[SERVERS] if SERVERS in kwargs else [kwargs["server_url"]]
        pairs = [(url, config.http_url_for(url)) for url in urls]
        if config.http_urls is not None:
            from lmcache_compat.mp.server import check_server_releases

            servers = check_server_releases(pairs, client=version)
        else:
            servers = dict.fromkeys(urls)
        adapter = cls(adapter_cls(**kwargs), require=require, strict=strict, allow=allow)  # type: ignore[call-arg]
        adapter.servers.update(servers)
        return adapter

    def _bind_allow(self, allow: Iterable[str] | bool) -> Downgrades:
        if not isinstance(allow, bool):
            allow = frozenset((allow,) if isinstance(allow, str) else allow)
        self._set("allow", allow)
        self._set("servers", {})
        return Downgrades(allow, self.capabilities.cls_name, self.lmcache_version)


class MPSchedulerAdapter(_MPAdapter):
    """Uniform adapter over ``LMCacheMPSchedulerAdapter`` (0.3.13 on).

    ``lookup(request_id, token_ids, block_hashes=None, *, cache_salt, request_configs,
    reserve_last_token, start)`` returns what the release returns: ``None`` before 0.5.7rc2,
    from 0.5.7rc2 a ``bool`` (whether a LOOKUP went out). ``free_lookup_locks(token_ids, start,
    end, request_id, *, cache_salt, request_configs, extra_ranges)``. Token ids are a sequence
    of ints, packed with the release's own codec where it takes bytes.
    ``cleanup_lookup_result`` and ``num_blocks_per_chunk`` are the release's own.

    ``check_lookup_result(request_id)`` returns the release's hit count (``None``: not finished)
    and never reports a failed exchange as zero hits: where the release has a health property
    (``is_healthy``), a 0 while that property says unhealthy (the server did not answer within
    ``mq_timeout``: down, overloaded, or of another release that cannot decode the request)
    raises :class:`~lmcache_compat.errors.MPServerError`, naming the client's LMCache release,
    the server's where known (``MPConfig.http_urls``) and a possible version mismatch. Before
    the health property existed the release cannot tell a lost reply from a miss; its own method
    is bound (a lost reply stays ``None``, or blocks where that release waits without a timeout).
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
    _PLACE = loc.MP_SCHEDULER
    _PASS_THROUGH = ("check_lookup_result", "cleanup_lookup_result", "num_blocks_per_chunk")

    lookup: Callable[..., bool | None]
    check_lookup_result: Callable[[str], int | None]
    cleanup_lookup_result: Callable[[str], None]
    num_blocks_per_chunk: Callable[[], int]
    end_session: Callable[[str], None]
    free_lookup_locks: Callable[..., None]
    report_block_allocations: Callable[[Any], None]
    shutdown: Callable[[], None]
    reset_cache: Callable[[], bool]

    def __new__(
        cls: type[_S],
        target: object,
        *,
        require: Iterable[Capability | str] = (),
        strict: bool = False,
        allow: Iterable[str] | bool = (),
    ) -> _S:
        self, facts, target_cls = cls._build(target, require, strict)
        downgrades = self._bind_allow(allow)
        name = self.capabilities.cls_name
        if Capability.MP_HEALTH_CHECK in self.capabilities:
            from lmcache_compat.mp.server import lookup_failure

            client, servers, where = self.lmcache_version, self.servers, name.rsplit(".", 1)[-1]

            def failure(request_id: str) -> Exception:  # create() fills `servers` in place
                return lookup_failure(request_id, client, servers, where)

            health = _property_getter(target_cls, Capability.MP_HEALTH_CHECK.spec.method)
            self._set(
                "check_lookup_result",
                mp_check_lookup_result(self.target.check_lookup_result, health, target, failure),
            )
        lookup_facts = facts.surface["maybe_submit_lookup_request"]
        pack = _release_packer(target_cls, key_encoding(lookup_facts, 1) == "packed")
        self._set(
            "lookup",
            mp_lookup(
                self.target.maybe_submit_lookup_request,
                lookup_facts,
                downgrades.at(f"{name}.maybe_submit_lookup_request"),
                pack,
            ),
        )
        if Capability.MP_FREE_LOOKUP_LOCKS in self.capabilities:
            free_facts = facts.surface["free_lookup_locks"]
            self._set(
                "free_lookup_locks",
                mp_free_lookup_locks(
                    self.target.free_lookup_locks,
                    free_facts,
                    downgrades.at(f"{name}.free_lookup_locks"),
                    pack or _release_packer(target_cls, key_encoding(free_facts, 0) == "packed"),
                ),
            )
        return self

    def __init__(self, target: object, **options: Any) -> None:
        """Bound in ``__new__``."""


class MPWorkerAdapter(_MPAdapter):
    """Uniform adapter over ``LMCacheMPWorkerAdapter`` (0.3.13 on).

    ``register_kv_caches(kv_caches, *, engine_group_infos, layout_hints)``;
    ``submit_store_request`` / ``submit_retrieve_request(request_id, op, event, *, cache_salt,
    request_configs)`` and the ``batched_*`` forms with per-request lists (each read once);
    ``make_load_store_op(block_ids, token_ids, *, block_hashes, start, end,
    skip_first_n_tokens)`` builds the release's ``LoadStoreOp`` (``token_bytes`` packed by the
    release's codec from 0.5.7rc2); ``get_finished``, ``num_blocks_per_chunk`` and ``shutdown``
    are the release's own. ``load_store_op=``: the ``LoadStoreOp`` class, when it is not in the
    adapter's module.
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
    _PLACE = loc.MP_WORKER
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

    def __new__(
        cls: type[_W],
        target: object,
        *,
        require: Iterable[Capability | str] = (),
        strict: bool = False,
        allow: Iterable[str] | bool = (),
        load_store_op: type | None = None,
    ) -> _W:
        self, facts, target_cls = cls._build(target, require, strict)
        downgrades = self._bind_allow(allow)
        name = self.capabilities.cls_name
        engine: Any = self.target
        self._set(
            "register_kv_caches",
            mp_register_kv_caches(
                engine.register_kv_caches,
                facts.surface["register_kv_caches"],
                downgrades.at(f"{name}.register_kv_caches"),
            ),
        )
        for method, batched in (
            ("submit_store_request", False),
            ("submit_retrieve_request", False),
            ("batched_submit_store_requests", True),
            ("batched_submit_retrieve_requests", True),
        ):
            submit = mp_submit(
                getattr(engine, method),
                facts.surface[method],
                downgrades.at(f"{name}.{method}"),
                batched=batched,
            )
            self._set(method, submit)
        if load_store_op is None:
            module = _module_of(target_cls)
            found = vars(module).get(loc.LOAD_STORE_OP.name) if module is not None else None
            load_store_op = found if isinstance(found, type) else None
        if load_store_op is not None:
            from lmcache_compat.core.signatures import init_facts

            field = token_field(init_facts(load_store_op))
            pack = _release_packer(target_cls, field is not None and field[1] == "packed")
            factory = load_store_op_factory(
                load_store_op, downgrades.at(load_store_op.__qualname__), pack
            )
            self._set("make_load_store_op", factory)
        else:

            def no_op_class(*args: object, **kwargs: object) -> NoReturn:
                raise NotAnEngineError(
                    f"no LoadStoreOp class found beside {name}; pass load_store_op= "
                    "when wrapping the adapter"
                )

            self._set("make_load_store_op", no_op_class)
        return self

    def __init__(self, target: object, **options: Any) -> None:
        """Bound in ``__new__``."""


MPSchedulerAdapter.__doc__ = (MPSchedulerAdapter.__doc__ or "") + fallback_table(MP_SCHEDULER)
MPWorkerAdapter.__doc__ = (MPWorkerAdapter.__doc__ or "") + fallback_table(MP_WORKER)
