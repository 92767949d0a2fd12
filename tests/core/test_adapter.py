from __future__ import annotations

import pickle
import threading
from collections.abc import Callable
from typing import Any
from unittest import mock

import pytest

import lmcache_compat.core.binding as adapter_mod
from lmcache_compat import (
    Capability,
    ConnectorAdapter,
    MalformedResultError,
    MissingCapabilityError,
    NotAnEngineError,
    probe,
)
from lmcache_compat.versions import installed_version
from tests.support.fakes import (
    CONNECTOR_CAPS,
    FAKES,
    Fake_0_3_0,
    Fake_0_3_9,
    Fake_0_3_9_post1,
    Fake_0_3_10_post2,
    Fake_0_3_12,
    Fake_0_3_13,
    Fake_0_5_6,
)

CORE = (
    "start_load_kv",
    "wait_for_layer_load",
    "save_kv_layer",
    "wait_for_save",
    "get_num_new_matched_tokens",
    "update_state_after_alloc",
    "build_connector_meta",
)


@pytest.fixture
def version(monkeypatch: pytest.MonkeyPatch) -> str:
    """Pretend LMCache 0.3.9 is installed (metadata only)."""
    monkeypatch.setattr(adapter_mod, "version_or_none", lambda name: "0.3.9")
    return "0.3.9"


# --- the seed scenario ------------------------------------------------------------------


def test_seed_failed_blocks_are_reported_exactly_once() -> None:
    engine = Fake_0_3_9_post1()
    adapter = ConnectorAdapter(engine)
    # tokens 0..47 expected, 16..47 not retrieved; block size 16 -> blocks 1 and 2 (+ slot offset)
    engine.record_failed_blocks(
        "req-1", [True] * 48, [True] * 16 + [False] * 32, list(range(160, 208))
    )
    first = adapter.get_block_ids_with_load_errors()
    assert first == {11, 12}
    assert adapter.get_block_ids_with_load_errors() == set()  # drained, never cached
    assert first == {11, 12}  # the returned set was not mutated afterwards


def test_seed_release_without_the_method_yields_empty_set() -> None:
    adapter = ConnectorAdapter(Fake_0_3_9())
    assert Capability.LOAD_ERROR_REPORTING not in adapter.capabilities
    result = adapter.get_block_ids_with_load_errors()
    assert result == set() and type(result) is set
    result.add(1)  # a fresh set per call: mutating one does not leak into the next
    assert adapter.get_block_ids_with_load_errors() == set()


def test_the_engines_own_set_is_returned_without_copy() -> None:
    class Engine(Fake_0_3_9_post1):
        def get_block_ids_with_load_errors(self) -> set[int]:
            return self._invalid_block_ids

    engine = Engine()
    engine._invalid_block_ids.update({3, 5})
    assert ConnectorAdapter(engine).get_block_ids_with_load_errors() is engine._invalid_block_ids


@pytest.mark.parametrize(
    "bad",
    [["1", "2"], {"1"}, {1.5}, {True}, {-1}, None, [1, 2], 7, "12"],
    ids=repr,
)
def test_malformed_block_ids_raise_naming_method_and_version(bad: Any, version: str) -> None:
    class Engine(Fake_0_3_9_post1):
        def get_block_ids_with_load_errors(self) -> set[int]:
            return bad  # type: ignore[no-any-return]

    adapter = ConnectorAdapter(Engine())
    with pytest.raises(MalformedResultError) as info:
        adapter.get_block_ids_with_load_errors()
    msg = str(info.value)
    assert "get_block_ids_with_load_errors()" in msg
    assert "LMCache 0.3.9" in msg
    assert "Engine" in msg


def test_frozenset_and_int_subclasses_pass_unchanged() -> None:
    class BlockId(int):
        pass

    ids = frozenset({BlockId(4), 5})

    class Engine(Fake_0_3_9_post1):
        def get_block_ids_with_load_errors(self) -> set[int]:
            return ids  # type: ignore[return-value]

    assert ConnectorAdapter(Engine()).get_block_ids_with_load_errors() is ids


# --- fallbacks and pass-through ---------------------------------------------------------


