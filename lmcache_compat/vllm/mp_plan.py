"""What ``LMCacheCompatMPConnector`` decides and keeps, without importing vLLM or LMCache.

* :func:`reference_keys`: the ``kv_connector_extra_config`` keys the reference connector reads
  (vLLM's in-tree ``LMCacheMPConnector``, or LMCache's own where vLLM hands over), with their
  defaults, read from the reference's own module source with :mod:`ast`; never a list written
  here. :func:`settings_from_extra` maps them onto :class:`~lmcache_compat.mp.MPConfig` by what
  each key names (the last dotted part: ``host``, ``port``, ``server_urls``, ``mq_timeout``,
  ``heartbeat_interval``), the defaults being the reference's own.
* :class:`SchedulerCore` / :class:`WorkerCore`: the connector's two roles over
  :class:`~lmcache_compat.mp.MPSchedulerAdapter` / :class:`~lmcache_compat.mp.MPWorkerAdapter`
  (any release 0.3.13 on: the adapters map every call onto the installed one). One KV cache
  group (the references refuse the hybrid KV cache manager too).

The scheduler side asks LMCache for a request's hits once per request, reports the hit tokens
as an asynchronous load, and puts plain :class:`Transfer` records (block ids, tokens, the token
range) into the step's metadata; the worker side turns them into the release's ``LoadStoreOp``
(``MPWorkerAdapter.make_load_store_op``) and submits them. Failed loads are the worker
adapter's ``get_block_ids_with_load_errors()``, bound as it is: vLLM applies its
``kv_load_failure_policy`` to them, and a request whose load failed is never looked up in
LMCache again (its recomputed prompt is stored anew).
"""

from __future__ import annotations

import ast
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lmcache_compat.core.arguments import ARG

__all__ = [
    "MPSettings",
    "SchedulerCore",
    "Transfer",
    "WorkerCore",
    "reference_keys",
    "settings_from_extra",
]

logger = logging.getLogger("lmcache_compat.vllm")

#: What a key names (its last dotted part): the settings it feeds (the constructor keywords
#: are the catalog's argument rows' names).
SERVERS, TIMEOUT, HEARTBEAT = (
    ARG.server_urls.argument,
    ARG.mq_timeout.argument,
    ARG.heartbeat_interval.argument,
)
ROLES = (SERVERS, "host", "port", TIMEOUT, HEARTBEAT)
#: The call names whose first argument is an extra-config key in the references.
_READERS = frozenset({"get_from_extra_config", "get"})
_NO_DEFAULT = object()


def reference_keys(source: str, prefix: str = "lmcache.") -> dict[str, Any]:
    """``{key: default}`` for every ``X.get_from_extra_config("lmcache....", default)`` (and
    ``X.get("lmcache....", default)``) call in ``source``; a default that is not a literal is
    ``None``. Keys in source order."""
    keys: dict[str, Any] = {}
    for node in ast.walk(ast.parse(source)):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in _READERS
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
            and node.args[0].value.startswith(prefix)
        ):
            continue
        default: Any = None
        if len(node.args) > 1:
            try:
                default = ast.literal_eval(node.args[1])
            except ValueError:
                default = None
        keys.setdefault(node.args[0].value, default)
    return dict(sorted(keys.items(), key=lambda kv: kv[0]))


@dataclass(frozen=True)
class MPSettings:
    """The server URLs and timeouts the reference would connect with, from the same keys."""

    server_urls: tuple[str, ...]
    mq_timeout: float | None
    heartbeat_interval: float | None
    #: Keys the reference reads that this connector leaves to the release (passed on in
    #: ``extra_config`` where the release takes it).
    other_keys: tuple[str, ...] = ()


def _with_scheme(url: str) -> str:
    return url if "://" in url else f"tcp://{url}"


def settings_from_extra(extra: Mapping[str, Any] | None, keys: Mapping[str, Any]) -> MPSettings:
    """The settings the reference derives from ``extra`` (the user's
    ``kv_connector_extra_config``), by the keys it reads (:func:`reference_keys`)."""
    extra = extra or {}
    by_role: dict[str, str] = {}
    for key in keys:
        role = key.rsplit(".", 1)[-1]
        if role in ROLES:
            by_role.setdefault(role, key)

    def value(role: str) -> Any:
        key = by_role.get(role)
        if key is None:
            return None
        return extra.get(key, keys[key])

    urls: list[str] = []
    listed = value(SERVERS)
    if listed:
        items = listed if isinstance(listed, (list, tuple)) else str(listed).split(",")
        urls = [str(u).strip() for u in items if str(u).strip()]
    if not urls:
        host, port = value("host"), value("port")
        if host is None or port is None:
            raise ValueError(
                "LMCacheCompatMPConnector: the reference connector reads no server address key "
                f"(it reads {sorted(keys)}); set the server in kv_connector_extra_config"
            )
        urls = [f"{host}:{port}"]

    def seconds(role: str) -> float | None:
        raw = value(role)
        return None if raw is None else float(raw)

    used = set(by_role.values())
    return MPSettings(
        tuple(_with_scheme(u) for u in urls),
        seconds(TIMEOUT),
        seconds(HEARTBEAT),
        tuple(k for k in keys if k not in used),
    )


