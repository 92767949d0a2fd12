"""The argument policy: what happens to an argument the installed release lacks.

One row per fact, keyed (``ARG.cache_salt``); the mappers in
:mod:`lmcache_compat.mp.scheduler_calls` and
:mod:`lmcache_compat.engine.calls` read the rows, and the README's table is rendered from them.
``on_older`` is ``map`` (passed in the release's own form), ``emulate`` (the same result another
way), ``drop`` (safe to leave out) or ``error`` (:class:`UnsupportedArgumentError` unless the
caller accepts the downgrade with ``allow={"name"}``). A row tied to a catalog capability takes
its first release from there; the others name it themselves.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Literal

from lmcache_compat.core.catalog import Capability
from lmcache_compat.errors import UnsupportedArgumentError

__all__ = ["ARG", "ARGUMENTS", "Argument", "Downgrades", "render_arguments_markdown"]

OnOlder = Literal["map", "emulate", "drop", "error"]


@dataclass(frozen=True)
class Argument:
    """One row of the argument table."""

    key: str
    #: The name callers use (and pass to ``allow=``); ``None``: the keyword of the row's
    #: capability (so the name is written once, in the catalog). Read it as :attr:`argument`.
    given_name: str | None
    member: str
    on_older: OnOlder
    #: What the table says, and why a refusal refuses.
    detail: str
    why: str = ""
    capability: Capability | None = None
    first: str | None = None

    @property
    def argument(self) -> str:
        """The name callers use and pass to ``allow=``, as errors show it."""
        if self.given_name is not None:
            return self.given_name
        keyword = self.capability.spec.keyword if self.capability is not None else None
        assert keyword is not None, f"{self.key}: no name and no keyword capability"
        return keyword

    @property
    def since(self) -> str:
        """The first release that takes the argument (the capability's, when tied to one)."""
        if self.capability is not None:
            return self.capability.since
        assert self.first is not None, self.key
        return self.first


_MP_INIT = "LMCacheMP*Adapter.__init__"
_LOOKUP = "LMCacheMPSchedulerAdapter.maybe_submit_lookup_request"
_MP_CALLS = "LMCacheMP*Adapter lookups, lock frees, submits"


class _Table:
    """The rows as attributes (``ARG.cache_salt``) and, in order, as an iterable."""

    def __init__(self, rows: Iterable[Argument]) -> None:
        self._rows = tuple(rows)
        for row in self._rows:
            setattr(self, row.key, row)

    def __iter__(self) -> Iterator[Argument]:
        return iter(self._rows)

    def __len__(self) -> int:
        return len(self._rows)

    server_urls: Argument
    several_servers: Argument
    tp_size: Argument
    mq_timeout: Argument
    heartbeat_interval: Argument
    parallel_strategy: Argument
    pp_size: Argument
    dcp_size: Argument
    extra_config: Argument
    enable_kv_events: Argument
    required_chunk_alignment: Argument
    token_ids: Argument
    packed_token_ids: Argument
    cache_salt: Argument
    request_configs: Argument
    reserve_last_token: Argument
    reserve_by_hashes: Argument
    start: Argument
    extra_ranges: Argument
    engine_group_infos: Argument
    layout_hints: Argument
    skip_first_n_tokens: Argument
    block_ids: Argument
    lookup_id: Argument
    pinned_lookup: Argument
    engine_request_configs: Argument
    unpin: Argument
    prefetch: Argument
    broadcast_fn: Argument
    broadcast_required: Argument


C = Capability
ARG = _Table(
    (
        Argument("server_urls", None, "LMCacheMPSchedulerAdapter.__init__", "map",
                 "one URL is passed as the string server_url (never split into characters)",
                 capability=C.MP_MULTI_SERVER),
        Argument("several_servers", None, "LMCacheMPSchedulerAdapter.__init__", "error",
                 "several URLs: one server only; allow={'server_urls'} connects to the first",
                 "this release talks to one LMCache server", capability=C.MP_MULTI_SERVER),
        Argument("tp_size", "tp_size", _MP_INIT, "error",
                 "only with use_mla and tp_size > 1 (it keys MLA caches); otherwise dropped",
                 "MLA caches are keyed by tp_size from 0.4.1 on", first="0.4.1"),
        Argument("mq_timeout", "mq_timeout", _MP_INIT, "drop",
                 "timing only: the release uses its built-in behaviour", first="0.4.2"),
        Argument("heartbeat_interval", "heartbeat_interval", _MP_INIT, "drop",
                 "timing only: the release has no heartbeat", first="0.4.2"),
        Argument("parallel_strategy", None, _MP_INIT, "map",
                 "world_size/kv_rank are passed (with MLA: divided by tp_size, as vLLM did)",
                 capability=C.MP_PARALLEL_STRATEGY),
        Argument("pp_size", "pp_size", "ParallelStrategy", "error",
                 "only when pp_size > 1: older releases have no pipeline-parallel layout",
                 "this release has no pipeline-parallel layout",
                 capability=C.MP_PARALLEL_STRATEGY),
        Argument("dcp_size", "dcp_size", "ParallelStrategy", "error",
                 "only when dcp_size > 1: older releases have no decode-context parallelism",
                 "this release has no decode-context parallelism", first="0.5.5"),
        Argument("extra_config", "extra_config", _MP_INIT, "error",
                 "only when non-empty: the configuration would be ignored",
                 "the configuration would be ignored", first="0.4.6"),
        Argument("enable_kv_events", "enable_kv_events", "LMCacheMPWorkerAdapter.__init__",
                 "drop", "events are unavailable; get_kv_events() returns []",
                 capability=C.MP_KV_EVENTS),
        Argument("required_chunk_alignment", None, _MP_INIT, "error",
                 "only when given: the server's chunk size would not be negotiated",
                 "the server's chunk size would not be negotiated against the alignment",
                 capability=C.MP_CHUNK_ALIGNMENT),
        Argument("token_ids", "token_ids", _LOOKUP, "map",
                 "0.3.13 looks up by block_hashes: the caller's are passed",
                 capability=C.MP_LOOKUP_BY_TOKEN_IDS),
        Argument("packed_token_ids", "token_ids", f"{_LOOKUP}, free_lookup_locks, LoadStoreOp",
                 "map", "packed with the release's own pack_token_ids where it takes bytes; "
                 "a list of ints before", capability=C.MP_PACKED_TOKEN_IDS),
        Argument("cache_salt", None, _MP_CALLS, "error",
                 "only when non-empty: dropping it would mix tenants' caches",
                 "dropping it would mix tenants' caches", capability=C.MP_CACHE_SALT),
        Argument("request_configs", None, _MP_CALLS, "error",
                 "only when non-empty: the per-request configuration would be ignored",
                 "the configuration would be ignored", capability=C.MP_REQUEST_CONFIGS),
        Argument("reserve_last_token", None, _LOOKUP, "emulate",
                 "token_ids[:-1] is looked up: the same aligned range",
                 capability=C.MP_RESERVE_LAST_TOKEN),
        Argument("reserve_by_hashes", C.MP_RESERVE_LAST_TOKEN.spec.keyword, _LOOKUP, "error",
                 "0.3.13 (block-hash lookups): cannot leave out the last token",
                 "block-hash lookups cannot leave out the last token",
                 capability=C.MP_LOOKUP_BY_TOKEN_IDS),
        Argument("start", None, _LOOKUP, "error",
                 "only when start > 0: the chunks below start would be locked and prefetched "
                 "too, and their read locks held until the server's TTL",
                 "the chunks below start would be locked until the server's TTL (free them "
                 "with free_lookup_locks(token_ids, 0, start, request_id))",
                 capability=C.MP_LOOKUP_START),
        Argument("extra_ranges", None, "LMCacheMPSchedulerAdapter.free_lookup_locks",
                 "emulate", "one free_lookup_locks call per extra range: the same locks freed",
                 capability=C.MP_FREE_EXTRA_RANGES),
        Argument("engine_group_infos", None,
                 "LMCacheMPWorkerAdapter.register_kv_caches", "error",
                 "only with more than one KV cache group; one group is dropped",
                 "this release handles one KV cache group only",
                 capability=C.MP_ENGINE_GROUP_INFOS),
        Argument("layout_hints", None, "LMCacheMPWorkerAdapter.register_kv_caches",
                 "drop", "hints only: the release infers the layout",
                 capability=C.MP_LAYOUT_HINTS),
        Argument("skip_first_n_tokens", "skip_first_n_tokens", "LoadStoreOp", "error",
                 "only when non-zero: the skipped tokens would be stored or loaded",
                 "the skipped tokens would be stored or loaded", first="0.4.1"),
        Argument("block_ids", "block_ids", "LoadStoreOp", "map",
                 "one KV cache group: flat list[int] <-> [[...]]; several groups: error",
                 "this release has one KV cache group only",
                 capability=C.MP_ENGINE_GROUP_INFOS),
        Argument("lookup_id", None, "LMCacheEngine.lookup", "map",
                 "passed as request_id= on 0.3.3; dropped before when pin=False",
                 capability=C.ENGINE_LOOKUP_ID),
        Argument("pinned_lookup", C.ENGINE_LOOKUP_ID.spec.keyword,
                 "LMCacheEngine.lookup(pin=True)", "error",
                 "before 0.3.3 a lookup cannot be pinned by id",
                 "a pinned lookup could never be unpinned", first="0.3.3"),
        Argument("engine_request_configs", None, "LMCacheEngine.lookup/prefetch",
                 "error", "only when non-empty", "the configuration would be ignored",
                 capability=C.ENGINE_REQUEST_CONFIGS),
        Argument("unpin", "unpin", "LMCacheEngine.lookup_unpin", "map",
                 "lookup_unpin([id]) on 0.3.3-0.3.7; a no-op before 0.3.3 (nothing is pinned "
                 "by id)", capability=C.ENGINE_SINGLE_UNPIN),
        Argument("prefetch", "prefetch", "LMCacheEngine.async_lookup_and_prefetch", "map",
                 "prefetch(tokens) on 0.3.0-0.3.5 (synchronous; lookup_id unused)",
                 capability=C.ENGINE_ASYNC_PREFETCH),
        Argument("broadcast_fn", "broadcast_fn", "LMCacheEngineBuilder.get_or_create", "error",
                 "given to 0.3.0-0.3.3, which cannot broadcast",
                 "other ranks would not receive the broadcasts", first="0.3.4"),
        Argument("broadcast_required", "broadcast_fn", "LMCacheEngineBuilder.get_or_create",
                 "map", "required from 0.3.5: single-process defaults are passed when not given",
                 first="0.3.5"),
    )
)  # fmt: skip

#: The rows, in table order.
ARGUMENTS: tuple[Argument, ...] = tuple(ARG)


def render_arguments_markdown() -> str:
    """The argument table as Markdown (the README's copy is generated from it)."""
    lines = [
        "| argument | member | since | on an older release | detail |",
        "|---|---|---|---|---|",
    ]
    for row in ARGUMENTS:
        lines.append(
            f"| `{row.argument}` | `{row.member}` | {row.since} | {row.on_older} | {row.detail} |"
        )
    return "\n".join(lines) + "\n"


class Downgrades:
    """The caller's permission to drop arguments that change meaning, and the error if not."""

    def __init__(self, allow: Iterable[str] | bool, where: str, version: str | None) -> None:
        if isinstance(allow, str):
            allow = (allow,)
        self.all = allow is True
        self.allowed = frozenset() if isinstance(allow, bool) else frozenset(allow)
        self.where = where
        self.version = version

    def at(self, where: str) -> Downgrades:
        """The same permission, for another member (error messages name it)."""
        return Downgrades(True if self.all else self.allowed, where, self.version)

    def allows(self, row: Argument) -> bool:
        return self.all or row.argument in self.allowed

    def refuse(self, row: Argument) -> None:
        """Raise unless ``row``'s argument may be downgraded (then the caller drops or adapts
        it, as the row says)."""
        if self.allows(row):
            return
        raise UnsupportedArgumentError(
            row.argument,
            f"{self.where} in LMCache {self.version or 'unknown'} cannot take "
            f"{row.argument!r} (first release that can: {row.since}); {row.why}.\n"
            f"HINT: pip install -U 'lmcache>={row.since}', or pass allow={{{row.argument!r}}} "
            "to accept the downgrade",
        )