def test_fallbacks_on_the_oldest_release() -> None:
    engine = Fake_0_3_0()
    a = ConnectorAdapter(engine)
    assert a.get_finished({"r"}) == (None, None)
    assert a.request_finished(object(), [1, 2]) == (False, None)
    assert a.get_inference_info() == {}
    assert a.get_block_ids_with_load_errors() == set()
    events = a.get_kv_events()
    assert events == [] and type(events) is list
    shutdown: Callable[[], object] = a.shutdown
    register: Callable[[object], object] = a.register_kv_caches
    assert shutdown() is None
    assert register({"layer": object()}) is None
    assert engine._calls == []  # fallbacks never touch the engine


@pytest.mark.parametrize("release", sorted(FAKES))
def test_core_methods_are_the_engines_own_bound_methods(release: str) -> None:
    engine = FAKES[release]()
    a = ConnectorAdapter(engine)
    for name in CORE:
        bound = getattr(a, name)
        assert bound.__self__ is engine and bound.__func__ is getattr(type(engine), name)


@pytest.mark.parametrize("release", sorted(FAKES))
def test_present_capabilities_are_bound_to_the_engine(release: str) -> None:
    engine = FAKES[release]()
    a = ConnectorAdapter(engine)
    caps = probe(engine)
    for name, cap in [
        ("get_finished", Capability.GET_FINISHED),
        ("request_finished", Capability.REQUEST_FINISHED),
        ("shutdown", Capability.SHUTDOWN),
        ("register_kv_caches", Capability.REGISTER_KV_CACHES),
        ("get_inference_info", Capability.INFERENCE_INFO),
    ]:
        method = getattr(a, name)
        assert (getattr(method, "__self__", None) is engine) == (cap in caps), name


def test_pass_through_calls_reach_the_engine() -> None:
    engine = Fake_0_3_12()
    a = ConnectorAdapter(engine)
    a.start_load_kv("fc", extra=1)
    a.wait_for_layer_load("layer.0")
    a.save_kv_layer("layer.0", "kv", "meta", extra=1)
    a.wait_for_save()
    assert a.get_num_new_matched_tokens("req", 16) is None
    a.update_state_after_alloc("req", 32)
    assert a.build_connector_meta("out") == {"meta": "out"}
    a.register_kv_caches({"l": 1})
    a.shutdown()
    assert a.get_finished({"r"}) == (None, None)
    assert [c[0] for c in engine._calls] == [
        "start_load_kv",
        "wait_for_layer_load",
        "save_kv_layer",
        "wait_for_save",
        "get_num_new_matched_tokens",
        "update_state_after_alloc",
        "build_connector_meta",
        "register_kv_caches",
        "shutdown",
        "get_finished",
    ]


def test_kv_events_pass_through_and_iterables_become_lists() -> None:
    engine = Fake_0_3_10_post2()
    sentinel = object()
    engine._events = [sentinel]
    a = ConnectorAdapter(engine)
    assert a.get_kv_events() == [sentinel]
    assert a.get_kv_events() == []

    class GenEngine(Fake_0_3_10_post2):
        def get_kv_events(self) -> Any:
            return (e for e in ("a", "b"))

    assert ConnectorAdapter(GenEngine()).get_kv_events() == ["a", "b"]

    class NoneEngine(Fake_0_3_10_post2):
        def get_kv_events(self) -> Any:
            return None

    with pytest.raises(MalformedResultError, match=r"get_kv_events\(\) returned NoneType"):
        ConnectorAdapter(NoneEngine()).get_kv_events()


def test_engine_errors_propagate_unchanged() -> None:
    boom = RuntimeError("retrieval failed")

    class Engine(Fake_0_5_6):
        def get_block_ids_with_load_errors(self) -> set[int]:
            raise boom

        def wait_for_layer_load(self, layer_name: str) -> None:
            raise boom

        def get_kv_events(self) -> Any:
            raise boom

    a = ConnectorAdapter(Engine())
    for call in (
        a.get_block_ids_with_load_errors,
        lambda: a.wait_for_layer_load("x"),
        a.get_kv_events,
    ):
        with pytest.raises(RuntimeError) as info:
            call()
        assert info.value is boom


# --- required capabilities, strict mode, errors -----------------------------------------


def test_require_missing_capability_fails_at_construction(version: str) -> None:
    with pytest.raises(MissingCapabilityError) as info:
        ConnectorAdapter(Fake_0_3_9(), require=[Capability.LOAD_ERROR_REPORTING])
    err = info.value
    msg = str(err)
    assert "'load_error_reporting'" in msg
    assert "LMCacheConnectorV1Impl.get_block_ids_with_load_errors()" in msg
    assert "tests.support.fakes.Fake_0_3_9" in msg
    assert "installed LMCache version: 0.3.9" in msg
    assert "first LMCache release that has it: 0.3.9.post1" in msg
    assert msg.endswith("HINT: pip install -U 'lmcache>=0.3.9.post1'")
    assert (err.capability, err.since, err.installed) == (
        "load_error_reporting",
        "0.3.9.post1",
        "0.3.9",
    )
    again = pickle.loads(pickle.dumps(err))
    assert str(again) == msg


