"""What the vLLM connector binds and converts (``lmcache_compat/vllm/decisions.py``), decided
without vLLM: facts of each vLLM generation built by hand, engines from the release fakes."""

from __future__ import annotations

import dataclasses
import logging
from typing import Any
from unittest import mock

import pytest

from lmcache_compat import Capability, NotAnEngineError
from lmcache_compat.core import fallbacks
from lmcache_compat.core.catalog import pass_through
from lmcache_compat.core.roles import CONNECTOR
from lmcache_compat.vllm.decisions import (
    CONVERTERS,
    PartialEngine,
    absent_warnings,
    decide,
    engine_binder,
    engine_binding,
    forwarded,
    no_events,
)
from lmcache_compat.vllm.facts import SLEEP_HOOKS, VllmFacts, accepts_bytes, count_admits_none
from tests.support.fakes import Fake_0_3_0, Fake_0_3_6, Fake_0_3_9_post1, Fake_0_3_13, Fake_0_5_6

_CORE = {name for name, _ in CONNECTOR.core}
_BASE = _CORE | {
    "get_finished",
    "request_finished",
    "shutdown",
    "register_kv_caches",
    "get_block_ids_with_load_errors",
    "update_connector_output",
    "take_events",
}


@dataclasses.dataclass(frozen=True)
class Stored:
    block_hashes: list[Any]
    parent_block_hash: Any
    token_ids: list[int]
    block_size: int
    lora_id: Any
    medium: Any
    lora_name: Any = None


#: vLLM 0.11.0: two-argument base, no connector events, no failed-load path.
V011 = VllmFacts(
    base_takes_kv_cache_config=False,
    accepts_none_matched=True,
    connector_events=False,
    block_stored=None,
    block_stored_fields=(),
    block_removed=None,
    block_removed_fields=(),
    hashes_accept_bytes=False,
    load_failure_path=False,
    base_methods=frozenset(_BASE),
)
#: vLLM 0.13.0 ... 0.32.0: connector events, failed-load path.
V013 = dataclasses.replace(
    V011,
    base_takes_kv_cache_config=True,
    connector_events=True,
    block_stored=Stored,
    block_stored_fields=tuple(
        (f.name, f.default is dataclasses.MISSING) for f in dataclasses.fields(Stored)
    ),
    hashes_accept_bytes=True,
    load_failure_path=True,
    base_methods=frozenset(_BASE | {"get_kv_connector_kv_cache_events"}),
)
#: vLLM 0.33.0: sleep-mode hooks.
V033 = dataclasses.replace(
    V013, sleep_hooks=SLEEP_HOOKS, base_methods=V013.base_methods | set(SLEEP_HOOKS)
)
#: A vLLM before 0.10.2: get_num_new_matched_tokens cannot answer "ask again later".
NO_NONE = dataclasses.replace(V013, accepts_none_matched=False)


def _events(getter: Any) -> Any:
    def collect() -> Any:
        return [("converted", e) for e in getter()] or None

    return collect


def _plan(engine: Any, facts: VllmFacts, native: bool = False) -> Any:
    binding = engine_binding(engine, require_engine=False)
    return decide(binding, engine, facts, native=native, events=_events)


def test_forwarded_methods_come_from_the_role_and_the_catalog() -> None:
    names = forwarded(V013)
    converted = {engine_name for engine_name, _ in CONVERTERS.values()}
    assert set(names) == (_CORE | {s.method for s in pass_through(CONNECTOR)}) & set(
        V013.base_methods
    ) - converted - {"shutdown"}
    assert "get_inference_info" not in names  # vLLM calls no such method: not forwarded
    assert "get_kv_events" not in names  # converted, under vLLM's own name


def test_the_newest_release_is_bound_to_its_own_methods() -> None:
    engine = Fake_0_5_6()
    plan = _plan(engine, V033)
    for name in ("wait_for_layer_load", "save_kv_layer", "get_finished", "request_finished"):
        assert plan.calls[name] == getattr(engine, name), name  # the engine's bound method
    assert plan.calls["register_kv_caches"] == engine.register_kv_caches
    assert plan.calls["get_num_new_matched_tokens"]("req", 0) == (None, False)
    plan.calls["update_state_after_alloc"]("req", "blocks", 16)
    assert engine._calls[-1] == ("update_state_after_alloc", ("req", 16))  # blocks dropped
    engine._events.append("e1")
    assert plan.calls["get_kv_connector_kv_cache_events"]() == [("converted", "e1")]
    assert plan.warnings == ()


def test_the_oldest_release_gets_the_catalog_fallbacks_and_a_warning() -> None:
    engine = Fake_0_3_0()
    plan = _plan(engine, V013)
    assert plan.calls["get_finished"].__func__ is fallbacks.no_finished
    assert plan.calls["get_block_ids_with_load_errors"].__func__ is fallbacks.no_load_errors
    assert plan.calls["get_kv_connector_kv_cache_events"] is no_events
    text = "; ".join(plan.warnings)
    for spec in (Capability.GET_FINISHED.spec, Capability.LOAD_ERROR_REPORTING.spec):
        assert spec.impact in text and f"first release with it: {spec.since}" in text
    assert Capability.REGISTER_KV_CACHES.spec.impact not in text  # warn_absent=False


