"""``LMCacheCompatMPConnector``'s decisions without vLLM: the reference's keys read from its
source, the settings they give, and both roles over fakes with the MP adapters' surface
(``MPSchedulerAdapter`` / ``MPWorkerAdapter``: the names and keywords the connector calls)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from lmcache_compat.vllm.mp_plan import (
    SchedulerCore,
    Transfer,
    WorkerCore,
    reference_keys,
    settings_from_extra,
)

#: A reference connector's module, in the shape both references read their keys.
REFERENCE = """
class LMCacheMPConnector:
    def __init__(self, vllm_config):
        cfg = vllm_config.kv_transfer_config
        host = cfg.get_from_extra_config("lmcache.mp.host", "tcp://localhost")
        port = cfg.get_from_extra_config("lmcache.mp.port", 5555)
        timeout = float(cfg.get_from_extra_config("lmcache.mp.mq_timeout", 300.0))
        beat = float(cfg.get_from_extra_config("lmcache.mp.heartbeat_interval", 10.0))
        urls = cfg.get_from_extra_config("lmcache.mp.server_urls", None)
        other = cfg.kv_connector_extra_config.get("lmcache.mp.eager_prefetch", False)
        unrelated = {}.get("not.lmcache", 1)
"""


def test_keys_are_read_from_the_reference_source_with_its_defaults() -> None:
    keys = reference_keys(REFERENCE)
    assert keys == {
        "lmcache.mp.eager_prefetch": False,
        "lmcache.mp.heartbeat_interval": 10.0,
        "lmcache.mp.host": "tcp://localhost",
        "lmcache.mp.mq_timeout": 300.0,
        "lmcache.mp.port": 5555,
        "lmcache.mp.server_urls": None,
    }


def test_settings_take_the_reference_defaults_and_the_users_values() -> None:
    keys = reference_keys(REFERENCE)
    default = settings_from_extra({}, keys)
    assert default.server_urls == ("tcp://localhost:5555",)
    assert (default.mq_timeout, default.heartbeat_interval) == (300.0, 10.0)
    assert default.other_keys == ("lmcache.mp.eager_prefetch",)
    user = settings_from_extra({"lmcache.mp.host": "10.0.0.2", "lmcache.mp.port": 6000}, keys)
    assert user.server_urls == ("tcp://10.0.0.2:6000",)  # a URL is never split
    listed = settings_from_extra({"lmcache.mp.server_urls": "tcp://a:1, tcp://b:2"}, keys)
    assert listed.server_urls == ("tcp://a:1", "tcp://b:2")


def test_a_reference_without_the_in_tree_server_keys_gives_no_address() -> None:
    with pytest.raises(ValueError, match="reads no server address key"):
        settings_from_extra({}, {"lmcache.mp.eager_prefetch": False})


# --- the two roles over fakes ---------------------------------------------------------------


@dataclass
class FakeScheduler:
    """The calls ``SchedulerCore`` makes on an ``MPSchedulerAdapter``."""

    hits: dict[str, int | None]
    calls: list[tuple[Any, ...]] = field(default_factory=list)

    def num_blocks_per_chunk(self) -> int:
        return 2

    def lookup(self, request_id: str, token_ids: Any, block_hashes: Any = None, **kw: Any) -> None:
        self.calls.append(("lookup", request_id, len(token_ids), kw.get("cache_salt")))

    def check_lookup_result(self, request_id: str) -> int | None:
        return self.hits[request_id]

    def cleanup_lookup_result(self, request_id: str) -> None:
        self.calls.append(("cleanup", request_id))

    def free_lookup_locks(
        self, token_ids: Any, start: int, end: int, request_id: str, **kw: Any
    ) -> None:
        self.calls.append(("free", request_id, start, end, kw.get("cache_salt")))

    def end_session(self, request_id: str) -> None:
        self.calls.append(("end", request_id))


@dataclass
class Request:
    request_id: str
    prompt_token_ids: list[int]
    num_computed_tokens: int = 0
    cache_salt: str | None = None
    block_hashes: list[bytes] = field(default_factory=list)

    @property
    def all_token_ids(self) -> list[int]:
        return self.prompt_token_ids


@dataclass
class Blocks:
    ids: list[int]

    def get_block_ids(self) -> tuple[list[int], ...]:
        return (self.ids,)


@dataclass
class Cached:
    req_ids: list[str] = field(default_factory=list)
    new_block_ids: list[Any] = field(default_factory=list)


@dataclass
class Output:
    num_scheduled_tokens: dict[str, int]
    scheduled_new_reqs: list[Any] = field(default_factory=list)
    scheduled_cached_reqs: Cached = field(default_factory=Cached)


def _core(hits: dict[str, int | None], accepts_none: bool = True) -> SchedulerCore:
    return SchedulerCore(
        FakeScheduler(hits), 4, can_store=True, accepts_none=accepts_none, resumed=lambda c: ()
    )


def test_a_hit_is_an_async_load_of_the_blocks_beyond_vllms_prefix() -> None:
    core = _core({"r": 16})
    request = Request("r", list(range(20)))
    assert core.get_num_new_matched_tokens(request, 0) == (16, True)
    core.update_state_after_alloc(request, Blocks([10, 11, 12, 13, 14]), 16)
    (load,) = core.build_connector_meta(Output({}))
    assert (load.retrieve, load.block_ids, load.start, load.end) == (True, (10, 11, 12, 13), 0, 16)
    assert core.build_connector_meta(Output({})) == []  # a load is put in metadata once
    assert ("free", "r", 0, 0, None) not in core.adapter.calls  # nothing below vLLM's prefix


def test_a_pending_lookup_asks_again_later_and_a_miss_is_no_load() -> None:
    core = _core({"r": None, "m": 0})
    assert core.get_num_new_matched_tokens(Request("r", [1] * 8), 0) == (None, False)
    assert core.get_num_new_matched_tokens(Request("m", [1] * 8), 0) == (0, False)


def test_a_request_whose_load_failed_is_recomputed_without_lmcache() -> None:
    core = _core({"r": 16})
    request = Request("r", list(range(20)))
    core.get_num_new_matched_tokens(request, 0)
    core.update_state_after_alloc(request, Blocks([1, 2, 3, 4, 5]), 16)
    core.build_connector_meta(Output({}))
    request.num_computed_tokens = 0  # vLLM reset it after the failed load
    assert core.get_num_new_matched_tokens(request, 0) == (0, False)


def test_full_prompt_chunks_are_stored_once_and_hold_the_blocks_until_sent() -> None:
    core = _core({"r": 0})
    request = Request("r", list(range(20)))
    core.get_num_new_matched_tokens(request, 0)
    core.update_state_after_alloc(request, Blocks([]), 0)
    new = type("New", (), {"req_id": "r", "block_ids": ([7, 8, 9, 10, 11],)})()
    (store,) = core.build_connector_meta(Output({"r": 20}, [new]))
    assert (store.retrieve, store.block_ids, store.start, store.end) == (
        False,
        (7, 8, 9, 10),
        0,
        16,
    )
    request.num_computed_tokens = 20
    assert core.build_connector_meta(Output({"r": 1})) == []
    assert core.request_finished(request, []) == (True, None)


@dataclass
class FakeWorker:
    """The calls ``WorkerCore`` makes on an ``MPWorkerAdapter``."""

    submitted: list[tuple[str, list[str]]] = field(default_factory=list)

    def make_load_store_op(self, block_ids: Any, token_ids: Any, **kw: Any) -> tuple[Any, ...]:
        return (tuple(block_ids), kw["start"], kw["end"], kw["skip_first_n_tokens"])

    def batched_submit_retrieve_requests(self, ids: Any, ops: Any, event: Any, **kw: Any) -> None:
        self.submitted.append(("retrieve", list(ids)))

    def batched_submit_store_requests(self, ids: Any, ops: Any, event: Any, **kw: Any) -> None:
        self.submitted.append(("store", list(ids)))

    def get_finished(self, ids: set[str]) -> tuple[set[str], set[str]]:
        return set(ids), {"loaded"}


def test_the_worker_submits_each_direction_and_reports_only_its_own_stores() -> None:
    worker = FakeWorker()
    core = WorkerCore(worker, lambda: None)
    transfers = [
        Transfer("a", True, (1, 2), (0,) * 8, 0, 8),
        Transfer("b", False, (3, 4), (0,) * 8, 0, 8),
    ]
    core.start_load(transfers)
    core.save(transfers)
    assert worker.submitted == [("retrieve", ["a"]), ("store", ["b"])]
    assert core.get_finished({"b", "other"}) == ({"b"}, {"loaded"})
    assert core.get_finished({"b"}) == (set(), {"loaded"})


def test_locks_below_vllms_own_prefix_are_freed_and_the_lookup_goes_out_once() -> None:
    core = _core({"r": 16})
    request = Request("r", list(range(20)), cache_salt="tenant")
    assert core.get_num_new_matched_tokens(request, 8) == (8, True)
    assert core.get_num_new_matched_tokens(request, 8) == (8, True)
    core.update_state_after_alloc(request, Blocks([1, 2, 3, 4, 5]), 8)
    calls = core.adapter.calls
    assert [c for c in calls if c[0] == "lookup"] == [("lookup", "r", 20, "tenant")]
    assert ("free", "r", 0, 8, "tenant") in calls
    (load,) = core.build_connector_meta(Output({}))
    assert (load.start, load.end, load.skip_first_n_tokens, load.cache_salt) == (8, 16, 0, "tenant")