def test_require_accepts_strings_and_a_single_name() -> None:
    ConnectorAdapter(Fake_0_3_12(), require="register_kv_caches")
    ConnectorAdapter(Fake_0_3_12(), require=["kv_events", Capability.SHUTDOWN])
    with pytest.raises(ValueError, match="unknown capability 'kv_event'"):
        ConnectorAdapter(Fake_0_3_12(), require=["kv_event"])


def test_unknown_version_is_said(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(adapter_mod, "version_or_none", lambda name: None)
    with pytest.raises(MissingCapabilityError, match="installed LMCache version: unknown"):
        ConnectorAdapter(Fake_0_3_0(), require=["shutdown"])


def test_strict_mode_raises_at_call_time(version: str) -> None:
    a = ConnectorAdapter(Fake_0_3_9(), strict=True)  # constructing is fine
    assert a.strict
    with pytest.raises(MissingCapabilityError, match=r"lmcache>=0\.3\.10\.post2"):
        a.get_kv_events()
    with pytest.raises(MissingCapabilityError, match="'register_kv_caches'"):
        a.register_kv_caches({})
    # present ones still work
    assert a.get_finished(set()) == (None, None)


def test_not_an_engine() -> None:
    for obj in (object(), None, mock.MagicMock(), mock.Mock()):
        with pytest.raises(NotAnEngineError, match="start_load_kv"):
            ConnectorAdapter(obj)


def test_mock_with_spec_adapts() -> None:
    m = mock.MagicMock(spec=Fake_0_3_9_post1)
    m.get_block_ids_with_load_errors.return_value = {7}
    a = ConnectorAdapter(m)
    assert a.get_block_ids_with_load_errors() == {7}
    assert a.get_kv_events() == []  # absent on the spec class: fallback, not a child mock
    a.wait_for_layer_load("x")
    m.wait_for_layer_load.assert_called_once_with("x")


def test_mock_returning_none_for_block_ids_is_loud() -> None:
    m = mock.MagicMock(spec=Fake_0_3_9_post1)
    m.get_block_ids_with_load_errors.return_value = None
    with pytest.raises(MalformedResultError):
        ConnectorAdapter(m).get_block_ids_with_load_errors()


def test_adapter_methods_are_plain_attributes_bound_at_construction() -> None:
    """Each method is decided once: the engine's own bound method, stored on the instance, or
    the catalog's fallback, a plain method of the adapter class (a call is one attribute load
    and a call)."""
    from lmcache_compat.core import fallbacks

    a = ConnectorAdapter(Fake_0_5_6())
    assert vars(a)["shutdown"] == a.engine.shutdown  # the engine's own bound method
    old = ConnectorAdapter(Fake_0_3_0())
    assert "get_kv_events" not in vars(old)  # the class's own method: the catalog fallback
    assert old.get_kv_events.__func__ is fallbacks.no_kv_events  # type: ignore[attr-defined]
    assert "Fake_0_5_6" in repr(a) and type(a) is type(old) is ConnectorAdapter


def test_construction_does_not_evaluate_properties_or_call_anything() -> None:
    engine = Fake_0_3_13()
    ConnectorAdapter(engine, require=list(CONNECTOR_CAPS))
    assert engine._calls == []


def test_version_is_read_from_metadata() -> None:
    a = ConnectorAdapter(Fake_0_3_0())
    assert a.lmcache_version == installed_version("lmcache")


def test_concurrent_construction_over_many_engines_is_consistent() -> None:
    classes = list(FAKES.values())
    out: dict[int, list[tuple[str, frozenset[Capability]]]] = {}
    barrier = threading.Barrier(6)

    def work(i: int) -> None:
        barrier.wait()
        got = []
        for _ in range(30):
            for cls in classes:
                a = ConnectorAdapter(cls())
                got.append((cls.__name__, frozenset(a.capabilities)))
                a.get_block_ids_with_load_errors()
        out[i] = got

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(out) == 6
    assert all(v == out[0] for v in out.values())
