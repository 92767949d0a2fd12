"""``LMCacheCompatConnector`` built and driven without vLLM: over the stand-in vLLM 0.33.0 and
LMCache 0.5.6 in ``stub/`` (see conftest.py), found the way the real ones are found."""

from __future__ import annotations

import logging
from types import ModuleType, SimpleNamespace
from typing import Any
from unittest import mock

import pytest

from lmcache_compat.core.roles import CONNECTOR
from lmcache_compat.upstream.matrix import load_matrix
from lmcache_compat.upstream.scanner import scan
from tests.vllm.conftest import STUB


def _config(**extra: Any) -> Any:
    return SimpleNamespace(
        kv_transfer_config=SimpleNamespace(
            kv_connector="LMCacheCompatConnector", kv_connector_extra_config=extra
        )
    )


def _build(stub: ModuleType, role: str = "WORKER", **extra: Any) -> Any:
    from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory
    from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorRole

    stub.register()
    return KVConnectorFactory.create_connector(
        _config(**extra), getattr(KVConnectorRole, role), None
    )


def test_the_stand_in_lmcache_has_the_real_0_5_6_surface() -> None:
    """The fake engine mirrors the real release: its scan equals the shipped row (which the
    releases tier proves against the real wheel)."""
    row = load_matrix().row("0.5.6")
    result = scan(STUB)
    name = CONNECTOR.name
    assert result.surfaces()[name] == row.surfaces[name]
    assert result.properties()[name] == row.properties[name]
    assert result.details()[name] == row.details[name]


def test_vllms_factory_builds_the_connector_by_name(stub: ModuleType) -> None:
    connector = _build(stub)
    from lmcache.integration.vllm.vllm_v1_adapter import BUILT

    (impl,) = BUILT[-1:]
    assert type(connector).__module__ == "lmcache_compat.vllm"
    assert connector._lmcache_engine is impl and impl.parent is connector
    assert connector.compat_adapter.lmcache_version == "0.5.6"
    # per-step calls land on the engine's own bound methods (no forwarding frame)
    assert vars(connector)["wait_for_layer_load"] == impl.wait_for_layer_load
    connector.wait_for_layer_load("layer.0")
    connector.start_load_kv("ctx", extra=1)
    assert impl.calls[-2:] == [("wait_for_layer_load", ("layer.0",)), ("start_load_kv", ("ctx",))]
    assert connector.get_num_new_matched_tokens("pending", 0) == (None, False)
    assert connector.get_num_new_matched_tokens("req", 0) == (16, False)
    connector.update_state_after_alloc("req", "blocks", 16)
    assert impl.calls[-1] == ("update_state_after_alloc", ("req", 16))


def test_failed_block_ids_and_events_reach_vllm(stub: ModuleType) -> None:
    from lmcache.utils import CacheRemoveEvent, CacheStoreEvent
    from vllm.distributed.kv_events import BlockRemoved, BlockStored
    from vllm.v1.outputs import KVConnectorOutput

    worker = _build(stub)
    impl = worker._lmcache_engine
    impl.failed.update({3, 9})
    assert worker.get_block_ids_with_load_errors() == {3, 9}
    assert worker.get_block_ids_with_load_errors() == set()  # drained by the engine
    assert worker.get_kv_connector_kv_cache_events() is None  # idle step
    impl.events = [
        CacheStoreEvent([b"\x01"], None, [1, 2], 16, None, "cpu", None),
        CacheRemoveEvent([b"\x02"], "cpu"),
    ]
    events = worker.get_kv_connector_kv_cache_events()
    assert [type(e) for e in events.get_all_events()] == [BlockStored, BlockRemoved]
    scheduler = _build(stub, "SCHEDULER")
    scheduler.update_connector_output(KVConnectorOutput(kv_cache_events=events))
    published = list(scheduler.take_events())
    assert published == events.get_all_events() and list(scheduler.take_events()) == []


def test_events_reported_by_every_worker_are_published_once(stub: ModuleType) -> None:
    from vllm.distributed.kv_events import BlockStored
    from vllm.v1.outputs import KVConnectorOutput

    from lmcache_compat.vllm import CompatKVEvents

    def stored(n: int) -> Any:
        return BlockStored([n], None, [n], 16, None, "cpu", None)

    a, b = CompatKVEvents(), CompatKVEvents()
    a.add_events([stored(1), stored(2)])
    b.add_events([stored(2), stored(3)])
    a.add_events(b.get_all_events())  # vLLM's KVOutputAggregator merges worker containers
    a.increment_workers(b.get_number_of_workers())
    scheduler = _build(stub, "SCHEDULER")
    scheduler.update_connector_output(KVConnectorOutput(kv_cache_events=a))
    assert list(scheduler.take_events()) == [stored(2)]
    with pytest.raises(TypeError):
        a.add_events((stored(1),))  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        a.increment_workers(0)


