"""The SGLang adapters over fakes generated from every shipped matrix row (the releases tier
proves the rows; the sglang tier runs the real connectors): what each ``create`` hands the
release's constructor, what each method is bound to, and the documented fallbacks."""

from __future__ import annotations

import os
from typing import Any

import pytest

from lmcache_compat import Capability
from lmcache_compat.core.roles import (
    SGLANG_LAYERWISE,
    SGLANG_LOAD_METADATA,
    SGLANG_MP,
    SGLANG_STORE_METADATA,
    SGLANG_UNIFIED,
)
from lmcache_compat.errors import NotAnEngineError
from lmcache_compat.sglang import (
    CompletedFuture,
    MetadataBuilder,
    SGLangLayerwiseAdapter,
    SGLangMPAdapter,
    SGLangUnifiedAdapter,
    torch_group,
)
from lmcache_compat.sglang.known.grid import load_sglang_grid
from lmcache_compat.sglang.upstream import CONFIG_ENV
from lmcache_compat.testing import set_result
from lmcache_compat.upstream.matrix import ReleaseRow, load_matrix
from tools.generated_fakes import GeneratedEngine, fake_from_row, instantiate

MATRIX = load_matrix()
IN_PROCESS = [r for r in MATRIX.rows if r.has(Capability.SGLANG_IN_PROCESS)]
MP = [r for r in MATRIX.rows if r.has(Capability.SGLANG_MP)]
UNIFIED = [r for r in MATRIX.rows if r.has(Capability.SGLANG_UNIFIED_MP)]


class Coordinator:
    """sglang's GroupCoordinator: its torch group is ``device_group``."""

    device_group = object()


def _recording(row: ReleaseRow, cls_name: str) -> type[GeneratedEngine]:
    """The row's fake, recording ``LMCACHE_CONFIG_FILE`` at construction."""
    base = fake_from_row(row, cls_name)

    class Recording(base):  # type: ignore[misc,valid-type]
        def _setup(self, *args: Any, **kwargs: Any) -> None:
            super()._setup(*args, **kwargs)
            self.env_config = os.environ.get(CONFIG_ENV)

    Recording.__name__ = Recording.__qualname__ = cls_name
    return Recording


