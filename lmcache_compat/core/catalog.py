"""The capability catalog: the one place that says what each capability is.

Every row of :data:`CATALOG` names a capability, the role (:mod:`lmcache_compat.core.roles`)
that owns it, the member that carries it, the positional parameters a caller passes, the first
LMCache release that has it, the fallback an adapter binds when it is absent, and what the user
loses then. Probes (live and static), adapters, the vLLM connector, ``doctor`` and the release
matrix all read this table; nothing else hard-codes a capability's facts.

The ``since`` column was derived from the sources of every LMCache release on PyPI and equals
the shipped release matrix (a test compares them).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from lmcache_compat.core import fallbacks as fb
from lmcache_compat.core.checks import Check, block_ids_check, events_check
from lmcache_compat.core.roles import (
    CONNECTOR,
    ENGINE,
    MP_SCHEDULER,
    MP_WORKER,
    SGLANG_LAYERWISE,
    SGLANG_LOAD_METADATA,
    SGLANG_MP,
    SGLANG_STORE_METADATA,
    SGLANG_UNIFIED,
    Role,
)
from lmcache_compat.core.tokens import looks_up_by_tokens, takes_packed_tokens
from lmcache_compat.errors import UnknownCapabilityError

if TYPE_CHECKING:
    from lmcache_compat.core.signatures import MethodFacts

__all__ = [
    "CATALOG",
    "Capability",
    "CapabilitySpec",
    "Kind",
    "fallback_table",
    "owned_by",
    "pass_through",
    "spec_for",
]

Kind = Literal["method", "property", "class"]


class Capability(str, enum.Enum):
    """A feature an LMCache release may or may not offer.

    The value is the stable, public name. ``Capability.X.since`` is the first LMCache release
    that has it and ``Capability.X.spec`` its full catalog row; each member's ``__doc__`` says the
    same in words.
    """

    GET_FINISHED = "get_finished"
    REQUEST_FINISHED = "request_finished"
    ASYNC_LOOKUP = "async_lookup"
    INFERENCE_INFO = "inference_info"
    LOAD_ERROR_REPORTING = "load_error_reporting"
    SHUTDOWN = "shutdown"
    KV_EVENTS = "kv_events"
    REGISTER_KV_CACHES = "register_kv_caches"
    # multi-process adapters (LMCacheMPSchedulerAdapter / LMCacheMPWorkerAdapter)
    MP_ADAPTERS = "mp_adapters"
    MP_LOOKUP_BY_TOKEN_IDS = "mp_lookup_by_token_ids"
    MP_END_SESSION = "mp_end_session"
    MP_FREE_LOOKUP_LOCKS = "mp_free_lookup_locks"
    MP_HEALTH_CHECK = "mp_health_check"
    MP_LOAD_ERROR_REPORTING = "mp_load_error_reporting"
    MP_REPORT_BLOCK_ALLOCATIONS = "mp_report_block_allocations"
    MP_CACHE_SALT = "mp_cache_salt"
    MP_PARALLEL_STRATEGY = "mp_parallel_strategy"
    MP_ENGINE_GROUP_INFOS = "mp_engine_group_infos"
    MP_MULTI_SERVER = "mp_multi_server"
    MP_SCHEDULER_SHUTDOWN = "mp_scheduler_shutdown"
    MP_HANDLE_PREEMPTIONS = "mp_handle_preemptions"
    MP_LAZY_OFFLOAD = "mp_lazy_offload"
    MP_REQUEST_CONFIGS = "mp_request_configs"
    MP_LAYOUT_HINTS = "mp_layout_hints"
    MP_RESERVE_LAST_TOKEN = "mp_reserve_last_token"
    MP_RESET_CACHE = "mp_reset_cache"
    MP_KV_EVENTS = "mp_kv_events"
    MP_FAILED_REQUEST_REPORTING = "mp_failed_request_reporting"
    MP_PACKED_TOKEN_IDS = "mp_packed_token_ids"
    MP_LOOKUP_START = "mp_lookup_start"
    MP_FREE_EXTRA_RANGES = "mp_free_extra_ranges"
    MP_CHUNK_ALIGNMENT = "mp_chunk_alignment"
    # LMCacheEngine (lmcache/v1/cache_engine.py), used directly by SGLang-style integrations
    ENGINE_LOOKUP_ID = "engine_lookup_id"
    ENGINE_REQUEST_CONFIGS = "engine_request_configs"
    ENGINE_HEALTH = "engine_health"
    ENGINE_ASYNC_PREFETCH = "engine_async_prefetch"
    ENGINE_SINGLE_UNPIN = "engine_single_unpin"
    ENGINE_KV_EVENTS = "engine_kv_events"
    ENGINE_FREEZE = "engine_freeze"
    ENGINE_IS_HEALTHY = "engine_is_healthy"
    # LMCache's SGLang integration (lmcache/integration/sglang)
    SGLANG_IN_PROCESS = "sglang_in_process"
    SGLANG_TP_GROUP = "sglang_tp_group"
    SGLANG_CONFIG_FILE = "sglang_config_file"
    SGLANG_KV_EVENTS = "sglang_kv_events"
    SGLANG_PREFIX_PAD = "sglang_prefix_pad"
    SGLANG_REQUEST_ID = "sglang_request_id"
    SGLANG_MP = "sglang_mp"
    SGLANG_MP_STORE_ASYNC = "sglang_mp_store_async"
    SGLANG_UNIFIED_MP = "sglang_unified_mp"

    def __str__(self) -> str:
        return self.value

    @property
    def spec(self) -> CapabilitySpec:
        """This capability's row of :data:`CATALOG`."""
        return _BY_CAPABILITY[self]

    @property
    def since(self) -> str:
        """The first LMCache release that has this capability."""
        return _BY_CAPABILITY[self].since

    @property
    def removed(self) -> str | None:
        """The first LMCache release that no longer has it (``None``: every later one has)."""
        return _BY_CAPABILITY[self].removed