def test_shutdown_reaches_lmcache_once(stub: ModuleType) -> None:
    connector = _build(stub)
    connector.shutdown()
    connector.shutdown()
    assert [c for c in connector._lmcache_engine.calls if c[0] == "shutdown"] == [("shutdown", ())]


def test_a_subclass_keeps_its_overrides(stub: ModuleType) -> None:
    from lmcache_compat.vllm import LMCacheCompatConnector

    seen: list[str] = []

    class Traced(LMCacheCompatConnector):
        def wait_for_layer_load(self, layer_name: str) -> None:
            seen.append(layer_name)
            super().wait_for_layer_load(layer_name)

    from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorRole

    connector = Traced(_config(), KVConnectorRole.WORKER)
    assert "wait_for_layer_load" not in vars(connector)
    connector.wait_for_layer_load("l")
    assert seen == ["l"]
    assert connector._lmcache_engine.calls[-1] == ("wait_for_layer_load", ("l",))
    assert "save_kv_layer" in vars(connector)  # not overridden: still the fast path


def test_sleep_mode_is_answered_from_the_installed_files(stub: ModuleType) -> None:
    from lmcache_compat.vllm import LMCacheCompatConnector

    assert LMCacheCompatConnector.supports_sleep_mode(_config().kv_transfer_config) is False


def test_attaching_again_replaces_every_hook_of_the_previous_engine(stub: ModuleType) -> None:
    """A second ``attach`` leaves no call bound to the first engine: the sleep-mode hooks the
    first engine had and the second lacks fall back to vLLM's default, never the old engine."""
    from lmcache.integration.vllm.vllm_v1_adapter import LMCacheConnectorV1Impl

    connector = _build(stub)

    class Sleeper(LMCacheConnectorV1Impl):  # type: ignore[misc]
        def unregister_kv_caches(self) -> None:
            self._call("unregister_kv_caches")

        def restore_kv_caches(self) -> None:
            self._call("restore_kv_caches")

    first = Sleeper(None, None, connector)
    connector.attach(first, strict=True)
    assert vars(connector)["unregister_kv_caches"] == first.unregister_kv_caches
    connector.unregister_kv_caches()
    assert first.calls[-1] == ("unregister_kv_caches", ())
    second = LMCacheConnectorV1Impl(None, None, connector)
    connector.attach(second, strict=True)
    assert "unregister_kv_caches" not in vars(connector)
    assert "restore_kv_caches" not in vars(connector)
    before = list(first.calls)
    connector.unregister_kv_caches()  # vLLM's default: a no-op
    connector.restore_kv_caches()
    connector.wait_for_save()
    assert first.calls == before  # nothing reaches the old engine any more
    assert second.calls[-1] == ("wait_for_save", ())
    assert vars(connector)["wait_for_save"] == second.wait_for_save


def test_use_native_says_why_it_cannot_be_built(stub: ModuleType) -> None:
    with pytest.raises(ImportError, match="use_native=True needs vLLM's vendored copy"):
        _build(stub, use_native=True)


def test_a_test_double_attached_by_hand(stub: ModuleType, caplog: pytest.LogCaptureFixture) -> None:
    from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorRole

    from lmcache_compat.vllm import LMCacheCompatConnector

    connector = object.__new__(LMCacheCompatConnector)
    double = mock.MagicMock()
    with caplog.at_level(logging.WARNING, logger="lmcache_compat.vllm"):
        connector.attach(double)
    assert "which is not an LMCache LMCacheConnectorV1Impl" in caplog.text
    connector.wait_for_save()
    double.wait_for_save.assert_called_once_with()
    assert KVConnectorRole.WORKER  # the stand-in's roles exist
    with pytest.raises(Exception, match="not an LMCache"):
        connector.attach(double, strict=True)


def test_an_unattached_object_answers_events_from_its_engine(stub: ModuleType) -> None:
    """vLLM's own white-box tests call the method on a mock carrying only ``_lmcache_engine``."""
    from lmcache_compat.vllm import LMCacheCompatConnector

    holder = mock.MagicMock(spec=LMCacheCompatConnector)
    holder._lmcache_engine = mock.MagicMock()
    holder._lmcache_engine.get_kv_events.return_value = []
    assert LMCacheCompatConnector.get_kv_connector_kv_cache_events(holder) is None


