"""Multi-process adapters over fakes generated from every matrix row that has them (0.3.13 on)."""

from __future__ import annotations

import inspect
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lmcache_compat import (
    Capability,
    MissingCapabilityError,
    MPConfig,
    MPSchedulerAdapter,
    MPWorkerAdapter,
    NotAnEngineError,
    UnsupportedArgumentError,
)
from lmcache_compat.core.roles import MP_SCHEDULER, MP_WORKER
from lmcache_compat.mp import mp_init_kwargs
from lmcache_compat.testing.fakes import set_result
from lmcache_compat.testing.faults import fail_loads
from lmcache_compat.upstream.matrix import ReleaseRow, load_matrix
from tests.support.strategies import mp_configs
from tools.generated_fakes import GeneratedEngine, fake_module, instantiate

MATRIX = load_matrix()
MP_ROWS = [r for r in MATRIX.rows if MP_SCHEDULER.name in r.surfaces]
MP_VERSIONS = [r.version for r in MP_ROWS]
CTX = object()


def _mod(version: str) -> Any:
    return fake_module(MATRIX.row(version))


def _scheduler(version: str, **options: Any) -> tuple[MPSchedulerAdapter, GeneratedEngine]:
    target = instantiate(_mod(version).LMCacheMPSchedulerAdapter)
    return MPSchedulerAdapter(target, **options), target


def _worker(version: str, **options: Any) -> tuple[MPWorkerAdapter, GeneratedEngine]:
    target = instantiate(_mod(version).LMCacheMPWorkerAdapter)
    return MPWorkerAdapter(target, **options), target


def _last(target: GeneratedEngine) -> tuple[str, tuple[Any, ...], dict[str, Any]]:
    return target._call_args[-1]


def test_mp_rows_start_at_0_3_13() -> None:
    assert MP_VERSIONS[0] == "0.3.13" and MP_VERSIONS[-1] == "0.5.7rc2"
    assert all(MATRIX.row(v).has(Capability.MP_ADAPTERS) for v in MP_VERSIONS)
    assert not MATRIX.row("0.3.12").has(Capability.MP_ADAPTERS)


@pytest.mark.parametrize("version", MP_VERSIONS)
def test_capabilities_match_the_row(version: str) -> None:
    row = MATRIX.row(version)
    sched, _ = _scheduler(version)
    worker, _ = _worker(version)
    for adapter, role in ((sched, MP_SCHEDULER), (worker, MP_WORKER)):
        for cap, present in adapter.capabilities.as_dict(role).items():
            spec = Capability(cap).spec
            if spec.also:  # shared rows: the matrix needs every owner
                continue
            assert present == row.has(cap), (version, cap)


# --- construction from the caller's facts ------------------------------------------------------


@pytest.mark.parametrize("version", MP_VERSIONS)
@pytest.mark.parametrize("role", ["LMCacheMPSchedulerAdapter", "LMCacheMPWorkerAdapter"])
def test_init_kwargs_bind_to_the_release_signature(version: str, role: str) -> None:
    mod = _mod(version)
    cls = getattr(mod, role)
    config = MPConfig("tcp://10.0.0.1:5555", "llama", 16, world_size=4, rank=3, tp_size=2)
    kwargs = mp_init_kwargs(
        cls, config, CTX, parallel_strategy_cls=getattr(mod, "ParallelStrategy", None)
    )
    inspect.signature(cls).bind(**kwargs)  # raises TypeError if the call would not bind
    obj = cls(**kwargs)
    assert obj._init[1]["context"] is CTX
    names = set(inspect.signature(cls).parameters)
    if "server_urls" in names:
        assert kwargs["server_urls"] == ["tcp://10.0.0.1:5555"]  # a list, never split
    else:
        assert kwargs["server_url"] == "tcp://10.0.0.1:5555"
    if "parallel_strategy" in names:
        ps = kwargs["parallel_strategy"]
        assert type(ps).__name__ == "ParallelStrategy"
        fields = vars(ps)
        for key, value in (
            ("vllm_world_size", 4),
            ("vllm_worker_id", 3),
            ("actual_world_size", 4),
            ("kv_world_size", 4),
            ("kv_worker_id", 3),
            ("tp_size", 2),
            ("pp_size", 1),
            ("n_servers", 1),
            ("dcp_size", 1),
        ):
            if key in fields:
                assert fields[key] == value, (version, key)
    else:
        assert (kwargs["world_size"], kwargs["kv_rank"]) == (4, 3)


