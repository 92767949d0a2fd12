"""``LMCacheCompatMPConnector`` over the stand-in vLLM (``stub/``: vLLM 0.33.0's base class,
its in-tree MP connector's key reads, ``CachedRequestData``) with fake MP adapters in place of
``MPSchedulerAdapter.create`` / ``MPWorkerAdapter.create`` (no LMCache MP release in the unit
tier; the grid tiers build it over the real ones). ``zmq`` is a stand-in module: the connector
only takes ``zmq.Context.instance()`` and hands it to ``create``."""

from __future__ import annotations

import sys
from types import ModuleType, SimpleNamespace
from typing import Any, ClassVar

import pytest

from lmcache_compat.core.catalog import Capability

EXTRA = {"lmcache.mp.host": "tcp://10.0.0.2", "lmcache.mp.port": 6000, "lmcache.mp.mq_timeout": 5}


class _Transfer(SimpleNamespace):
    def get_from_extra_config(self, key: str, default: Any) -> Any:
        return self.kv_connector_extra_config.get(key, default)


def _config(name: str) -> Any:
    return SimpleNamespace(
        kv_transfer_config=_Transfer(
            kv_connector=name, kv_connector_extra_config=dict(EXTRA), is_kv_producer=True
        ),
        model_config=SimpleNamespace(model="tiny", use_mla=False),
        cache_config=SimpleNamespace(block_size=16),
        parallel_config=SimpleNamespace(
            world_size=1, rank=0, tensor_parallel_size=1, pipeline_parallel_size=1
        ),
        kv_events_config=None,
    )


class FakeTarget:
    def create_recorded_event(self) -> str:
        return "event"


class FakeAdapter:
    """What the connector uses of ``MPSchedulerAdapter`` / ``MPWorkerAdapter``."""

    made: ClassVar[list[Any]] = []

    def __init__(self, config: Any) -> None:
        self.config = config
        self.target = FakeTarget()
        self.capabilities = frozenset({Capability.MP_KV_EVENTS})
        self.shut = 0
        FakeAdapter.made.append(self)

    @classmethod
    def create(cls, context: Any, config: Any, **kwargs: Any) -> FakeAdapter:
        return cls(config)

    def num_blocks_per_chunk(self) -> int:
        return 16

    def get_block_ids_with_load_errors(self) -> set[int]:
        return {3}

    def get_kv_events(self) -> list[Any]:
        return []

    def register_kv_caches(self, kv_caches: Any) -> None:
        self.kv = kv_caches

    def get_finished(self, ids: set[str]) -> tuple[set[str], set[str]]:
        return set(), set()

    def shutdown(self) -> None:
        self.shut += 1


@pytest.fixture
def mp(stub: ModuleType, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    from lmcache_compat.mp import adapters

    zmq = ModuleType("zmq")
    zmq.Context = SimpleNamespace(instance=lambda: "context")  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "zmq", zmq)
    monkeypatch.setattr(adapters.MPSchedulerAdapter, "create", FakeAdapter.create)
    monkeypatch.setattr(adapters.MPWorkerAdapter, "create", FakeAdapter.create)
    FakeAdapter.made.clear()
    return stub


def _build(mp: ModuleType, role: str) -> Any:
    from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory
    from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorRole

    mp.register()
    return KVConnectorFactory.create_connector(
        _config("LMCacheCompatMPConnector"), getattr(KVConnectorRole, role), None
    )


def test_switching_is_the_class_name_alone(mp: ModuleType) -> None:
    """The reference's configuration, unchanged, reaches the same server with ours."""
    from vllm.distributed.kv_transfer.kv_connector.v1.lmcache_mp_connector import (
        LMCacheMPConnector,
    )

    reference = LMCacheMPConnector(_config("LMCacheMPConnector"), None)
    ours = _build(mp, "SCHEDULER")
    assert type(ours).__name__ == "LMCacheCompatMPConnector"
    assert ours.reference.name.endswith("lmcache_mp_connector.LMCacheMPConnector")
    assert ours.settings.server_urls == (reference.server_url,)
    assert ours.settings.mq_timeout == reference.mq_timeout == 5.0
    (adapter,) = FakeAdapter.made
    assert adapter.config.urls == (reference.server_url,)
    assert dict(adapter.config.extra_config) == EXTRA  # accepted as they are


def test_each_role_binds_its_calls_on_the_instance_once(mp: ModuleType) -> None:
    scheduler = _build(mp, "SCHEDULER")
    assert "get_num_new_matched_tokens" in vars(scheduler)
    assert "start_load_kv" not in vars(scheduler)
    worker = _build(mp, "WORKER")
    adapter = FakeAdapter.made[-1]
    assert vars(worker)["get_block_ids_with_load_errors"] == adapter.get_block_ids_with_load_errors
    assert worker.get_block_ids_with_load_errors() == {3}
    worker.register_kv_caches({"layer": 0})
    assert adapter.kv == {"layer": 0}
    worker.shutdown()
    worker.shutdown()
    assert adapter.shut == 1
    with pytest.raises(RuntimeError, match="not a worker-role call"):
        worker.build_connector_meta(None)


def test_sleep_mode_is_refused_up_front(mp: ModuleType) -> None:
    mp.register()
    cls = mp.LMCacheCompatMPConnector
    assert cls.supports_sleep_mode(None) is False