def test_the_running_vllms_facts_are_read_from_its_code(stub: ModuleType) -> None:
    from lmcache_compat.vllm.facts import SLEEP_HOOKS, vllm_facts

    facts = vllm_facts()
    assert facts.base_takes_kv_cache_config and facts.accepts_none_matched
    assert facts.connector_events and facts.load_failure_path and facts.hashes_accept_bytes
    assert facts.sleep_hooks == SLEEP_HOOKS
    assert ("lookahead_token_ids", False) in facts.block_stored_fields
    assert ("block_hashes", True) in facts.block_removed_fields
    assert {"take_events", "get_finished"} <= facts.base_methods


def test_events_of_every_shape_convert_like_vllms_own_connector(stub: ModuleType) -> None:
    import dataclasses
    from collections.abc import Callable

    from lmcache.utils import CacheStoreEvent
    from vllm.distributed.kv_events import BlockStored

    from lmcache_compat.vllm.events import EventConverter
    from lmcache_compat.vllm.facts import vllm_facts

    facts = vllm_facts()
    convert = EventConverter(facts)
    stored = CacheStoreEvent([b"\x01\x02"], b"\x01", [1, 2], 16, None, "cpu", "lora")
    assert convert([stored]) == [
        BlockStored([b"\x01\x02"], b"\x01", [1, 2], 16, None, "cpu", "lora")
    ]

    class OldStore:  # LMCache before 0.3.13: no lora_name; attributes set in __init__
        def __init__(self) -> None:
            self.block_hashes = [5]
            self.parent_block_hash = None
            self.token_ids = [7]
            self.block_size = 16
            self.lora_id = None
            self.medium = None

    class Unknown:
        pass

    got = convert([OldStore(), stored, Unknown()])  # mixed: decided per class, once
    assert got[0] == BlockStored([5], None, [7], 16, None, None, None) and len(got) == 2
    ints = EventConverter(dataclasses.replace(facts, hashes_accept_bytes=False))
    (as_ints,) = ints([stored])
    assert as_ints.block_hashes == [int.from_bytes(b"\x01\x02", "big")]
    assert as_ints.parent_block_hash == 1
    empty: Callable[[list[Any]], list[Any]] = convert
    assert empty([]) == [] and convert(iter([stored])) == convert([stored])


def test_every_connector_method_reaches_the_engine_through_super(stub: ModuleType) -> None:
    """A subclass that overrides every per-step method and calls ``super()`` still reaches the
    engine (the class's own methods read the plan)."""
    from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorRole
    from vllm.v1.outputs import KVConnectorOutput

    from lmcache_compat.vllm import LMCacheCompatConnector

    names = [
        "register_kv_caches", "start_load_kv", "wait_for_layer_load", "save_kv_layer",
        "wait_for_save", "get_finished", "get_block_ids_with_load_errors",
        "get_kv_connector_kv_cache_events", "get_num_new_matched_tokens",
        "update_state_after_alloc", "build_connector_meta", "request_finished",
        "update_connector_output", "bind_connector_metadata",
    ]  # fmt: skip

    def through_super(name: str) -> Any:
        def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            return getattr(super(Overriding, self), name)(*args, **kwargs)

        return method

    Overriding = type("Overriding", (LMCacheCompatConnector,), {n: through_super(n) for n in names})
    connector = Overriding(_config(), KVConnectorRole.WORKER)
    impl = connector._lmcache_engine
    connector.register_kv_caches({"l": 1})
    connector.start_load_kv("ctx")
    connector.wait_for_layer_load("l")
    connector.save_kv_layer("l", "kv", "attn")
    connector.wait_for_save()
    assert connector.get_finished({"r"}) == (None, None)
    assert connector.get_block_ids_with_load_errors() == set()
    assert connector.get_kv_connector_kv_cache_events() is None
    assert connector.get_num_new_matched_tokens("req", 0) == (16, False)
    connector.update_state_after_alloc("req", "blocks", 1)
    assert connector.build_connector_meta("out") == {"meta": "out"}
    assert connector.request_finished("req", [1]) == (False, None)
    connector.update_connector_output(KVConnectorOutput())
    connector.bind_connector_metadata("meta")
    assert impl.kv_caches == {"l": 1} and connector.bound == ["meta"]
    called = [name for name, _ in impl.calls]
    for name in ("start_load_kv", "wait_for_layer_load", "save_kv_layer", "wait_for_save"):
        assert name in called
    assert list(connector.take_events()) == []


def test_the_plugin_registers_once_and_tolerates_a_second_registration(stub: ModuleType) -> None:
    from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory

    stub.register()
    stub.register()  # vLLM loads general plugins in several processes, sometimes twice
    assert KVConnectorFactory.get_connector_class_by_name(stub.CONNECTOR_NAME) is (
        stub.LMCacheCompatConnector
    )
    with pytest.raises(AttributeError):
        stub.NotAName  # noqa: B018