@dataclass(frozen=True, slots=True)
class CapabilitySpec:
    """One row of the capability catalog."""

    capability: Capability
    #: The role (LMCache class) that owns the member.
    owner: Role
    #: Member whose presence carries the capability.
    method: str
    #: Positional parameters the adapter passes (documentation names; probes check arity).
    params: tuple[str, ...]
    #: First LMCache release that has the capability.
    since: str
    #: What an adapter calls when the capability is absent (a plain function taking the
    #: method's arguments); ``None``: the capability has no adapter method of its own.
    fallback: Callable[..., Any] | None
    #: The fallback's result, in words, as documented to users.
    fallback_result: str
    #: What a user loses on a release without it.
    impact: str
    #: When true the capability is "the method may return None", read from its return
    #: annotation (e.g. ``int`` -> ``Optional[int]`` in 0.3.6), not from its presence.
    returns_none: bool = False
    #: ``method`` (callable with ``params``), ``property`` (present, never evaluated by a
    #: probe) or ``class`` (the owner class exists).
    kind: Kind = "method"
    #: The capability is "``method`` takes this keyword parameter" (by name; ``**kw`` does not
    #: count, since an old release would swallow and ignore it).
    keyword: str | None = None
    #: Further roles that must carry it too (e.g. ``is_healthy`` on both MP adapters).
    also: tuple[Role, ...] = ()
    #: When set, the capability is "``method``'s facts pass this test" (e.g. the lookup is keyed
    #: by token ids, read from the key parameter's annotation), instead of arity or keyword;
    #: the test answers ``None`` when it cannot classify the facts (reported, never guessed).
    rule: Callable[[MethodFacts], bool | None] | None = None
    #: Whether a connector warns at start-up when the capability is absent (``False``: the
    #: loss is nothing a user would notice).
    warn_absent: bool = True
    #: The result check an adapter puts around the engine's own method
    #: (:mod:`lmcache_compat.core.checks`); ``None``: the method is bound as it is.
    check: Check | None = None
    #: The first release that no longer has it (a removal: 0.5.7rc2 removed LMCache's
    #: in-process SGLang modules); ``None``: every release from ``since`` on has it.
    removed: str | None = None

    @property
    def releases(self) -> str:
        """``>=since`` or ``>=since,<removed``: the releases that have it, as a specifier."""
        return f">={self.since}" + (f",<{self.removed}" if self.removed else "")

    @property
    def owners(self) -> tuple[Role, ...]:
        return (self.owner, *self.also)

    @property
    def passes_through(self) -> bool:
        """An optional method an adapter forwards as it is, or answers with the fallback."""
        return (
            self.fallback is not None
            and self.keyword is None
            and self.rule is None
            and not self.returns_none
        )

    @property
    def member(self) -> str:
        """``Owner.method(params)``: how messages name the member."""
        if self.kind == "class":
            return " and ".join(r.name for r in self.owners)
        if self.kind == "property":
            return f"{self.owner.name}.{self.method} (property)"
        text = f"{self.owner.name}.{self.method}({', '.join(self.params)})"
        return f"{text} keyword {self.keyword!r}" if self.keyword else text


