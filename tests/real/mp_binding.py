"""Run beside real vLLM with one LMCache release (0.3.13+) first on ``PYTHONPATH``: check that
every call the MP adapters would make binds to the real classes' signatures, with real
``ParallelStrategy``/``LoadStoreOp`` dataclasses, and no server opened.

    python tests/real/mp_binding.py  ->  one JSON summary on the last line of stdout
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
from lmcache_compat.mp import MP_MODULE, mp_init_kwargs
from lmcache_compat.version_specific import (
    Downgrades,
    load_store_op_factory,
    mp_free_lookup_locks,
    mp_lookup,
    mp_register_kv_caches,
    mp_submit,
)
from tests.strategies import mp_configs

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


def check_calls(mod: Any) -> None:
    allow_all = Downgrades(True, "real", None)
    sched = mod.LMCacheMPSchedulerAdapter
    rec = Recorder()
    lookup = mp_lookup(rec, allow_all, signature_of=sched.maybe_submit_lookup_request)
    for kwargs in (
        {},
        {"cache_salt": "s"},
        {"request_configs": {"a": 1}},
        {"reserve_last_token": True},
    ):
        try:
            lookup("r", [1, 2, 3], block_hashes=["h"], **kwargs)
        except UnsupportedArgumentError:
            SUMMARY["refused"] += 1
    for args, kwargs in rec.calls:
        _bind(sched.maybe_submit_lookup_request, None, *args, **kwargs)
    if hasattr(sched, "free_lookup_locks"):
        rec = Recorder()
        free = mp_free_lookup_locks(rec, allow_all, signature_of=sched.free_lookup_locks)
        free([1], 0, 1, "r", cache_salt="s", request_configs={"a": 1})
        for args, kwargs in rec.calls:
            _bind(sched.free_lookup_locks, None, *args, **kwargs)
    worker = mod.LMCacheMPWorkerAdapter
    for name, batched in (
        ("submit_store_request", False),
        ("submit_retrieve_request", False),
        ("batched_submit_store_requests", True),
        ("batched_submit_retrieve_requests", True),
    ):
        rec = Recorder()
        submit = mp_submit(rec, allow_all, batched=batched, signature_of=getattr(worker, name))
        if batched:
            submit(["r"], ["op"], "ev", cache_salts=["s"], request_configs_list=[{"a": 1}])
        else:
            submit("r", "op", "ev", cache_salt="s", request_configs={"a": 1})
        for args, kwargs in rec.calls:
            _bind(getattr(worker, name), None, *args, **kwargs)
    rec = Recorder()
    register = mp_register_kv_caches(rec, allow_all, signature_of=worker.register_kv_caches)
    register({"l": 1}, engine_group_infos=["g0"], layout_hints=None)
    for args, kwargs in rec.calls:
        _bind(worker.register_kv_caches, None, *args, **kwargs)
    make_op = load_store_op_factory(mod.LoadStoreOp, allow_all)
    op = make_op([4, 5], [1, 2, 3], block_hashes=[b"h1", b"h2"], skip_first_n_tokens=1)
    assert type(op) is mod.LoadStoreOp
    SUMMARY["load_store_op"] = dict(vars(op))


def main() -> int:
    mod = importlib.import_module(MP_MODULE)
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