def test_mla_divides_world_size_and_rank_for_old_releases() -> None:
    cls = _mod("0.4.2").LMCacheMPSchedulerAdapter
    config = MPConfig(["a:1"], "m", 16, world_size=8, rank=5, tp_size=4, use_mla=True)
    kwargs = mp_init_kwargs(cls, config, CTX)
    assert (kwargs["world_size"], kwargs["kv_rank"], kwargs["tp_size"]) == (2, 1, 4)
    with pytest.raises(UnsupportedArgumentError, match="tp_size"):
        mp_init_kwargs(_mod("0.3.14").LMCacheMPSchedulerAdapter, config, CTX)
    assert "tp_size" not in mp_init_kwargs(
        _mod("0.3.14").LMCacheMPSchedulerAdapter, config, CTX, allow={"tp_size"}
    )


def test_parallel_strategy_field_sets() -> None:
    config = MPConfig("u", "m", 16, world_size=4, rank=1, tp_size=4, pp_size=1, use_mla=True)
    seen = {}
    for version in ("0.4.4", "0.4.7", "0.5.0", "0.5.3", "0.5.5"):
        mod = _mod(version)
        kw = mp_init_kwargs(
            mod.LMCacheMPWorkerAdapter, config, CTX, parallel_strategy_cls=mod.ParallelStrategy
        )
        seen[version] = vars(kw["parallel_strategy"])
    assert seen["0.4.4"] == {
        "use_mla": True,
        "kv_world_size": 1,
        "kv_worker_id": 0,
        "actual_world_size": 4,
        "actual_worker_id": 1,
        "tp_size": 4,
        "pp_size": 1,
    }
    assert seen["0.4.7"] == {
        "use_mla": True,
        "vllm_world_size": 4,
        "vllm_worker_id": 1,
        "tp_size": 4,
        "pp_size": 1,
    }
    assert seen["0.5.0"] == {**seen["0.4.7"], "n_servers": 1}
    assert "mla_only" in seen["0.5.3"] and "use_mla" not in seen["0.5.3"]
    assert seen["0.5.5"]["dcp_size"] == 1


def test_several_servers() -> None:
    config = MPConfig(["tcp://a:1", "tcp://b:1"], "m", 16, world_size=4, rank=3)
    mod = _mod("0.5.6")
    kw = mp_init_kwargs(
        mod.LMCacheMPSchedulerAdapter, config, CTX, parallel_strategy_cls=mod.ParallelStrategy
    )
    assert kw["server_urls"] == ["tcp://a:1", "tcp://b:1"]
    assert kw["parallel_strategy"].n_servers == 2
    kw = mp_init_kwargs(
        mod.LMCacheMPWorkerAdapter, config, CTX, parallel_strategy_cls=mod.ParallelStrategy
    )
    assert kw["server_url"] == "tcp://b:1"  # ranks 2-3 live on the second node
    old = _mod("0.4.7")
    with pytest.raises(UnsupportedArgumentError, match="server_urls") as info:
        mp_init_kwargs(
            old.LMCacheMPSchedulerAdapter, config, CTX, parallel_strategy_cls=old.ParallelStrategy
        )
    assert "pip install -U 'lmcache>=0.5.0'" in str(info.value)
    kw = mp_init_kwargs(
        old.LMCacheMPSchedulerAdapter,
        config,
        CTX,
        parallel_strategy_cls=old.ParallelStrategy,
        allow={"server_urls"},
    )
    assert kw["server_url"] == "tcp://a:1"


def test_a_url_string_is_never_split() -> None:
    config = MPConfig("tcp://host:5555", "m", 16)
    assert config.urls == ("tcp://host:5555",)
    with pytest.raises(ValueError, match="server_urls"):
        MPConfig([], "m", 16)
    with pytest.raises(TypeError):
        MPConfig(b"tcp://x", "m", 16)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"block_size": 0}, "block_size"),
        ({"rank": 4, "world_size": 4}, "rank"),
        ({"world_size": 6, "tp_size": 4, "use_mla": True}, "use_mla"),
        ({"tp_size": True}, "tp_size"),
    ],
)
def test_bad_config_is_a_clear_error(kwargs: dict[str, Any], match: str) -> None:
    base: dict[str, Any] = {"server_urls": "u", "model_name": "m", "block_size": 16}
    with pytest.raises(ValueError, match=match):
        MPConfig(**{**base, **kwargs})


