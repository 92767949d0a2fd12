"""Uniform adapters over LMCache's multi-process (MP) adapters, 0.3.13 on.

``MPSchedulerAdapter`` wraps an ``LMCacheMPSchedulerAdapter`` and ``MPWorkerAdapter`` an
``LMCacheMPWorkerAdapter``: either one you built, or one built for you from the caller's facts
(:class:`~lmcache_compat.mp.config.MPConfig`) with :meth:`MPSchedulerAdapter.create` /
:meth:`MPWorkerAdapter.create`, mapped onto whichever constructor the installed release has.
Calls take the newest upstream names and keywords; :mod:`lmcache_compat.mp.scheduler_calls` and
:mod:`lmcache_compat.mp.worker_calls` map them onto the release, once, at construction. Nothing
here imports LMCache unless :meth:`~MPSchedulerAdapter.create` is asked to find the classes
(where :mod:`lmcache_compat.upstream.locations` says, or wherever the release moved them).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterable
from types import ModuleType
from typing import Any, ClassVar, NoReturn, TypeVar

from lmcache_compat.core.adapter import BoundAdapter
from lmcache_compat.core.arguments import Downgrades, normalise_allow
from lmcache_compat.core.binding import Binding, property_getter
from lmcache_compat.core.catalog import Capability, fallback_table
from lmcache_compat.core.probes import facts_for_class
from lmcache_compat.core.roles import MP_SCHEDULER, MP_WORKER
from lmcache_compat.core.signatures import init_facts
from lmcache_compat.core.tokens import Pack, TokenParameter, token_parameter
from lmcache_compat.errors import NotAnEngineError, UpstreamNotFoundError
from lmcache_compat.mp.config import SERVERS, MPConfig, mp_init_call
from lmcache_compat.mp.retrieves import (
    RetrieveLedger,
    RetrieveRecords,
    read_records,
    tracked_batched,
    tracked_finished,
    tracked_submit,
)
from lmcache_compat.mp.scheduler_calls import (
    check_lookup_result_call,
    free_lookup_locks_call,
    lookup_call,
)
from lmcache_compat.mp.server import check_server_releases, lookup_failure
from lmcache_compat.mp.worker_calls import (
    load_store_op_factory,
    register_kv_caches_call,
    submit_call,
)
from lmcache_compat.upstream import locations as loc
from lmcache_compat.upstream.resolve import find, where
from lmcache_compat.versions import version_or_none

__all__ = ["MPSchedulerAdapter", "MPWorkerAdapter", "mp_init_kwargs"]

_M = TypeVar("_M", bound="_MPAdapter")

#: Where the release's codec is looked for (error messages say so when it is not found).
_MISSING_PACK = (
    f"no {loc.PACK_TOKEN_IDS.name} was found beside it (its module, or "
    f"{', '.join(loc.PACK_TOKEN_IDS.modules)})"
)


def _module_of(cls: type) -> ModuleType | None:
    return sys.modules.get(cls.__dict__.get("__module__", ""))


def _resolve_module(module: ModuleType | str | None, place: loc.Place) -> tuple[ModuleType, str]:
    """The module holding ``place``'s class and the name it has there: the caller's module,
    else the installed module that defines it (under a new name, if it was renamed)."""
    if isinstance(module, ModuleType):
        return module, place.name
    if module is not None:
        return importlib.import_module(module), place.name
    found = where(place)
    return importlib.import_module(found.module), found.name


def _takes_packed(found: TokenParameter | object) -> bool:
    return isinstance(found, TokenParameter) and found.encoding == "packed"


def _release_packer(cls: type, needed: bool) -> Pack | None:
    """The release's own ``pack_token_ids``: the one its adapter module imports, if it does, else
    where :mod:`lmcache_compat.upstream.locations` says the codec lives (0.5.7rc2's adapter
    module imports only ``unpack_token_ids``). Looked up only when the release takes packed
    token ids."""
    if not needed:
        return None
    module = _module_of(cls)
    pack = vars(module).get(loc.PACK_TOKEN_IDS.name) if module is not None else None
    if callable(pack):
        return pack  # type: ignore[no-any-return]

    try:
        found = find(loc.PACK_TOKEN_IDS)
    except UpstreamNotFoundError:
        return None  # the calls raise a clear error when the packer is needed
    return found if callable(found) else None


def mp_init_kwargs(
    adapter_cls: type,
    config: MPConfig,
    context: Any,
    *,
    parallel_strategy_cls: type | None = None,
    allow: Iterable[str] | str | bool = (),
    version: str | None = None,
) -> dict[str, Any]:
    """The keyword arguments :meth:`~MPSchedulerAdapter.create` passes to
    ``adapter_cls(...)`` (scheduler or worker, told apart by the class's role), without
    constructing anything."""
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
        downgrades=Downgrades(normalise_allow(allow), where, version),
    )


class _MPAdapter(BoundAdapter):
    _PLACE: ClassVar[loc.Place]

    is_healthy: Callable[[], bool]
    #: ``{server URL: its LMCache release, or None when unknown}`` for the servers the adapter
    #: talks to, as :meth:`create` learned them (``MPConfig.http_urls``); ``{}`` when the
    #: release's adapter was wrapped directly. Error messages read it.
    servers: dict[str, str | None]

    #: The argument downgrades the caller accepted (``True``: all).

    @classmethod
    def create(
        cls: type[_M],
        context: Any,
        config: MPConfig,
        *,
        module: ModuleType | str | None = None,
        allow: Iterable[str] | str | bool = (),
        require: Iterable[Capability | str] = (),
        strict: bool = False,
    ) -> _M:
        """Build the release's adapter from the caller's facts and wrap it.

        ``module``: where the classes live (default: found in the installed LMCache, see
        :mod:`lmcache_compat.upstream.locations`; imported now). ``allow``: argument names whose
        downgrade is accepted (see :mod:`lmcache_compat.core.arguments`), or ``True`` for all.

        With ``config.http_urls``, each server this adapter talks to is asked for its release
        over HTTP first (:mod:`lmcache_compat.mp.server`, a total deadline per exchange, nothing
        connected yet): :class:`~lmcache_compat.errors.MPVersionMismatchError` if it is not the
        installed LMCache, :class:`~lmcache_compat.errors.MPServerError` if a front end cannot
        be reached. A front end that does not report its release leaves it unknown.
        """

        mod, name = _resolve_module(module, cls._PLACE)
        adapter_cls = vars(mod).get(name)
        if not isinstance(adapter_cls, type):
            raise NotAnEngineError(f"{mod.__name__} has no {name} class")
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
            servers = check_server_releases(pairs, client=version)
        else:
            servers = dict.fromkeys(urls)
        adapter = cls(adapter_cls(**kwargs), require=require, strict=strict, allow=allow)  # type: ignore[call-arg]
        adapter.servers.update(servers)
        return adapter


class MPSchedulerAdapter(_MPAdapter):
    """Uniform adapter over ``LMCacheMPSchedulerAdapter`` (0.3.13 on).

    ``lookup(request_id, token_ids, block_hashes=None, *, cache_salt, request_configs,
    reserve_last_token, start)`` returns what the release returns: ``None`` before 0.5.7rc2,
    from 0.5.7rc2 a ``bool`` (whether a LOOKUP went out). ``free_lookup_locks(token_ids, start,
    end, request_id, *, cache_salt, request_configs, extra_ranges)``. Token ids are a sequence
    of ints, packed with the release's own codec where it takes bytes (any bytes-like object is
    taken as already packed, and passed as the same bytes to every call).
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

    role = MP_SCHEDULER
    _PLACE = loc.MP_SCHEDULER

    lookup: Callable[..., bool | None]
    check_lookup_result: Callable[[str], int | None]
    cleanup_lookup_result: Callable[[str], None]
    num_blocks_per_chunk: Callable[[], int]
    end_session: Callable[[str], None]
    free_lookup_locks: Callable[..., None]
    report_block_allocations: Callable[[Any], None]
    shutdown: Callable[[], None]
    reset_cache: Callable[[], bool]

    def __init__(
        self,
        target: object,
        *,
        require: Iterable[Capability | str] | Capability | str = (),
        strict: bool = False,
        allow: Iterable[str] | str | bool = (),
    ) -> None:
        core = ("check_lookup_result", "cleanup_lookup_result", "num_blocks_per_chunk")
        binding = self._bind(target, require, strict, allow, core=core)
        self.servers = {}
        caps, engine = binding.capabilities, binding.engine
        if Capability.MP_HEALTH_CHECK in caps:
            client, servers = self.lmcache_version, self.servers
            where = caps.cls_name.rsplit(".", 1)[-1]

            def failure(request_id: str) -> Exception:  # create() fills `servers` in place
                return lookup_failure(request_id, client, servers, where)

            health = property_getter(binding.target_cls, Capability.MP_HEALTH_CHECK.spec.method)
            self.check_lookup_result = check_lookup_result_call(
                engine.check_lookup_result, health, engine, failure
            )
        lookup = binding.surface("maybe_submit_lookup_request")
        pack = _release_packer(binding.target_cls, _takes_packed(token_parameter(lookup)))
        self.lookup = lookup_call(
            engine.maybe_submit_lookup_request,
            lookup,
            binding.downgrades("maybe_submit_lookup_request"),
            pack,
            _MISSING_PACK,
        )
        if Capability.MP_FREE_LOOKUP_LOCKS in caps:
            free = binding.surface("free_lookup_locks")
            self.free_lookup_locks = free_lookup_locks_call(
                engine.free_lookup_locks,
                free,
                binding.downgrades("free_lookup_locks"),
                pack or _release_packer(binding.target_cls, _takes_packed(token_parameter(free))),
                _MISSING_PACK,
            )


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

    Failed retrieves fail closed on every release (:mod:`lmcache_compat.mp.retrieves`): a
    retrieve whose future resolves False, returns a partial result, raises, or is drained while
    the server is unhealthy puts exactly its op's block ids into
    ``get_block_ids_with_load_errors()``, on the ``get_finished`` pass that reports the request
    finished, once (0.3.13 ... 0.4.1, which lack the method, get ours). How the release keeps its
    retrieve results is read from its source at construction (``retrieve_records=``: say it
    instead); where it cannot be read the constructor refuses.
    """

    role = MP_WORKER
    _PLACE = loc.MP_WORKER

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
    #: The failed-retrieve tracker (:mod:`lmcache_compat.mp.retrieves`); ``None`` over an
    #: object that keeps no futures (the public fakes).
    retrieve_ledger: RetrieveLedger | None

    def __init__(
        self,
        target: object,
        *,
        require: Iterable[Capability | str] | Capability | str = (),
        strict: bool = False,
        allow: Iterable[str] | str | bool = (),
        load_store_op: type | None = None,
        retrieve_records: RetrieveRecords | None = None,
    ) -> None:
        binding = self._bind(
            target,
            require,
            strict,
            allow,
            core=("get_finished", "num_blocks_per_chunk", "shutdown"),
            raise_absent=(Capability.MP_LAZY_OFFLOAD,),
        )
        self.servers = {}
        self._bind_submits(binding)
        self._track_retrieves(binding, retrieve_records)
        self._bind_load_store_op(binding, load_store_op)

    def _bind_submits(self, binding: Binding) -> None:
        """``register_kv_caches`` and the four ``submit_*`` calls, each over its release's
        signature."""
        engine = binding.engine
        self.register_kv_caches = register_kv_caches_call(
            engine.register_kv_caches,
            binding.surface("register_kv_caches"),
            binding.downgrades("register_kv_caches"),
        )
        for method, batched in (
            ("submit_store_request", False),
            ("submit_retrieve_request", False),
            ("batched_submit_store_requests", True),
            ("batched_submit_retrieve_requests", True),
        ):
            setattr(
                self,
                method,
                submit_call(
                    getattr(engine, method),
                    binding.surface(method),
                    binding.downgrades(method),
                    batched=batched,
                ),
            )

    def _track_retrieves(self, binding: Binding, retrieve_records: RetrieveRecords | None) -> None:
        """Failed retrieves fail closed: the submits and the finished calls go through the
        ledger wherever the release keeps its retrieve results where they can be read."""
        engine = binding.engine
        records = retrieve_records or read_records(binding.target_cls, self.lmcache_version)
        self.retrieve_ledger = None
        if records is None:
            return
        has_errors = Capability.MP_LOAD_ERROR_REPORTING in self.capabilities
        ledger = RetrieveLedger(engine, records, release_reports_drops=has_errors)
        self.retrieve_ledger = ledger
        self.submit_retrieve_request = tracked_submit(self.submit_retrieve_request, ledger)
        self.batched_submit_retrieve_requests = tracked_batched(
            self.batched_submit_retrieve_requests, ledger
        )
        self.get_finished = tracked_finished(self.get_finished, ledger)
        if Capability.MP_LAZY_OFFLOAD in self.capabilities:
            self.get_finished_with_lazy_offload = tracked_finished(
                self.get_finished_with_lazy_offload, ledger
            )
        self.get_block_ids_with_load_errors = ledger.load_errors(
            engine.get_block_ids_with_load_errors if has_errors else None
        )

    def _bind_load_store_op(self, binding: Binding, load_store_op: type | None) -> None:
        """``make_load_store_op`` over the release's ``LoadStoreOp`` (the one passed, else the
        one beside the adapter class); a call that raises when there is none."""
        op_cls = load_store_op
        if op_cls is None:
            module = _module_of(binding.target_cls)
            found = vars(module).get(loc.LOAD_STORE_OP.name) if module is not None else None
            op_cls = found if isinstance(found, type) else None
        if op_cls is None:
            name = self.capabilities.cls_name

            def no_op_class(*args: object, **kwargs: object) -> NoReturn:
                raise NotAnEngineError(
                    f"no LoadStoreOp class found beside {name}; pass load_store_op= "
                    "when wrapping the adapter"
                )

            self.make_load_store_op = no_op_class
            return
        field = token_parameter(init_facts(op_cls))
        pack = _release_packer(binding.target_cls, _takes_packed(field))
        self.make_load_store_op = load_store_op_factory(
            op_cls,
            Downgrades(binding.options.allow, op_cls.__qualname__, self.lmcache_version),
            pack,
            _MISSING_PACK,
        )


MPSchedulerAdapter.__doc__ = (MPSchedulerAdapter.__doc__ or "") + fallback_table(MP_SCHEDULER)
MPWorkerAdapter.__doc__ = (MPWorkerAdapter.__doc__ or "") + fallback_table(MP_WORKER)
