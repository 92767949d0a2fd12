"""Run beside real vLLM with one LMCache release (0.3.13+) first on ``PYTHONPATH``: check that
every call the MP adapters would make binds to the real classes' signatures, with real
``ParallelStrategy``/``LoadStoreOp`` dataclasses, and no server opened. Where the release takes
packed token ids (0.5.7rc2), the bytes handed to it must be exactly what its own codec packs
(and unpack, with its own codec, to the caller's ids).

    python tests/tiers/real/mp_binding.py  ->  one JSON summary on the last line of stdout
"""

from __future__ import annotations

import importlib
import inspect
import json
import sys
import traceback
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from lmcache_compat import MPConfig, UnsupportedArgumentError
from lmcache_compat.core.arguments import Downgrades
from lmcache_compat.core.signatures import facts_of
from lmcache_compat.core.tokens import TokenParameter, token_parameter
from lmcache_compat.mp import mp_init_kwargs
from lmcache_compat.mp.scheduler_calls import free_lookup_locks_call, lookup_call
from lmcache_compat.mp.worker_calls import (
    load_store_op_factory,
    register_kv_caches_call,
    submit_call,
)
from lmcache_compat.upstream import locations as loc
from lmcache_compat.upstream.resolve import where
from tests.support.strategies import mp_configs

IDS = [1, 2, 3, 70_000, 2**32 - 1]

SUMMARY: dict[str, Any] = {"bound": 0, "refused": 0, "errors": []}


def _bind(func: Any, *args: Any, **kwargs: Any) -> None:
    inspect.signature(func).bind(*args, **kwargs)  # TypeError if the call would not bind
    SUMMARY["bound"] += 1


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        self.calls.append((args, kwargs))


def check_init(mod: Any, config: MPConfig, allow: Any = ()) -> None:
    for role in ("LMCacheMPSchedulerAdapter", "LMCacheMPWorkerAdapter"):
        cls = getattr(mod, role)
        try:
            kwargs = mp_init_kwargs(
                cls,
                config,
                object(),
                parallel_strategy_cls=getattr(mod, "ParallelStrategy", None),
                allow=allow,
            )
        except UnsupportedArgumentError:
            SUMMARY["refused"] += 1
            continue
        _bind(cls, **kwargs)
        ps = kwargs.get("parallel_strategy")
        if ps is not None:
            assert type(ps) is mod.ParallelStrategy  # the release's own dataclass, built


def _codec(mod: Any, packed: bool) -> tuple[Any, Any]:
    """The release's own ``pack_token_ids`` (the one the MP adapter binds: from the adapter's
    module if it imports it, else from its codec module) and ``unpack_token_ids`` beside it."""
    if not packed:
        return None, None
    from lmcache_compat.mp.adapters import _release_packer
    from lmcache_compat.upstream.resolve import find

    pack = _release_packer(mod.LMCacheMPSchedulerAdapter, True)
    assert pack is find(loc.PACK_TOKEN_IDS), "not the release's own codec"
    codec = importlib.import_module(pack.__module__)
    SUMMARY["codec"] = codec.__name__
    return pack, codec.unpack_token_ids


def _check_packed(value: Any, pack: Any, unpack: Any, ids: list[int]) -> None:
    assert isinstance(value, bytes), type(value)
    assert value == pack(ids), "not the release's own packing"
    assert unpack(value) == ids, "the release's codec does not read back the caller's ids"
    SUMMARY["packed_checked"] = SUMMARY.get("packed_checked", 0) + 1