def test_timeouts_extra_config_and_kv_events() -> None:
    config = MPConfig(
        "u",
        "m",
        16,
        mq_timeout=5.0,
        heartbeat_interval=1.0,
        extra_config={"k": 1},
        enable_kv_events=True,
    )
    new = _mod("0.5.6")
    kw = mp_init_kwargs(
        new.LMCacheMPWorkerAdapter, config, CTX, parallel_strategy_cls=new.ParallelStrategy
    )
    assert (
        kw["mq_timeout"],
        kw["heartbeat_interval"],
        kw["extra_config"],
        kw["enable_kv_events"],
    ) == (5.0, 1.0, {"k": 1}, True)
    mid = _mod("0.4.5")
    with pytest.raises(UnsupportedArgumentError, match="extra_config"):
        mp_init_kwargs(
            mid.LMCacheMPWorkerAdapter, config, CTX, parallel_strategy_cls=mid.ParallelStrategy
        )
    kw = mp_init_kwargs(
        mid.LMCacheMPWorkerAdapter,
        config,
        CTX,
        parallel_strategy_cls=mid.ParallelStrategy,
        allow={"extra_config"},
    )
    assert "extra_config" not in kw and "enable_kv_events" not in kw  # kv events: safe to drop
    old = _mod("0.3.13")
    kw = mp_init_kwargs(old.LMCacheMPWorkerAdapter, MPConfig("u", "m", 16, mq_timeout=5.0), CTX)
    assert "mq_timeout" not in kw  # timing only: dropped


def test_create_builds_and_wraps() -> None:
    mod = _mod("0.5.6")
    adapter = MPSchedulerAdapter.create(CTX, MPConfig("tcp://h:1", "m", 16), module=mod)
    assert adapter.target._init[1]["server_urls"] == ["tcp://h:1"]
    worker = MPWorkerAdapter.create(CTX, MPConfig("tcp://h:1", "m", 16), module=mod)
    assert worker.target._init[1]["server_url"] == "tcp://h:1"


@settings(max_examples=150, deadline=None)
@given(
    config=mp_configs,
    version=st.sampled_from(MP_VERSIONS),
    role=st.sampled_from([MP_SCHEDULER.name, MP_WORKER.name]),
    allow_all=st.booleans(),
)
def test_any_facts_bind_or_fail_clearly(
    config: MPConfig, version: str, role: str, allow_all: bool
) -> None:
    mod = _mod(version)
    cls = getattr(mod, role)
    try:
        kwargs = mp_init_kwargs(
            cls,
            config,
            CTX,
            parallel_strategy_cls=getattr(mod, "ParallelStrategy", None),
            allow=allow_all,
        )
    except UnsupportedArgumentError as exc:
        assert not allow_all
        assert "HINT: pip install -U 'lmcache>=" in str(exc)
        return
    inspect.signature(cls).bind(**kwargs)
    url_param = "server_urls" if "server_urls" in kwargs else "server_url"
    if url_param == "server_urls":
        assert kwargs[url_param] == list(config.urls)
    else:
        assert kwargs[url_param] in config.urls


# --- calls ---------------------------------------------------------------------------------------


def test_lookup_by_block_hashes_on_0_3_13_and_token_ids_after() -> None:
    sched, target = _scheduler("0.3.13")
    sched.lookup("r1", [1, 2, 3], block_hashes=["h1"])
    assert _last(target) == (
        "maybe_submit_lookup_request",
        (),
        {"request_id": "r1", "block_hashes": ["h1"]},
    )
    with pytest.raises(TypeError, match="block_hashes"):
        sched.lookup("r1", [1, 2, 3])
    sched, target = _scheduler("0.3.14")
    sched.lookup("r1", [1, 2, 3], block_hashes=["h1"])
    assert _last(target)[2] == {"request_id": "r1", "token_ids": [1, 2, 3]}


@pytest.mark.parametrize("version", MP_VERSIONS)
def test_cache_salt_is_never_silently_dropped(version: str) -> None:
    sched, target = _scheduler(version)
    has_salt = MATRIX.row(version).has(Capability.MP_CACHE_SALT)
    kwargs = {"block_hashes": ["h"]} if version == "0.3.13" else {}
    if has_salt:
        sched.lookup("r", [1, 2], cache_salt="tenant-a", **kwargs)
        assert _last(target)[2]["cache_salt"] == "tenant-a"
    else:
        with pytest.raises(UnsupportedArgumentError, match="mix tenants") as info:
            sched.lookup("r", [1, 2], cache_salt="tenant-a", **kwargs)
        assert info.value.argument == "cache_salt"
        allowed, target2 = _scheduler(version, allow={"cache_salt"})
        allowed.lookup("r", [1, 2], cache_salt="tenant-a", **kwargs)
        assert "cache_salt" not in _last(target2)[2]
    sched.lookup("r", [1, 2], cache_salt="", **kwargs)  # empty salt: nothing to keep apart
    assert _last(target)[2].get("cache_salt", "") == ""  # the releases' own default