def test_the_kv_caches_are_handed_to_releases_without_register_kv_caches() -> None:
    engine: Any = Fake_0_3_9_post1()
    engine.kv_caches = {}
    register = _plan(engine, V013).calls["register_kv_caches"]
    register({"layer.0": "tensor"})
    register({"layer.0": "other"})  # once, like the release's own discovery
    assert engine.kv_caches == {"layer.0": "tensor"}
    bare = Fake_0_3_9_post1()  # nowhere to put them: the catalog's no-op
    assert _plan(bare, V013).calls["register_kv_caches"].__func__ is fallbacks.noop_register


def test_a_vllm_that_cannot_take_none_gets_zero_for_a_pending_lookup() -> None:
    matched = _plan(Fake_0_3_6(), NO_NONE).calls["get_num_new_matched_tokens"]
    assert matched("req", 0) == (0, False)
    assert "never returns None" not in "; ".join(_plan(Fake_0_3_0(), NO_NONE).warnings)


def test_a_vllm_without_connector_events_asks_for_none() -> None:
    plan = _plan(Fake_0_5_6(), V011)
    assert plan.calls["get_kv_connector_kv_cache_events"] is no_events
    assert plan.calls["update_connector_output"](object()) is None
    text = "; ".join(plan.warnings)
    assert "never asks the connector for failed loads; first vLLM with it: 0.11.2" in text


def test_warnings_name_only_what_this_vllm_would_use() -> None:
    binding = engine_binding(Fake_0_3_0(), require_engine=True)
    with_events = absent_warnings(binding, V013, native=False)
    without = absent_warnings(binding, V011, native=False)
    kv = Capability.KV_EVENTS.spec.impact
    assert any(kv in t for t in with_events) and not any(kv in t for t in without)
    native = absent_warnings(binding, V013, native=True)
    assert any("LMCache's own adapter has it from" in t for t in native)


def test_sleep_hooks_are_bound_where_the_engine_and_vllm_have_them() -> None:
    class Sleeper(Fake_0_5_6):
        def unregister_kv_caches(self) -> None: ...

        def restore_kv_caches(self) -> None: ...

    engine = Sleeper()
    plan = _plan(engine, V033)
    assert plan.calls["unregister_kv_caches"] == engine.unregister_kv_caches
    assert "unregister_kv_caches" not in _plan(engine, V013).calls
    assert "unregister_kv_caches" not in _plan(Fake_0_5_6(), V033).calls


def test_the_engine_binder_resets_layerwise_state_or_binds_the_hook() -> None:
    engine: Any = Fake_0_5_6()
    engine.current_layer = 3
    engine.layerwise_retrievers = ["r"]
    reset = engine_binder(engine)
    reset("meta")
    assert (engine.current_layer, engine.layerwise_retrievers) == (0, [])
    assert engine.layerwise_storers == []

    class Hooked(Fake_0_5_6):
        def bind_connector_metadata(self, metadata: Any) -> None:
            self.seen = metadata

    hooked = Hooked()
    engine_binder(hooked)("meta")
    assert hooked.seen == "meta"


def test_a_test_double_is_bound_partially() -> None:
    double = mock.MagicMock()
    del double.build_connector_meta
    partial = engine_binding(double, require_engine=False)
    assert isinstance(partial, PartialEngine)
    assert partial.missing_core == ("build_connector_meta",)
    with pytest.raises(NotAnEngineError, match="build_connector_meta"):
        partial.build_connector_meta("out")
    plan = decide(partial, double, V013, native=False, events=_events)
    assert "it lacks build_connector_meta()" in plan.warnings[0]
    assert plan.calls["wait_for_save"] == double.wait_for_save
    with pytest.raises(NotAnEngineError):
        engine_binding(double, require_engine=True)
    with pytest.raises(NotAnEngineError):
        engine_binding(Fake_0_5_6, require_engine=False)  # a class, not an engine


def test_vllm_facts_are_read_from_annotations() -> None:
    assert count_admits_none("tuple[int | None, bool]")
    assert count_admits_none("Tuple[Optional[int], bool]")
    assert not count_admits_none("tuple[int, bool]")
    assert accepts_bytes("list[bytes | int]") and accepts_bytes("list[ExternalBlockHash | bytes]")
    assert not accepts_bytes("list[int]")


def test_a_subclass_of_a_newer_release_is_an_engine_too(caplog: pytest.LogCaptureFixture) -> None:
    class Custom(Fake_0_3_13):
        def get_kv_events(self) -> list[Any]:
            return ["custom"]

    with caplog.at_level(logging.WARNING):
        plan = _plan(Custom(), V013)
    assert plan.calls["get_kv_connector_kv_cache_events"]() == [("converted", "custom")]