#: Every capability row, one per capability: what it is, where it lives, since when, and the
#: fallback without it.
CATALOG: tuple[CapabilitySpec, ...] = (
    CapabilitySpec(
        capability=Capability.GET_FINISHED,
        owner=CONNECTOR,
        method="get_finished",
        params=("finished_req_ids",),
        since="0.3.1",
        fallback=fb.no_finished,
        fallback_result="(None, None)",
        impact="no asynchronous send/receive completion is reported (nothing is lost: LMCache "
        "transfers are synchronous in these releases)",
    ),
    CapabilitySpec(
        capability=Capability.REQUEST_FINISHED,
        owner=CONNECTOR,
        method="request_finished",
        params=("request", "block_ids"),
        since="0.3.1",
        fallback=fb.request_not_held,
        fallback_result="(False, None)",
        impact="blocks are freed as soon as a request finishes; no KV transfer parameters "
        "are returned",
    ),
    CapabilitySpec(
        capability=Capability.ASYNC_LOOKUP,
        owner=CONNECTOR,
        method="get_num_new_matched_tokens",
        params=("request", "num_computed_tokens"),
        since="0.3.6",
        fallback=None,
        fallback_result="get_num_new_matched_tokens always returns an int",
        impact="lookups are synchronous: scheduling waits for each LMCache lookup",
        returns_none=True,
    ),
    CapabilitySpec(
        capability=Capability.INFERENCE_INFO,
        owner=CONNECTOR,
        method="get_inference_info",
        params=(),
        since="0.3.7",
        fallback=fb.no_inference_info,
        fallback_result="{} (an empty dict)",
        impact="no inference/configuration summary is available for diagnostics",
        warn_absent=False,
    ),
    CapabilitySpec(
        capability=Capability.LOAD_ERROR_REPORTING,
        owner=CONNECTOR,
        method="get_block_ids_with_load_errors",
        params=(),
        since="0.3.9.post1",
        fallback=fb.no_load_errors,
        fallback_result="set() (an empty set: no failure can be reported)",
        impact="KV load failures cannot be detected: requests may compute on missing KV",
        check=block_ids_check,
    ),
    CapabilitySpec(
        capability=Capability.SHUTDOWN,
        owner=CONNECTOR,
        method="shutdown",
        params=(),
        since="0.3.10",
        fallback=fb.noop,
        fallback_result="None (a no-op)",
        impact="LMCache's background services are not stopped cleanly at exit",
    ),
    CapabilitySpec(
        capability=Capability.KV_EVENTS,
        owner=CONNECTOR,
        method="get_kv_events",
        params=(),
        since="0.3.10.post2",
        fallback=fb.no_kv_events,
        fallback_result="[] (an empty list: no events)",
        impact="no KV cache events: KV-aware routers cannot see what LMCache stores",
        check=events_check,
    ),
    CapabilitySpec(
        capability=Capability.REGISTER_KV_CACHES,
        owner=CONNECTOR,
        method="register_kv_caches",
        params=("kv_caches",),
        since="0.3.12",
        fallback=fb.noop_register,
        fallback_result="None (a no-op: the release takes KV caches from the forward context)",
        impact="none in practice: KV caches are picked up from the forward context on first load",
        warn_absent=False,
    ),
    # --- multi-process adapters (LMCacheMPSchedulerAdapter / LMCacheMPWorkerAdapter) -----
    CapabilitySpec(
        capability=Capability.MP_ADAPTERS,
        owner=MP_SCHEDULER,
        method="__init__",
        params=(),
        since="0.3.13",
        fallback=None,
        fallback_result="MP adapters cannot be built",
        impact="no multi-process (LMCache server) mode",
        kind="class",
        also=(MP_WORKER,),
    ),
    CapabilitySpec(
        capability=Capability.MP_LOOKUP_BY_TOKEN_IDS,
        owner=MP_SCHEDULER,
        method="maybe_submit_lookup_request",
        params=("request_id",),
        since="0.3.14",
        fallback=None,
        fallback_result="lookups are keyed by vLLM block hashes (the adapter passes block_hashes)",
        impact="lookups need vLLM's block hashes",
        rule=looks_up_by_tokens,
    ),
    CapabilitySpec(
        capability=Capability.MP_END_SESSION,
        owner=MP_SCHEDULER,
        method="end_session",
        params=("request_id",),
        since="0.3.14",
        fallback=fb.noop_any,
        fallback_result="None (a no-op)",
        impact="no end-of-request notification to the LMCache server",
    ),
    CapabilitySpec(
        capability=Capability.MP_FREE_LOOKUP_LOCKS,
        owner=MP_SCHEDULER,
        method="free_lookup_locks",
        params=("token_ids", "start", "end", "request_id"),
        since="0.4.1",
        fallback=fb.noop_any,
        fallback_result="None (a no-op: releases before 0.4.1 take no lookup locks)",
        impact="none: there are no lookup locks to free",
    ),
    CapabilitySpec(
        capability=Capability.MP_HEALTH_CHECK,
        owner=MP_SCHEDULER,
        method="is_healthy",
        params=(),
        since="0.4.2",
        fallback=fb.assume_healthy,
        fallback_result="True (health unknown: assumed healthy)",
        impact="an unreachable LMCache server is not detected early; requests fail on use instead",
        kind="property",
        also=(MP_WORKER,),
    ),
    CapabilitySpec(
        capability=Capability.MP_LOAD_ERROR_REPORTING,
        owner=MP_WORKER,
        method="get_block_ids_with_load_errors",
        params=(),
        since="0.4.2",
        fallback=fb.no_load_errors,
        fallback_result="set() (an empty set) for a bare worker; not used by MPWorkerAdapter: "
        "its own retrieve tracking is get_block_ids_with_load_errors() there "
        "(lmcache_compat.mp.retrieves)",
        impact="the release's own worker adapter reports no failed retrieve (vLLM would compute "
        "on missing KV); MPWorkerAdapter and LMCacheCompatMPConnector report them from their own "
        "tracking",
        check=block_ids_check,
    ),
    CapabilitySpec(
        capability=Capability.MP_REPORT_BLOCK_ALLOCATIONS,
        owner=MP_SCHEDULER,
        method="report_block_allocations",
        params=("records",),
        since="0.4.3",
        fallback=fb.noop_any,
        fallback_result="None (a no-op)",
        impact="the LMCache server is not told about vLLM block allocations",
    ),
    CapabilitySpec(
        capability=Capability.MP_CACHE_SALT,
        owner=MP_SCHEDULER,
        method="maybe_submit_lookup_request",
        params=("request_id",),
        since="0.4.4",
        fallback=None,
        fallback_result="a non-empty cache_salt raises UnsupportedArgumentError (it would mix "
        "tenants' caches)",
        impact="no per-tenant cache isolation",
        keyword="cache_salt",
    ),
    CapabilitySpec(
        capability=Capability.MP_PARALLEL_STRATEGY,
        owner=MP_SCHEDULER,
        method="__init__",
        params=(),
        since="0.4.4",
        fallback=None,
        fallback_result="world size / rank (/ tp_size) are passed as plain arguments",
        impact="no pipeline parallel or MLA layout beyond world size and rank",
        keyword="parallel_strategy",
    ),
    CapabilitySpec(
        capability=Capability.MP_ENGINE_GROUP_INFOS,
        owner=MP_WORKER,
        method="register_kv_caches",
        params=("kv_caches",),
        since="0.4.7",
        fallback=None,
        fallback_result="more than one KV cache group raises UnsupportedArgumentError",
        impact="hybrid models with several KV cache groups are not supported",
        keyword="engine_group_infos",
    ),
    CapabilitySpec(
        capability=Capability.MP_MULTI_SERVER,
        owner=MP_SCHEDULER,
        method="__init__",
        params=(),
        since="0.5.0",
        fallback=None,
        fallback_result="one server URL; several raise UnsupportedArgumentError",
        impact="one LMCache server only",
        keyword="server_urls",
    ),
    CapabilitySpec(
        capability=Capability.MP_SCHEDULER_SHUTDOWN,
        owner=MP_SCHEDULER,
        method="shutdown",
        params=(),
        since="0.5.0",
        fallback=fb.noop_any,
        fallback_result="None (a no-op)",
        impact="the scheduler side's sockets are closed only at process exit",
    ),
    CapabilitySpec(
        capability=Capability.MP_HANDLE_PREEMPTIONS,
        owner=MP_WORKER,
        method="handle_preemptions",
        params=("need_flush_before_forward",),
        since="0.5.2",
        fallback=fb.noop_any,
        fallback_result="None (a no-op)",
        impact="in-flight stores of preempted requests are not flushed first",
    ),
    CapabilitySpec(
        capability=Capability.MP_LAZY_OFFLOAD,
        owner=MP_WORKER,
        method="get_finished_with_lazy_offload",
        params=(),
        since="0.5.4",
        fallback=None,
        fallback_result="calling it raises MissingCapabilityError (no safe fallback)",
        impact="no lazy offload mode",
    ),
    CapabilitySpec(
        capability=Capability.MP_REQUEST_CONFIGS,
        owner=MP_SCHEDULER,
        method="maybe_submit_lookup_request",
        params=("request_id",),
        since="0.5.5",
        fallback=None,
        fallback_result="non-empty request_configs raise UnsupportedArgumentError",
        impact="no per-request LMCache configuration",
        keyword="request_configs",
    ),
    CapabilitySpec(
        capability=Capability.MP_LAYOUT_HINTS,
        owner=MP_WORKER,
        method="register_kv_caches",
        params=("kv_caches",),
        since="0.5.5",
        fallback=None,
        fallback_result="layout hints are dropped (the release infers the layout)",
        impact="none: the release infers the KV layout itself",
        keyword="layout_hints",
    ),
    CapabilitySpec(
        capability=Capability.MP_RESERVE_LAST_TOKEN,
        owner=MP_SCHEDULER,
        method="maybe_submit_lookup_request",
        params=("request_id",),
        since="0.5.6",
        fallback=None,
        fallback_result="emulated exactly: the lookup is given token_ids[:-1]",
        impact="none: the adapter emulates it",
        keyword="reserve_last_token",
    ),
    CapabilitySpec(
        capability=Capability.MP_RESET_CACHE,
        owner=MP_SCHEDULER,
        method="reset_cache",
        params=(),
        since="0.5.6",
        fallback=fb.not_reset,
        fallback_result="False (nothing was reset)",
        impact="the LMCache server's cache cannot be reset from vLLM",
    ),
    CapabilitySpec(
        capability=Capability.MP_KV_EVENTS,
        owner=MP_WORKER,
        method="get_kv_events",
        params=(),
        since="0.5.6",
        fallback=fb.no_kv_events,
        fallback_result="[] (an empty list: no events)",
        impact="no KV cache events: KV-aware routers cannot see what LMCache stores",
        check=events_check,
    ),
    CapabilitySpec(
        capability=Capability.MP_FAILED_REQUEST_REPORTING,
        owner=MP_WORKER,
        method="get_failed_request_ids",
        params=(),
        since="0.5.6",
        fallback=fb.no_failed_requests,
        fallback_result="set() (an empty set)",
        impact="whole-request store/retrieve failures are not reported",
    ),
    CapabilitySpec(
        capability=Capability.MP_PACKED_TOKEN_IDS,
        owner=MP_SCHEDULER,
        method="maybe_submit_lookup_request",
        params=("request_id",),
        since="0.5.7rc2",
        fallback=None,
        fallback_result="token ids are passed as a list of ints",
        impact="none: the adapter passes token ids in the form the release takes",
        rule=takes_packed_tokens,
    ),
    CapabilitySpec(
        capability=Capability.MP_LOOKUP_START,
        owner=MP_SCHEDULER,
        method="maybe_submit_lookup_request",
        params=("request_id",),
        since="0.5.7rc2",
        fallback=None,
        fallback_result="a start > 0 raises UnsupportedArgumentError (the chunks below it would "
        "stay locked)",
        impact="lookups lock and prefetch the prefix vLLM already holds",
        keyword="start",
    ),
    CapabilitySpec(
        capability=Capability.MP_FREE_EXTRA_RANGES,
        owner=MP_SCHEDULER,
        method="free_lookup_locks",
        params=(),
        since="0.5.7rc2",
        fallback=None,
        fallback_result="emulated exactly: one free_lookup_locks call per extra range",
        impact="none: the adapter frees each range with its own call",
        keyword="extra_ranges",
    ),
    CapabilitySpec(
        capability=Capability.MP_CHUNK_ALIGNMENT,
        owner=MP_SCHEDULER,
        method="__init__",
        params=(),
        since="0.5.7rc2",
        fallback=None,
        fallback_result="a required_chunk_alignment raises UnsupportedArgumentError (no "
        "negotiation)",
        impact="the server's chunk size is not negotiated against the model's alignment",
        keyword="required_chunk_alignment",
        also=(MP_WORKER,),
    ),
    # --- LMCacheEngine -----------------------------------------------------------------------
    CapabilitySpec(
        capability=Capability.ENGINE_LOOKUP_ID,
        owner=ENGINE,
        method="lookup",
        params=("tokens",),
        since="0.3.4",
        fallback=None,
        fallback_result="lookup_id is passed as request_id (0.3.3) or, unpinned, dropped "
        "(0.3.0-0.3.2)",
        impact="lookups cannot be tied to an id before 0.3.3",
        keyword="lookup_id",
    ),
    CapabilitySpec(
        capability=Capability.ENGINE_REQUEST_CONFIGS,
        owner=ENGINE,
        method="lookup",
        params=("tokens",),
        since="0.3.4",
        fallback=None,
        fallback_result="non-empty request_configs raise UnsupportedArgumentError",
        impact="no per-request LMCache configuration on engine lookups",
        keyword="request_configs",
    ),
    CapabilitySpec(
        capability=Capability.ENGINE_HEALTH,
        owner=ENGINE,
        method="health",
        params=(),
        since="0.3.4",
        fallback=None,
        fallback_result="is_healthy() returns True (unknown)",
        impact="engine health cannot be checked",
    ),
    CapabilitySpec(
        capability=Capability.ENGINE_ASYNC_PREFETCH,
        owner=ENGINE,
        method="async_lookup_and_prefetch",
        params=("lookup_id", "tokens"),
        since="0.3.6",
        fallback=None,
        fallback_result="prefetch() calls the synchronous prefetch(tokens) of 0.3.0-0.3.5",
        impact="prefetching blocks the caller",
    ),
    CapabilitySpec(
        capability=Capability.ENGINE_SINGLE_UNPIN,
        owner=ENGINE,
        method="lookup_unpin",
        params=(),
        since="0.3.9",
        fallback=None,
        fallback_result="unpin(id) calls lookup_unpin([id]) (0.3.3-0.3.7)",
        impact="none: the adapter wraps the id in a list",
        keyword="lookup_id",
    ),
    CapabilitySpec(
        capability=Capability.ENGINE_KV_EVENTS,
        owner=ENGINE,
        method="get_kv_events",
        params=(),
        since="0.3.10.post2",
        fallback=fb.no_kv_events,
        fallback_result="[] (an empty list: no events)",
        impact="no KV cache events",
        check=events_check,
    ),
    CapabilitySpec(
        capability=Capability.ENGINE_FREEZE,
        owner=ENGINE,
        method="freeze",
        params=("enabled",),
        since="0.3.11",
        fallback=None,
        fallback_result="freeze() raises MissingCapabilityError; is_frozen() returns False",
        impact="the cache cannot be frozen (read-only) before 0.3.11",
    ),
    CapabilitySpec(
        capability=Capability.ENGINE_IS_HEALTHY,
        owner=ENGINE,
        method="is_healthy",
        params=(),
        since="0.3.13",
        fallback=None,
        fallback_result="is_healthy() maps to health() == 0 (0.3.4-0.3.12) or True (unknown, "
        "earlier)",
        impact="none from 0.3.4: health() is used instead",
    ),
)