@pytest.mark.parametrize("row", IN_PROCESS, ids=lambda r: r.version)
def test_the_layerwise_adapter_builds_every_release_from_sglang_s_arguments(
    row: ReleaseRow, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(CONFIG_ENV, raising=False)
    cls = _recording(row, SGLANG_LAYERWISE.name)
    group = Coordinator()
    adapter = SGLangLayerwiseAdapter.create(
        sgl_config="cfg",
        tp_size=1,
        rank=0,
        k_pool=["k"],
        v_pool=["v"],
        tp_group=group,
        config_file="lmc.yaml",
        connector_cls=cls,
    )
    engine = adapter.target
    passed = engine._init[1]
    assert passed["sgl_config"] == "cfg" and passed["k_pool"] == ["k"]
    if row.has(Capability.SGLANG_TP_GROUP):  # the torch group, whatever sglang hands over
        assert passed["tp_group"] is group.device_group
    else:
        assert "tp_group" not in passed
    if row.has(Capability.SGLANG_CONFIG_FILE):
        assert passed["config_file"] == "lmc.yaml" and engine.env_config is None
    else:  # emulated: the release reads only the environment
        assert "config_file" not in passed and engine.env_config == "lmc.yaml"
    assert os.environ.get(CONFIG_ENV) is None  # restored
    adapter.start_load_kv("load")
    adapter.load_kv_layerwise(0)
    adapter.store_kv("store")
    assert engine._calls == ["start_load_kv", "load_kv_layerwise", "store_kv"]
    events = adapter.get_kv_events()
    if row.has(Capability.SGLANG_KV_EVENTS):
        assert engine._calls[-1] == "get_kv_events"
    else:
        assert events == [] and engine._calls[-1] == "store_kv"


def test_an_empty_config_file_means_the_environment_s_on_every_release(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(CONFIG_ENV, "from-env.yaml")
    for row in IN_PROCESS:
        adapter = SGLangLayerwiseAdapter.create(
            sgl_config=None,
            tp_size=1,
            rank=0,
            k_pool=[],
            v_pool=[],
            config_file="",
            connector_cls=_recording(row, SGLANG_LAYERWISE.name),
        )
        engine = adapter.target
        if row.has(Capability.SGLANG_CONFIG_FILE):
            assert engine._init[1]["config_file"] == "from-env.yaml", row.version
        else:
            assert engine.env_config == "from-env.yaml", row.version


def test_an_object_that_is_not_a_connector_is_refused() -> None:
    class Half:
        def chunk_size(self) -> int:
            return 1

    with pytest.raises(NotAnEngineError, match="start_load_kv"):
        SGLangLayerwiseAdapter(Half())


@pytest.mark.parametrize("row", MP, ids=lambda r: r.version)
def test_the_mp_adapter_binds_every_release(row: ReleaseRow) -> None:
    cls = fake_from_row(row, SGLANG_MP.name)
    adapter = SGLangMPAdapter.create(
        sgl_config="cfg",
        tp_size=1,
        rank=0,
        page_size=16,
        host="tcp://h",
        port=5,
        k_pool=[],
        v_pool=[],
        tp_group=Coordinator(),
        mq_timeout=2.5,
        connector_cls=cls,
    )
    engine = adapter.target
    assert engine._init[1]["mq_timeout"] == 2.5 and engine._init[1]["host"] == "tcp://h"
    assert engine._init[1]["tp_group"] is Coordinator.device_group
    set_result(engine, "lookup_kv", 7)  # the fake's own answer: bound, not wrapped
    assert adapter.lookup_kv([1, 2], "r") == 7
    adapter.release_pending("r")
    adapter.end_session("r")
    future = adapter.store_kv_async("store")
    if row.has(Capability.SGLANG_MP_STORE_ASYNC):
        assert engine._calls[-1] == "store_kv_async"
    else:  # emulated: stored at once, an already completed future
        assert engine._calls[-1] == "store_kv" and isinstance(future, CompletedFuture)
        assert future.query() and future.result(timeout=1) is True
    assert adapter.is_healthy() is True


@pytest.mark.parametrize("row", UNIFIED, ids=lambda r: r.version)
def test_the_unified_adapter_binds_the_methods_sglang_calls(
    row: ReleaseRow, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CONFIG_ENV, "env.yaml")
    cls = fake_from_row(row, SGLANG_UNIFIED.name)
    adapter = SGLangUnifiedAdapter.create(
        connector_cls=cls,
        model_config=None,
        tp_size=1,
        tp_rank=0,
        tp_group=Coordinator(),
        page_size=16,
        token_to_kv_pool_allocator=None,
        req_to_token_pool=None,
        tree_components=(),
        mamba_component=None,
        sliding_window_size=None,
    )
    engine = adapter.target
    assert engine._init[1]["config_file"] == "env.yaml"
    assert engine._init[1]["tp_group"] is Coordinator.device_group
    # every call sglang's unified cache makes, in its shape (read from the shipped grid)
    grid = load_sglang_grid()
    uses = [
        u
        for run in grid.runs
        for module in run.integration
        for u in module["methods"]
        if SGLANG_UNIFIED.name in u["classes"] and u["access"] == "call"
    ]
    assert uses
    for use in uses:
        getattr(adapter, use["method"])(*range(use["positional"]), **dict.fromkeys(use["keywords"]))
    assert set(engine._calls) == {u["method"] for u in uses}
    engine.chunk_size = 32  # an instance attribute of the real connector
    assert adapter.chunk_size == 32


@pytest.mark.parametrize("row", IN_PROCESS, ids=lambda r: r.version)
def test_metadata_keep_what_the_release_has_and_say_what_is_dropped(row: ReleaseRow) -> None:
    builder = MetadataBuilder(
        fake_from_row(row, SGLANG_LOAD_METADATA.name),
        fake_from_row(row, SGLANG_STORE_METADATA.name),
    )
    load = builder.load([1, 2], "slots", 0, prefix_pad=3, request_id="r1")
    store = builder.store("node", [1, 2], "idx", 0, request_id="r1")
    assert (load.token_ids, load.offset, store.kv_indices) == ([1, 2], 0, "idx")
    pad, rid = "prefix_pad", "request_id"
    if row.has(Capability.SGLANG_PREFIX_PAD):
        assert load.prefix_pad == 3
    else:
        assert not hasattr(load, pad) and pad in builder.dropped
    if row.has(Capability.SGLANG_REQUEST_ID):
        assert load.request_id == "r1" and store.request_id == "r1" and not builder.dropped
    else:
        assert builder.dropped[rid] == Capability.SGLANG_REQUEST_ID.spec.fallback_result
        assert "dropped" in repr(builder)


def test_the_torch_group_behind_what_sglang_hands_over() -> None:
    group = object()
    assert torch_group(None) is None
    assert torch_group(group) is group
    assert torch_group(Coordinator()) is Coordinator.device_group


def test_a_fake_of_each_role_is_probed_as_the_real_class_is() -> None:
    row = MATRIX.row(Capability.SGLANG_UNIFIED_MP.since)
    engine = instantiate(fake_from_row(row, SGLANG_LAYERWISE.name))
    adapter = SGLangLayerwiseAdapter(engine)
    assert Capability.SGLANG_CONFIG_FILE in adapter.capabilities
