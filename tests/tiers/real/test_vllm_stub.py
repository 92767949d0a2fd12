"""The unit tier's stand-in vLLM (tests/vllm/stub) mirrors the real vLLM 0.33.0: every member it
defines exists in the real one with the same parameters (names, kinds, defaults present), and the
event and output classes have the real fields (names, order, required-ness). Runs beside real
vLLM (the grid tiers): on 0.33.0 exactly; on an older vLLM the stand-in may only differ by what
0.33.0 added."""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import inspect
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

pytestmark = pytest.mark.real

STUB = Path(__file__).resolve().parents[2] / "vllm" / "stub"
#: What vLLM 0.33.0 added over 0.32.0 (the stand-in is 0.33.0).
NEW_IN_0_33 = {"unregister_kv_caches", "restore_kv_caches", "lookahead_token_ids"}


def _load_stub(dotted: str) -> ModuleType:
    """A stand-in module under its own private name (the real vLLM stays the imported one)."""
    path = STUB.joinpath(*dotted.split(".")).with_suffix(".py")
    spec = importlib.util.spec_from_file_location(f"_stub_{dotted.replace('.', '_')}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def vllm_version() -> Iterator[str]:
    import vllm

    yield str(vllm.__version__)


def _shape(fn: Any) -> list[tuple[str, str, bool]]:
    sig = inspect.signature(fn)
    return [(p.name, p.kind.name, p.default is not p.empty) for p in sig.parameters.values()]


def _fields(cls: Any) -> list[tuple[str, bool]]:
    if hasattr(cls, "__struct_fields__"):
        structs: Any = importlib.import_module("msgspec.structs")
        return [(f.name, bool(f.required)) for f in structs.fields(cls)]
    missing = dataclasses.MISSING
    return [
        (f.name, f.default is missing and f.default_factory is missing)
        for f in dataclasses.fields(cls)
    ]


def test_the_connector_base_class(vllm_version: str) -> None:
    from vllm.distributed.kv_transfer.kv_connector.v1 import base as real

    stub = _load_stub("vllm.distributed.kv_transfer.kv_connector.v1.base")
    cls, real_cls = stub.KVConnectorBase_V1, real.KVConnectorBase_V1
    assert set(cls.__abstractmethods__) == set(real_cls.__abstractmethods__)
    for name, member in vars(cls).items():
        if (name.startswith("_") and name != "__init__") or not callable(member):
            continue
        if name not in vars(real_cls) and vllm_version != "0.33.0" and name in NEW_IN_0_33:
            continue
        assert name in vars(real_cls), name
        assert _shape(getattr(cls, name)) == _shape(getattr(real_cls, name)), name
    assert [r.name for r in stub.KVConnectorRole] == [r.name for r in real.KVConnectorRole]


def test_the_event_and_output_classes(vllm_version: str) -> None:
    from vllm.distributed import kv_events as real
    from vllm.v1 import outputs as real_outputs

    stub = _load_stub("vllm.distributed.kv_events")
    for name in ("BlockStored", "BlockRemoved"):
        got, want = _fields(getattr(stub, name)), _fields(getattr(real, name))
        if vllm_version != "0.33.0":
            got = [f for f in got if f[0] not in NEW_IN_0_33]
        assert got == want, name
    outputs = _load_stub("vllm.v1.outputs")
    assert [f.name for f in dataclasses.fields(outputs.KVConnectorOutput)] == [
        f.name for f in dataclasses.fields(real_outputs.KVConnectorOutput)
    ]
    assert {m for m in vars(stub.KVConnectorKVEvents) if not m.startswith("_")} <= set(
        dir(real.KVConnectorKVEvents)
    )


def test_the_factory(vllm_version: str) -> None:
    from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory

    stub = _load_stub("vllm.distributed.kv_transfer.kv_connector.factory")
    for name in ("register_connector", "get_connector_class_by_name", "create_connector"):
        got = [p[0] for p in _shape(getattr(stub.KVConnectorFactory, name))]
        want = [p[0] for p in _shape(getattr(KVConnectorFactory, name))]
        assert got == want, name


def test_the_mp_connector_stand_ins(vllm_version: str) -> None:
    """The fields of ``CachedRequestData`` the MP connector reads exist in the real class, and
    the stand-in in-tree MP connector reads a subset of the real one's keys, with its
    defaults (``lmcache_compat.vllm.mp_plan.reference_keys`` on both sources)."""
    from vllm.v1.core.sched import output as real

    from lmcache_compat.upstream import locations as loc
    from lmcache_compat.vllm.mp_plan import reference_keys

    stub = _load_stub("vllm.v1.core.sched.output")
    real_fields = {f.name for f in dataclasses.fields(real.CachedRequestData)}
    assert {f.name for f in dataclasses.fields(stub.CachedRequestData)} <= real_fields
    module = loc.VLLM_LMCACHE_MP_CONNECTOR.modules[0]
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin is not None
    real_keys = reference_keys(Path(spec.origin).read_text())
    stub_path = STUB.joinpath(*module.split(".")).with_suffix(".py")
    stub_keys = reference_keys(stub_path.read_text())
    assert stub_keys.items() <= real_keys.items()
