"""The capability catalog: the one place that says what each capability is.

Every row of :data:`CATALOG` names a capability, the LMCache class that owns it, the method that
carries it, the positional parameters a caller passes, the first LMCache release that has it, the
fallback an adapter binds when it is absent, and what the user loses then. Probes (live and
static), adapters, ``doctor`` and the release matrix all read this table; nothing else hard-codes
a capability's facts.

The "since" column was derived from the sources of every LMCache release on PyPI
(0.3.0 ... 0.5.6) and is checked against the shipped release matrix by the test-suite.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from lmcache_compat.core import fallbacks as fb
from lmcache_compat.core.tokens import looks_up_by_tokens, takes_packed_tokens
from lmcache_compat.errors import UnknownCapabilityError
from lmcache_compat.upstream import locations as loc

if TYPE_CHECKING:
    from lmcache_compat.core.signatures import MethodFacts

__all__ = [
    "CATALOG",
    "CONNECTOR_CORE_METHODS",
    "CONNECTOR_IMPL",
    "ENGINE",
    "MP_SCHEDULER",
    "MP_WORKER",
    "OTHER_MEMBERS",
    "ROLE_CORE_METHODS",
    "Capability",
    "CapabilitySpec",
    "fallback_table",
    "owned_by",
    "spec_for",
]

#: The catalog's owners: upstream class names (where they live:
#: :mod:`lmcache_compat.upstream.locations`).
CONNECTOR_IMPL = loc.CONNECTOR_IMPL.name
MP_SCHEDULER = loc.MP_SCHEDULER.name
MP_WORKER = loc.MP_WORKER.name
ENGINE = loc.ENGINE.name

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


@dataclass(frozen=True)
class CapabilitySpec:
    """One row of the capability catalog."""

    capability: Capability
    #: LMCache class that owns the method.
    owner: str
    #: Method whose presence carries the capability.
    method: str
    #: Positional parameters the adapter passes (documentation names; probes check arity).
    params: tuple[str, ...]
    #: First LMCache release that has the capability.
    since: str
    #: What an adapter calls when the capability is absent, as a method (its first parameter
    #: is the adapter); ``None``: the capability has no adapter method of its own.
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
    #: Further classes that must carry it too (e.g. ``is_healthy`` on both MP adapters).
    also: tuple[str, ...] = ()
    #: When set, the capability is "``method``'s facts pass this test" (e.g. the lookup is keyed
    #: by token ids, read from the key parameter's annotation), instead of arity or keyword.
    rule: Callable[[MethodFacts], bool] | None = None

    @property
    def owners(self) -> tuple[str, ...]:
        return (self.owner, *self.also)

    @property
    def member(self) -> str:
        """``Owner.method(params)``: how messages name the member."""
        if self.kind == "class":
            return " and ".join(self.owners)
        if self.kind == "property":
            return f"{self.owner}.{self.method} (property)"
        text = f"{self.owner}.{self.method}({', '.join(self.params)})"
        return f"{text} keyword {self.keyword!r}" if self.keyword else text


CATALOG: tuple[CapabilitySpec, ...] = (
    CapabilitySpec(
        Capability.GET_FINISHED,
        CONNECTOR_IMPL,
        "get_finished",
        ("finished_req_ids",),
        "0.3.1",
        fb.no_finished,
        "(None, None)",
        "no asynchronous send/receive completion is reported (nothing is lost: LMCache "
        "transfers are synchronous in these releases)",
    ),
    CapabilitySpec(
        Capability.REQUEST_FINISHED,
        CONNECTOR_IMPL,
        "request_finished",
        ("request", "block_ids"),
        "0.3.1",
        fb.request_not_held,
        "(False, None)",
        "blocks are freed as soon as a request finishes; no KV transfer parameters are returned",
    ),
    CapabilitySpec(
        Capability.ASYNC_LOOKUP,
        CONNECTOR_IMPL,
        "get_num_new_matched_tokens",
        ("request", "num_computed_tokens"),
        "0.3.6",
        None,
        "get_num_new_matched_tokens always returns an int",
        "lookups are synchronous: scheduling waits for each LMCache lookup",
        returns_none=True,
    ),
    CapabilitySpec(
        Capability.INFERENCE_INFO,
        CONNECTOR_IMPL,
        "get_inference_info",
        (),
        "0.3.7",
        fb.no_inference_info,
        "{} (an empty dict)",
        "no inference/configuration summary is available for diagnostics",
    ),
    CapabilitySpec(
        Capability.LOAD_ERROR_REPORTING,
        CONNECTOR_IMPL,
        "get_block_ids_with_load_errors",
        (),
        "0.3.9.post1",
        fb.no_load_errors,
        "set() (an empty set: no failure can be reported)",
        "KV load failures cannot be detected: requests may compute on missing KV",
    ),
    CapabilitySpec(
        Capability.SHUTDOWN,
        CONNECTOR_IMPL,
        "shutdown",
        (),
        "0.3.10",
        fb.noop,
        "None (a no-op)",
        "LMCache's background services are not stopped cleanly at exit",
    ),
    CapabilitySpec(
        Capability.KV_EVENTS,
        CONNECTOR_IMPL,
        "get_kv_events",
        (),
        "0.3.10.post2",
        fb.no_kv_events,
        "[] (an empty list: no events)",
        "no KV cache events: KV-aware routers cannot see what LMCache stores",
    ),
    CapabilitySpec(
        Capability.REGISTER_KV_CACHES,
        CONNECTOR_IMPL,
        "register_kv_caches",
        ("kv_caches",),
        "0.3.12",
        fb.noop_register,
        "None (a no-op: the release takes KV caches from the forward context)",
        "none in practice: KV caches are picked up from the forward context on first load",
    ),
    # --- multi-process adapters --------------------------------------------------------------
    CapabilitySpec(
        Capability.MP_ADAPTERS,
        MP_SCHEDULER,
        "__init__",
        (),
        "0.3.13",
        None,
        "MP adapters cannot be built",
        "no multi-process (LMCache server) mode",
        kind="class",
        also=(MP_WORKER,),
    ),
    CapabilitySpec(
        Capability.MP_LOOKUP_BY_TOKEN_IDS,
        MP_SCHEDULER,
        "maybe_submit_lookup_request",
        ("request_id",),
        "0.3.14",
        None,
        "lookups are keyed by vLLM block hashes (the adapter passes block_hashes)",
        "lookups need vLLM's block hashes",
        rule=looks_up_by_tokens,
    ),
    CapabilitySpec(
        Capability.MP_END_SESSION,
        MP_SCHEDULER,
        "end_session",
        ("request_id",),
        "0.3.14",
        fb.noop_any,
        "None (a no-op)",
        "no end-of-request notification to the LMCache server",
    ),
    CapabilitySpec(
        Capability.MP_FREE_LOOKUP_LOCKS,
        MP_SCHEDULER,
        "free_lookup_locks",
        ("token_ids", "start", "end", "request_id"),
        "0.4.1",
        fb.noop_any,
        "None (a no-op: releases before 0.4.1 take no lookup locks)",
        "none: there are no lookup locks to free",
    ),
    CapabilitySpec(
        Capability.MP_HEALTH_CHECK,
        MP_SCHEDULER,
        "is_healthy",
        (),
        "0.4.2",
        fb.assume_healthy,
        "True (health unknown: assumed healthy)",
        "an unreachable LMCache server is not detected early; requests fail on use instead",
        kind="property",
        also=(MP_WORKER,),
    ),
    CapabilitySpec(
        Capability.MP_LOAD_ERROR_REPORTING,
        MP_WORKER,
        "get_block_ids_with_load_errors",
        (),
        "0.4.2",
        fb.no_load_errors,
        "set() (an empty set: no failure can be reported)",
        "KV load failures cannot be detected: requests may compute on missing KV",
    ),
    CapabilitySpec(
        Capability.MP_REPORT_BLOCK_ALLOCATIONS,
        MP_SCHEDULER,
        "report_block_allocations",
        ("records",),
        "0.4.3",
        fb.noop_any,
        "None (a no-op)",
        "the LMCache server is not told about vLLM block allocations",
    ),
    CapabilitySpec(
        Capability.MP_CACHE_SALT,
        MP_SCHEDULER,
        "maybe_submit_lookup_request",
        ("request_id",),
        "0.4.4",
        None,
        "a non-empty cache_salt raises UnsupportedArgumentError (it would mix tenants' caches)",
        "no per-tenant cache isolation",
        keyword="cache_salt",
    ),
    CapabilitySpec(
        Capability.MP_PARALLEL_STRATEGY,
        MP_SCHEDULER,
        "__init__",
        (),
        "0.4.4",
        None,
        "world size / rank (/ tp_size) are passed as plain arguments",
        "no pipeline parallel or MLA layout beyond world size and rank",
        keyword="parallel_strategy",
    ),
    CapabilitySpec(
        Capability.MP_ENGINE_GROUP_INFOS,
        MP_WORKER,
        "register_kv_caches",
        ("kv_caches",),
        "0.4.7",
        None,
        "more than one KV cache group raises UnsupportedArgumentError",
        "hybrid models with several KV cache groups are not supported",
        keyword="engine_group_infos",
    ),
    CapabilitySpec(
        Capability.MP_MULTI_SERVER,
        MP_SCHEDULER,
        "__init__",
        (),
        "0.5.0",
        None,
        "one server URL; several raise UnsupportedArgumentError",
        "one LMCache server only",
        keyword="server_urls",
    ),
    CapabilitySpec(
        Capability.MP_SCHEDULER_SHUTDOWN,
        MP_SCHEDULER,
        "shutdown",
        (),
        "0.5.0",
        fb.noop_any,
        "None (a no-op)",
        "the scheduler side's sockets are closed only at process exit",
    ),
    CapabilitySpec(
        Capability.MP_HANDLE_PREEMPTIONS,
        MP_WORKER,
        "handle_preemptions",
        ("need_flush_before_forward",),
        "0.5.2",
        fb.noop_any,
        "None (a no-op)",
        "in-flight stores of preempted requests are not flushed first",
    ),
    CapabilitySpec(
        Capability.MP_LAZY_OFFLOAD,
        MP_WORKER,
        "get_finished_with_lazy_offload",
        (),
        "0.5.4",
        None,
        "calling it raises MissingCapabilityError (no safe fallback)",
        "no lazy offload mode",
    ),
    CapabilitySpec(
        Capability.MP_REQUEST_CONFIGS,
        MP_SCHEDULER,
        "maybe_submit_lookup_request",
        ("request_id",),
        "0.5.5",
        None,
        "non-empty request_configs raise UnsupportedArgumentError",
        "no per-request LMCache configuration",
        keyword="request_configs",
    ),
    CapabilitySpec(
        Capability.MP_LAYOUT_HINTS,
        MP_WORKER,
        "register_kv_caches",
        ("kv_caches",),
        "0.5.5",
        None,
        "layout hints are dropped (the release infers the layout)",
        "none: the release infers the KV layout itself",
        keyword="layout_hints",
    ),
    CapabilitySpec(
        Capability.MP_RESERVE_LAST_TOKEN,
        MP_SCHEDULER,
        "maybe_submit_lookup_request",
        ("request_id",),
        "0.5.6",
        None,
        "emulated exactly: the lookup is given token_ids[:-1]",
        "none: the adapter emulates it",
        keyword="reserve_last_token",
    ),
    CapabilitySpec(
        Capability.MP_RESET_CACHE,
        MP_SCHEDULER,
        "reset_cache",
        (),
        "0.5.6",
        fb.not_reset,
        "False (nothing was reset)",
        "the LMCache server's cache cannot be reset from vLLM",
    ),
    CapabilitySpec(
        Capability.MP_KV_EVENTS,
        MP_WORKER,
        "get_kv_events",
        (),
        "0.5.6",
        fb.no_kv_events,
        "[] (an empty list: no events)",
        "no KV cache events: KV-aware routers cannot see what LMCache stores",
    ),
    CapabilitySpec(
        Capability.MP_FAILED_REQUEST_REPORTING,
        MP_WORKER,
        "get_failed_request_ids",
        (),
        "0.5.6",
        fb.no_failed_requests,
        "set() (an empty set)",
        "whole-request store/retrieve failures are not reported",
    ),
    CapabilitySpec(
        Capability.MP_PACKED_TOKEN_IDS,
        MP_SCHEDULER,
        "maybe_submit_lookup_request",
        ("request_id",),
        "0.5.7rc2",
        None,
        "token ids are passed as a list of ints",
        "none: the adapter passes token ids in the form the release takes",
        rule=takes_packed_tokens,
    ),
    CapabilitySpec(
        Capability.MP_LOOKUP_START,
        MP_SCHEDULER,
        "maybe_submit_lookup_request",
        ("request_id",),
        "0.5.7rc2",
        None,
        "a start > 0 raises UnsupportedArgumentError (the chunks below it would stay locked)",
        "lookups lock and prefetch the prefix vLLM already holds",
        keyword="start",
    ),
    CapabilitySpec(
        Capability.MP_FREE_EXTRA_RANGES,
        MP_SCHEDULER,
        "free_lookup_locks",
        (),
        "0.5.7rc2",
        None,
        "emulated exactly: one free_lookup_locks call per extra range",
        "none: the adapter frees each range with its own call",
        keyword="extra_ranges",
    ),
    CapabilitySpec(
        Capability.MP_CHUNK_ALIGNMENT,
        MP_SCHEDULER,
        "__init__",
        (),
        "0.5.7rc2",
        None,
        "a required_chunk_alignment raises UnsupportedArgumentError (no negotiation)",
        "the server's chunk size is not negotiated against the model's alignment",
        keyword="required_chunk_alignment",
        also=(MP_WORKER,),
    ),
    # --- LMCacheEngine ------------------------------------------------------------------------
    CapabilitySpec(
        Capability.ENGINE_LOOKUP_ID,
        ENGINE,
        "lookup",
        ("tokens",),
        "0.3.4",
        None,
        "lookup_id is passed as request_id (0.3.3) or, unpinned, dropped (0.3.0-0.3.2)",
        "lookups cannot be tied to an id before 0.3.3",
        keyword="lookup_id",
    ),
    CapabilitySpec(
        Capability.ENGINE_REQUEST_CONFIGS,
        ENGINE,
        "lookup",
        ("tokens",),
        "0.3.4",
        None,
        "non-empty request_configs raise UnsupportedArgumentError",
        "no per-request LMCache configuration on engine lookups",
        keyword="request_configs",
    ),
    CapabilitySpec(
        Capability.ENGINE_HEALTH,
        ENGINE,
        "health",
        (),
        "0.3.4",
        None,
        "is_healthy() returns True (unknown)",
        "engine health cannot be checked",
    ),
    CapabilitySpec(
        Capability.ENGINE_ASYNC_PREFETCH,
        ENGINE,
        "async_lookup_and_prefetch",
        ("lookup_id", "tokens"),
        "0.3.6",
        None,
        "prefetch() calls the synchronous prefetch(tokens) of 0.3.0-0.3.5",
        "prefetching blocks the caller",
    ),
    CapabilitySpec(
        Capability.ENGINE_SINGLE_UNPIN,
        ENGINE,
        "lookup_unpin",
        (),
        "0.3.9",
        None,
        "unpin(id) calls lookup_unpin([id]) (0.3.3-0.3.7)",
        "none: the adapter wraps the id in a list",
        keyword="lookup_id",
    ),
    CapabilitySpec(
        Capability.ENGINE_KV_EVENTS,
        ENGINE,
        "get_kv_events",
        (),
        "0.3.10.post2",
        fb.no_kv_events,
        "[] (an empty list: no events)",
        "no KV cache events",
    ),
    CapabilitySpec(
        Capability.ENGINE_FREEZE,
        ENGINE,
        "freeze",
        ("enabled",),
        "0.3.11",
        None,
        "freeze() raises MissingCapabilityError; is_frozen() returns False",
        "the cache cannot be frozen (read-only) before 0.3.11",
    ),
    CapabilitySpec(
        Capability.ENGINE_IS_HEALTHY,
        ENGINE,
        "is_healthy",
        (),
        "0.3.13",
        None,
        "is_healthy() maps to health() == 0 (0.3.4-0.3.12) or True (unknown, earlier)",
        "none from 0.3.4: health() is used instead",
    ),
)

#: Methods every LMCache release's ``LMCacheConnectorV1Impl`` has (0.3.0 on), with their
#: positional parameters. An object missing one is not an engine (:class:`NotAnEngineError`).
CONNECTOR_CORE_METHODS: dict[str, tuple[str, ...]] = {
    "start_load_kv": ("forward_context",),
    "wait_for_layer_load": ("layer_name",),
    "save_kv_layer": ("layer_name", "kv_layer", "attn_metadata"),
    "wait_for_save": (),
    "get_num_new_matched_tokens": ("request", "num_computed_tokens"),
    "update_state_after_alloc": ("request", "num_external_tokens"),
    "build_connector_meta": ("scheduler_output",),
}

#: Methods every release that has the class has, per class: what makes an object play a role.
ROLE_CORE_METHODS: dict[str, dict[str, tuple[str, ...]]] = {
    CONNECTOR_IMPL: CONNECTOR_CORE_METHODS,
    MP_SCHEDULER: {
        "maybe_submit_lookup_request": ("request_id", "token_ids"),
        "check_lookup_result": ("request_id",),
        "cleanup_lookup_result": ("request_id",),
        "num_blocks_per_chunk": (),
    },
    MP_WORKER: {
        "register_kv_caches": ("kv_caches",),
        "submit_store_request": ("request_id", "op", "event"),
        "submit_retrieve_request": ("request_id", "op", "event"),
        "batched_submit_store_requests": ("request_ids", "ops", "event"),
        "batched_submit_retrieve_requests": ("request_ids", "ops", "event"),
        "get_finished": ("finished_req_ids",),
        "num_blocks_per_chunk": (),
        "shutdown": (),
    },
    ENGINE: {
        "store": ("tokens",),
        "retrieve": ("tokens",),
        "lookup": ("tokens",),
        "close": (),
    },
}

#: Other members adapters look for (by reading the class, like every probe): older forms that
#: version-specific implementations fall back to.
OTHER_MEMBERS: dict[str, tuple[str, ...]] = {
    ENGINE: ("prefetch", "is_frozen", "lookup_unpin"),
}

_BY_CAPABILITY: dict[Capability, CapabilitySpec] = {row.capability: row for row in CATALOG}


def owned_by(owner: str) -> tuple[Capability, ...]:
    """The capabilities whose owners include ``owner`` (e.g. ``"LMCacheConnectorV1Impl"``)."""
    return tuple(row.capability for row in CATALOG if owner in row.owners)


def spec_for(capability: Capability | str) -> CapabilitySpec:
    """The catalog row of ``capability`` (a member or its string value).

    Raises :class:`UnknownCapabilityError` (a ``ValueError``) naming the known capabilities.
    """
    try:
        return _BY_CAPABILITY[Capability(capability)]
    except ValueError:
        known = ", ".join(c.value for c in Capability)
        raise UnknownCapabilityError(f"unknown capability {capability!r}; known: {known}") from None


def fallback_table(owner: str) -> str:
    """The rows of ``owner`` as a docstring list: each capability, its member, its first
    release and what an adapter does on a release without it (rendered into the adapters'
    docstrings, like the README's tables)."""
    lines = ["", "", f"    On a release without a capability ({owner}):", ""]
    for r in CATALOG:
        if owner in r.owners and r.kind != "class":
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