#: 0.5.7rc2 removed ``sglang_adapter``, ``multi_process_adapter`` and ``utils`` from
#: ``lmcache/integration/sglang`` (only the unified MP connector and its metadata remain).
_SGLANG_IN_PROCESS_REMOVED = "0.5.7rc2"

SGLANG_ROWS: tuple[CapabilitySpec, ...] = (
    CapabilitySpec(
        capability=Capability.SGLANG_IN_PROCESS,
        owner=SGLANG_LAYERWISE,
        method="__init__",
        params=(),
        since="0.3.6",
        fallback=None,
        fallback_result="the in-process SGLang connector cannot be built",
        impact="no in-process SGLang mode (sglang <= 0.5.12 has no other)",
        kind="class",
        also=(SGLANG_LOAD_METADATA, SGLANG_STORE_METADATA),
        removed=_SGLANG_IN_PROCESS_REMOVED,
    ),
    CapabilitySpec(
        capability=Capability.SGLANG_TP_GROUP,
        owner=SGLANG_LAYERWISE,
        method="__init__",
        params=(),
        since="0.3.9",
        fallback=None,
        fallback_result="tp_group is not passed (the release has no cross-rank agreement on "
        "the hit length)",
        impact="with tp_size > 1 each rank loads the prefix it found: ranks may disagree",
        keyword="tp_group",
        removed=_SGLANG_IN_PROCESS_REMOVED,
    ),
    CapabilitySpec(
        capability=Capability.SGLANG_CONFIG_FILE,
        owner=SGLANG_LAYERWISE,
        method="__init__",
        params=(),
        since="0.4.6",
        fallback=None,
        fallback_result="emulated: the file is handed over as LMCACHE_CONFIG_FILE while the "
        "connector is built (the release reads only the environment)",
        impact="none: the adapter emulates it",
        keyword="config_file",
        removed=_SGLANG_IN_PROCESS_REMOVED,
    ),
    CapabilitySpec(
        capability=Capability.SGLANG_KV_EVENTS,
        owner=SGLANG_LAYERWISE,
        method="get_kv_events",
        params=(),
        since="0.3.13",
        fallback=fb.no_kv_events,
        fallback_result="[] (an empty list: no events)",
        impact="no KV cache events from the in-process SGLang connector",
        check=events_check,
        removed=_SGLANG_IN_PROCESS_REMOVED,
    ),
    CapabilitySpec(
        capability=Capability.SGLANG_PREFIX_PAD,
        owner=SGLANG_LOAD_METADATA,
        method="__init__",
        params=(),
        since="0.4.6",
        fallback=None,
        fallback_result="dropped: the load offset already leaves the padding out, and only the "
        "MP connector (never older than this field) reads it",
        impact="none for the in-process connector",
        keyword="prefix_pad",
        removed=_SGLANG_IN_PROCESS_REMOVED,
    ),
    CapabilitySpec(
        capability=Capability.SGLANG_REQUEST_ID,
        owner=SGLANG_LOAD_METADATA,
        method="__init__",
        params=(),
        since="0.4.6",
        fallback=None,
        fallback_result="dropped: loads and stores are not tied to a request id (only the MP "
        "connector, never older than this field, reads it)",
        impact="none for the in-process connector; LMCache cannot name the request in its logs",
        keyword="request_id",
        also=(SGLANG_STORE_METADATA,),
        removed=_SGLANG_IN_PROCESS_REMOVED,
    ),
    CapabilitySpec(
        capability=Capability.SGLANG_MP,
        owner=SGLANG_MP,
        method="__init__",
        params=(),
        since="0.4.6",
        fallback=None,
        fallback_result="the SGLang MP connector cannot be built",
        impact="no SGLang multi-process mode before the unified connector (0.5.6)",
        kind="class",
        removed=_SGLANG_IN_PROCESS_REMOVED,
    ),
    CapabilitySpec(
        capability=Capability.SGLANG_MP_STORE_ASYNC,
        owner=SGLANG_MP,
        method="store_kv_async",
        params=("store_metadata",),
        since="0.5.3",
        fallback=None,
        fallback_result="emulated: store_kv runs at once and an already completed future "
        "(True) is returned",
        impact="stores block the caller",
        removed=_SGLANG_IN_PROCESS_REMOVED,
    ),
    CapabilitySpec(
        capability=Capability.SGLANG_UNIFIED_MP,
        owner=SGLANG_UNIFIED,
        method="__init__",
        params=(),
        since="0.5.6",
        fallback=None,
        fallback_result="the unified SGLang MP connector cannot be built",
        impact="sglang >= 0.5.21 (the unified radix cache) cannot use LMCache",
        kind="class",
    ),
)
CATALOG = (*CATALOG, *SGLANG_ROWS)