def test_reserve_last_token_is_emulated_before_0_5_6() -> None:
    sched, target = _scheduler("0.5.5")
    sched.lookup("r", [1, 2, 3, 4], reserve_last_token=True)
    assert _last(target)[2] == {"request_id": "r", "token_ids": [1, 2, 3]}
    sched, target = _scheduler("0.5.6")
    sched.lookup("r", [1, 2, 3, 4], reserve_last_token=True)
    passed = _last(target)[2]
    assert passed["token_ids"] == [1, 2, 3, 4] and passed["reserve_last_token"] is True
    sched, _ = _scheduler("0.3.13")
    with pytest.raises(UnsupportedArgumentError, match="reserve_last_token"):
        sched.lookup("r", [1, 2], block_hashes=["h"], reserve_last_token=True)


def test_request_configs() -> None:
    sched, target = _scheduler("0.5.5")
    sched.lookup("r", [1], request_configs={"lmcache.tag": "x"})
    assert _last(target)[2]["request_configs"] == {"lmcache.tag": "x"}
    sched, _ = _scheduler("0.5.4")
    with pytest.raises(UnsupportedArgumentError, match="request_configs"):
        sched.lookup("r", [1], request_configs={"lmcache.tag": "x"})


def test_scheduler_fallbacks_on_0_3_13() -> None:
    sched, target = _scheduler("0.3.13")
    assert sched.is_healthy() is True  # unknown: documented as healthy
    assert sched.end_session("r") is None  # type: ignore[func-returns-value]
    assert sched.free_lookup_locks([1], 0, 1, "r") is None  # type: ignore[func-returns-value]
    assert sched.report_block_allocations([]) is None  # type: ignore[func-returns-value]
    assert sched.shutdown() is None  # type: ignore[func-returns-value]
    assert sched.reset_cache() is False
    assert target._calls == []
    assert sched.check_lookup_result("r") == 0  # the release's own
    assert target._calls == ["check_lookup_result"]


def test_scheduler_present_methods_on_0_5_6() -> None:
    sched, target = _scheduler("0.5.6")
    assert sched.is_healthy() is True  # the property, evaluated per call
    sched.end_session("r")
    sched.free_lookup_locks([1], 0, 1, "r", cache_salt="s", request_configs={"a": 1})
    assert _last(target) == (
        "free_lookup_locks",
        (),
        {
            "token_ids": [1],
            "start": 0,
            "end": 1,
            "request_id": "r",
            "cache_salt": "s",
            "request_configs": {"a": 1},
        },
    )
    set_result(target, "reset_cache", True)
    assert sched.reset_cache() is True
    sched.shutdown()
    assert target._calls[-1] == "shutdown"


def test_free_lookup_locks_salt_on_0_4_1() -> None:
    sched, _ = _scheduler("0.4.1")
    with pytest.raises(UnsupportedArgumentError, match="cache_salt"):
        sched.free_lookup_locks([1], 0, 1, "r", cache_salt="s")


def test_worker_register_kv_caches_groups_and_hints() -> None:
    worker, target = _worker("0.4.6")
    worker.register_kv_caches({"l": 1}, engine_group_infos=["g0"], layout_hints="NHD")
    assert _last(target)[2] == {"kv_caches": {"l": 1}}  # one group and hints: dropped safely
    with pytest.raises(UnsupportedArgumentError, match="engine_group_infos"):
        worker.register_kv_caches({"l": 1}, engine_group_infos=["g0", "g1"])
    worker, target = _worker("0.5.6")
    worker.register_kv_caches({"l": 1}, engine_group_infos=["g0", "g1"], layout_hints="NHD")
    assert _last(target)[2] == {
        "kv_caches": {"l": 1},
        "engine_group_infos": ["g0", "g1"],
        "layout_hints": "NHD",
    }