def check_calls(mod: Any) -> None:
    allow_all = Downgrades(True, "real", None)
    sched = mod.LMCacheMPSchedulerAdapter
    lookup_facts = facts_of(sched.maybe_submit_lookup_request)
    found = token_parameter(lookup_facts)
    packed = isinstance(found, TokenParameter) and found.encoding == "packed"
    SUMMARY["packed"] = packed
    pack, unpack = _codec(mod, packed)
    rec = Recorder()
    lookup = lookup_call(rec, lookup_facts, allow_all, pack, "no codec")
    for kwargs in (
        {},
        {"cache_salt": "s"},
        {"request_configs": {"a": 1}},
        {"reserve_last_token": True},
        {"start": 16},
    ):
        try:
            lookup("r", list(IDS), block_hashes=["h"], **kwargs)
        except UnsupportedArgumentError:
            SUMMARY["refused"] += 1
    for args, kwargs in rec.calls:
        _bind(sched.maybe_submit_lookup_request, None, *args, **kwargs)
        bound = inspect.signature(sched.maybe_submit_lookup_request).bind(None, *args, **kwargs)
        if packed:
            assert isinstance(found, TokenParameter)
            _check_packed(bound.arguments[found.name], pack, unpack, IDS)
    if hasattr(sched, "free_lookup_locks"):
        rec = Recorder()
        free_facts = facts_of(sched.free_lookup_locks)
        free = free_lookup_locks_call(rec, free_facts, allow_all, pack, "no codec")
        free(list(IDS), 0, 1, "r", cache_salt="s", request_configs={"a": 1}, extra_ranges=[(1, 2)])
        for args, kwargs in rec.calls:
            _bind(sched.free_lookup_locks, None, *args, **kwargs)
            bound = inspect.signature(sched.free_lookup_locks).bind(None, *args, **kwargs)
            if packed:
                _check_packed(bound.arguments[free_facts.names[0]], pack, unpack, IDS)
    worker = mod.LMCacheMPWorkerAdapter
    for name, batched in (
        ("submit_store_request", False),
        ("submit_retrieve_request", False),
        ("batched_submit_store_requests", True),
        ("batched_submit_retrieve_requests", True),
    ):
        rec = Recorder()
        submit = submit_call(rec, facts_of(getattr(worker, name)), allow_all, batched=batched)
        if batched:
            submit(["r"], ["op"], "ev", cache_salts=["s"], request_configs_list=[{"a": 1}])
        else:
            submit("r", "op", "ev", cache_salt="s", request_configs={"a": 1})
        for args, kwargs in rec.calls:
            _bind(getattr(worker, name), None, *args, **kwargs)
    rec = Recorder()
    register = register_kv_caches_call(rec, facts_of(worker.register_kv_caches), allow_all)
    register({"l": 1}, engine_group_infos=["g0"], layout_hints=None)
    for args, kwargs in rec.calls:
        _bind(worker.register_kv_caches, None, *args, **kwargs)
    make_op = load_store_op_factory(mod.LoadStoreOp, allow_all, pack, "no codec")
    op = make_op([4, 5], list(IDS), block_hashes=[b"h1", b"h2"], skip_first_n_tokens=1)
    assert type(op) is mod.LoadStoreOp
    fields = dict(vars(op))
    if packed:
        (token_field,) = [k for k, v in fields.items() if isinstance(v, bytes)]
        _check_packed(fields[token_field], pack, unpack, IDS)
    SUMMARY["load_store_op"] = fields


def main() -> int:
    mod = importlib.import_module(where(loc.MP_SCHEDULER)[0])
    SUMMARY["module"] = mod.__file__

    @settings(max_examples=200, deadline=None, database=None)
    @given(config=mp_configs, allow=st.sampled_from([(), True]))
    def any_facts(config: MPConfig, allow: Any) -> None:
        check_init(mod, config, allow)

    try:
        check_init(mod, MPConfig("tcp://h:1", "m", 16))
        check_init(
            mod, MPConfig(["tcp://a:1", "tcp://b:1"], "m", 16, world_size=4, rank=3, tp_size=2)
        )
        any_facts()
        check_calls(mod)
    except Exception:  # report, the parent test fails on it
        SUMMARY["errors"].append(traceback.format_exc())
    print(json.dumps(SUMMARY, default=repr))
    return 0


if __name__ == "__main__":
    sys.exit(main())