_BY_CAPABILITY: dict[Capability, CapabilitySpec] = {row.capability: row for row in CATALOG}


def owned_by(role: Role) -> tuple[Capability, ...]:
    """The capabilities whose owners include ``role``."""
    return tuple(row.capability for row in CATALOG if role in row.owners)


def pass_through(role: Role) -> tuple[CapabilitySpec, ...]:
    """The optional methods of ``role`` an adapter binds to the engine's own method or the
    fallback (one rule for every adapter and the vLLM connector: adding such a row is all it
    takes to forward a new method)."""
    return tuple(row for row in CATALOG if role in row.owners and row.passes_through)


def spec_for(capability: Capability | str) -> CapabilitySpec:
    """The catalog row of ``capability`` (a member or its string value).

    Raises :class:`UnknownCapabilityError` (a ``ValueError``) naming the known capabilities.
    """
    try:
        return _BY_CAPABILITY[Capability(capability)]
    except ValueError:
        known = ", ".join(c.value for c in Capability)
        raise UnknownCapabilityError(f"unknown capability {capability!r}; known: {known}") from None


def fallback_table(role: Role) -> str:
    """The rows of ``role`` as a docstring list: each capability, its member, its first
    release and what an adapter does on a release without it (rendered into the adapters'
    docstrings, like the documentation's tables)."""
    lines = ["", "", f"    On a release without a capability ({role.name}):", ""]
    for r in CATALOG:
        if role in r.owners and r.kind != "class":
            member = r.member.split(".", 1)[1] if "." in r.member else r.member
            lines.append(
                f"    - ``{r.capability.value}`` (``{member}``, since {r.since}): "
                f"{r.fallback_result}"
            )
    return "\n".join(lines) + "\n"


def _document_members() -> None:
    for row in CATALOG:
        row.capability.__doc__ = (
            f"{row.member} -- since LMCache {row.since}. "
            f"Absent: adapters return {row.fallback_result}; {row.impact}."
        )


_document_members()
assert set(_BY_CAPABILITY) == set(Capability), "every Capability needs exactly one catalog row"