def test_worker_submits_with_salts() -> None:
    worker, target = _worker("0.5.6")
    worker.submit_store_request("r", "op", "ev", cache_salt="s", request_configs={"x": 1})
    assert _last(target)[2] == {
        "request_id": "r",
        "op": "op",
        "event": "ev",
        "cache_salt": "s",
        "request_configs": {"x": 1},
    }
    worker.batched_submit_retrieve_requests(["a", "b"], ["o1", "o2"], "ev", cache_salts=["s", "t"])
    assert _last(target)[2]["cache_salts"] == ["s", "t"]
    worker.batched_submit_retrieve_requests(["a"], ["o1"], "ev", cache_salts=[None])
    assert "cache_salts" not in _last(target)[2]  # nothing salted: nothing to keep apart
    old, _ = _worker("0.4.2")
    with pytest.raises(UnsupportedArgumentError, match="cache_salt"):
        old.batched_submit_store_requests(["a"], ["o"], "ev", cache_salts=["s"])


def test_load_store_op_shapes() -> None:
    w13, _ = _worker("0.3.13")
    op = w13.make_load_store_op([4, 5], block_hashes=[b"h"])
    assert (op.block_hashes, op.block_ids) == ([b"h"], [4, 5])
    w14, _ = _worker("0.3.14")
    op = w14.make_load_store_op([[4, 5]], [1, 2, 3])  # one group given nested: flattened
    assert (op.token_ids, op.block_ids, op.start, op.end) == ([1, 2, 3], [4, 5], 0, 3)
    with pytest.raises(UnsupportedArgumentError, match="skip_first_n_tokens"):
        w14.make_load_store_op([4], [1], skip_first_n_tokens=2)
    with pytest.raises(UnsupportedArgumentError, match="block_ids"):
        w14.make_load_store_op([[1], [2]], [1])
    w46, _ = _worker("0.4.6")
    assert w46.make_load_store_op([4], [1], skip_first_n_tokens=2).skip_first_n_tokens == 2
    w47, _ = _worker("0.4.7")
    assert w47.make_load_store_op([4, 5], [1, 2]).block_ids == [[4, 5]]  # 0.4.7: per group
    assert w47.make_load_store_op([[1], [2]], [1, 2]).block_ids == [[1], [2]]


@pytest.mark.parametrize("version", MP_VERSIONS)
def test_worker_optional_methods(version: str) -> None:
    worker, target = _worker(version)
    row = MATRIX.row(version)
    fail_loads(target, {3, 7})
    errors = worker.get_block_ids_with_load_errors()
    assert errors == ({3, 7} if row.has(Capability.MP_LOAD_ERROR_REPORTING) else set())
    assert worker.get_kv_events() == []
    assert worker.get_failed_request_ids() == set()
    assert worker.is_healthy() is True
    worker.handle_preemptions(True)
    if row.has(Capability.MP_LAZY_OFFLOAD):
        assert worker.get_finished_with_lazy_offload() == (set(), set())
    else:
        with pytest.raises(MissingCapabilityError, match=r"lmcache>=0\.5\.4"):
            worker.get_finished_with_lazy_offload()


def test_require_and_strict() -> None:
    with pytest.raises(MissingCapabilityError, match="mp_kv_events"):
        _worker("0.5.5", require=[Capability.MP_KV_EVENTS])
    strict, _ = _worker("0.5.5", strict=True)
    with pytest.raises(MissingCapabilityError):
        strict.get_kv_events()


def test_wrong_kind_of_object() -> None:
    with pytest.raises(NotAnEngineError, match="LMCacheMPWorkerAdapter"):
        MPWorkerAdapter(object())
    with pytest.raises(TypeError, match="unexpected keyword argument"):
        MPSchedulerAdapter(instantiate(_mod("0.5.6").LMCacheMPSchedulerAdapter), bogus=1)  # type: ignore[call-arg]


def _rows_with(cap: Capability) -> list[ReleaseRow]:
    return [r for r in MP_ROWS if r.has(cap)]


def test_every_mp_capability_appears_in_some_release() -> None:
    for cap in Capability:
        if cap.value.startswith("mp_"):
            assert _rows_with(cap), cap


def test_signature_probes_are_cached_per_function() -> None:
    from lmcache_compat.core.signatures import facts_of

    cls = _mod("0.5.6").LMCacheMPSchedulerAdapter
    a: Any = instantiate(cls)
    b: Any = instantiate(cls)
    facts = facts_of(cls.maybe_submit_lookup_request)
    assert facts_of(a.maybe_submit_lookup_request) is facts  # bound method: its function
    assert facts_of(b.maybe_submit_lookup_request) is facts  # not per instance
    assert [p.name for p in facts.params or ()][:2] == ["request_id", "token_ids"]