# --- the scheduler side --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Transfer:
    """One load or store of a request's tokens ``[start, end)`` over ``block_ids`` (the blocks
    of that range), as the scheduler puts it into the step's metadata (plain data: vLLM pickles
    the metadata to the workers)."""

    request_id: str
    retrieve: bool
    block_ids: tuple[int, ...]
    token_ids: tuple[int, ...]
    start: int
    end: int
    skip_first_n_tokens: int = 0
    cache_salt: str | None = None


@dataclass(slots=True)
class _Tracker:
    request: Any
    block_ids: list[int] = field(default_factory=list)
    looked_up: bool = False
    #: LMCache's hit tokens (chunk-aligned), vLLM's own prefix-cache hit tokens
    hits: int = 0
    vllm_hits: int = 0
    #: a retrieve was allocated for and not yet put into metadata
    load_pending: bool = False
    loaded: bool = False
    bypass: bool = False
    #: tokens LMCache holds (stored by this connector, or hit); whether a store went out
    stored: int = 0
    sent: bool = False


class SchedulerCore:
    """The scheduler role over an :class:`~lmcache_compat.mp.MPSchedulerAdapter`."""

    def __init__(
        self,
        adapter: Any,
        block_size: int,
        *,
        can_store: bool,
        accepts_none: bool,
        resumed: Callable[[Any], Iterable[str]],
        poll_interval: float = 0.001,
    ) -> None:
        self.adapter = adapter
        self.block_size = block_size
        self.chunk_tokens = adapter.num_blocks_per_chunk() * block_size
        self.can_store = can_store
        self.accepts_none = accepts_none
        self.poll_interval = poll_interval
        self._resumed = resumed
        self.trackers: dict[str, _Tracker] = {}

    # vLLM: get_num_new_matched_tokens(request, num_computed_tokens) -> (count | None, async)
    def get_num_new_matched_tokens(
        self, request: Any, num_computed_tokens: int
    ) -> tuple[int | None, bool]:
        rid = request.request_id
        tracker = self.trackers.get(rid)
        if tracker is None:
            tracker = self.trackers[rid] = _Tracker(request)
        elif tracker.loaded and request.num_computed_tokens == 0:
            # back from a failed load (vLLM reset the request): recompute it, never reload
            logger.warning(
                "LMCacheCompatMPConnector: request %s is recomputed without LMCache after its "
                "KV load failed",
                rid,
            )
            self.adapter.cleanup_lookup_result(rid)
            tracker.bypass, tracker.loaded, tracker.hits = True, False, 0
            tracker.stored, tracker.sent = 0, False
            tracker.block_ids.clear()
        if tracker.bypass:
            return 0, False
        tokens = list(request.all_token_ids)
        if not tracker.looked_up:
            self.adapter.lookup(
                rid,
                tokens,
                request.block_hashes,
                cache_salt=request.cache_salt,
            )
            tracker.looked_up = True
        hits = self.adapter.check_lookup_result(rid)
        while hits is None and not self.accepts_none:
            time.sleep(self.poll_interval)
            hits = self.adapter.check_lookup_result(rid)
        if hits is None:
            return None, False
        tracker.hits = hits
        tracker.vllm_hits = num_computed_tokens
        need = max(0, hits - num_computed_tokens)
        if hits >= len(tokens):  # vLLM computes the last token itself
            need = max(0, need - 1)
        return need, need > 0

    def update_state_after_alloc(self, request: Any, blocks: Any, num_external_tokens: int) -> None:
        tracker = self.trackers.get(request.request_id)
        if tracker is None:
            return
        groups = blocks.get_block_ids() if blocks is not None else ()
        if groups and groups[0]:
            tracker.block_ids = list(groups[0])
        if tracker.bypass or not tracker.looked_up:
            return
        self.adapter.cleanup_lookup_result(request.request_id)
        tracker.load_pending = num_external_tokens > 0
        # the prefix vLLM already holds needs no lock (all of it when nothing is loaded)
        free_end = tracker.hits if not tracker.load_pending else tracker.vllm_hits
        free_end = free_end // self.chunk_tokens * self.chunk_tokens
        if free_end > 0:
            self.adapter.free_lookup_locks(
                list(request.all_token_ids),
                0,
                free_end,
                request.request_id,
                cache_salt=request.cache_salt,
            )

    def build_connector_meta(self, scheduler_output: Any) -> list[Transfer]:
        transfers: list[Transfer] = []
        for new in scheduler_output.scheduled_new_reqs:
            tracker = self.trackers.get(new.req_id)
            if tracker is not None and new.block_ids:
                tracker.block_ids = list(new.block_ids[0])
        cached = scheduler_output.scheduled_cached_reqs
        resumed = set(self._resumed(cached))
        for rid, new_blocks in zip(cached.req_ids, cached.new_block_ids, strict=False):
            tracker = self.trackers.get(rid)
            if tracker is None or not new_blocks:
                continue
            if rid in resumed:
                tracker.block_ids = list(new_blocks[0])
            else:
                tracker.block_ids.extend(new_blocks[0])
        scheduled: Mapping[str, int] = scheduler_output.num_scheduled_tokens
        for rid, tracker in self.trackers.items():
            if tracker.load_pending:
                tracker.load_pending, tracker.loaded = False, True
                transfers.extend(self._retrieve(rid, tracker))
            if self.can_store and rid in scheduled:
                transfers.extend(self._store(rid, tracker, scheduled[rid]))
        return transfers

    def _retrieve(self, rid: str, tracker: _Tracker) -> list[Transfer]:
        chunk, block = self.chunk_tokens, self.block_size
        start = tracker.vllm_hits // chunk * chunk
        end = tracker.hits
        tracker.stored = max(tracker.stored, end)  # held by LMCache already
        if end <= start:
            return []
        req = tracker.request
        return [
            Transfer(
                rid,
                True,
                tuple(tracker.block_ids[start // block : end // block]),
                tuple(req.all_token_ids),
                start,
                end,
                tracker.vllm_hits - start,
                req.cache_salt,
            )
        ]

    def _store(self, rid: str, tracker: _Tracker, scheduled: int) -> list[Transfer]:
        req, chunk, block = tracker.request, self.chunk_tokens, self.block_size
        computed = req.num_computed_tokens + scheduled
        prompt = len(req.prompt_token_ids)
        end = min(computed, prompt, len(tracker.block_ids) * block) // chunk * chunk
        start = tracker.stored
        if end <= start:
            return []
        tracker.stored, tracker.sent = end, True
        return [
            Transfer(
                rid,
                False,
                tuple(tracker.block_ids[start // block : end // block]),
                tuple(req.all_token_ids),
                start,
                end,
                0,
                req.cache_salt,
            )
        ]

    def request_finished(self, request: Any, block_ids: Any) -> tuple[bool, dict[str, Any] | None]:
        rid = request.request_id
        tracker = self.trackers.pop(rid, None)
        self.adapter.cleanup_lookup_result(rid)
        self.adapter.end_session(rid)
        # blocks stay allocated until the workers report the stores of this request finished
        return bool(self.can_store and tracker is not None and tracker.sent), None


# --- the worker side ----------------------------------------------------------------------------


class WorkerCore:
    """The worker role over an :class:`~lmcache_compat.mp.MPWorkerAdapter`: builds the
    release's ops from the step's :class:`Transfer` records and submits them."""

    def __init__(self, adapter: Any, new_event: Callable[[], Any]) -> None:
        self.adapter = adapter
        self.new_event = new_event
        self._sending: set[str] = set()

    def _submit(self, transfers: Sequence[Transfer], retrieve: bool) -> None:
        chosen = [t for t in transfers if t.retrieve is retrieve]
        if not chosen:
            return
        make = self.adapter.make_load_store_op
        ops = [
            make(
                list(t.block_ids),
                list(t.token_ids),
                start=t.start,
                end=t.end,
                skip_first_n_tokens=t.skip_first_n_tokens,
            )
            for t in chosen
        ]
        submit = (
            self.adapter.batched_submit_retrieve_requests
            if retrieve
            else self.adapter.batched_submit_store_requests
        )
        ids = [t.request_id for t in chosen]
        salts = [t.cache_salt for t in chosen]
        submit(ids, ops, self.new_event(), cache_salts=salts if any(salts) else None)
        if not retrieve:
            self._sending.update(ids)

    def start_load(self, transfers: Sequence[Transfer]) -> None:
        self._submit(transfers, True)

    def save(self, transfers: Sequence[Transfer]) -> None:
        self._submit(transfers, False)

    def get_finished(self, finished_req_ids: set[str]) -> tuple[set[str] | None, set[str] | None]:
        # only requests this worker stored for are reported as sending (request_finished
        # answers True only for those)
        sending, receiving = self.adapter.get_finished(finished_req_ids & self._sending)
        if sending:
            self._sending.difference_update(sending)
        return sending, receiving
