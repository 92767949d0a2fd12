"""LMCache's SGLang integration in the scanner and the shipped matrix: the classes and
``lmcache_get_config`` are found where a release put them (by name, within an ``sglang`` module,
never the vLLM or TensorRT-LLM namesakes), and removed capabilities count as such."""

from __future__ import annotations

from pathlib import Path

import pytest

from lmcache_compat import Capability
from lmcache_compat.core.roles import SGLANG_LAYERWISE, SGLANG_MP
from lmcache_compat.errors import MissingCapabilityError
from lmcache_compat.upstream import locations as loc
from lmcache_compat.upstream.matrix import load_matrix
from lmcache_compat.upstream.scanner import scan
from lmcache_compat.versions import expectation, parse_version
from tests.support.archives import ADAPTER_0_3_10_POST2, V1, make_wheel

SGLANG_ADAPTER = """
from dataclasses import dataclass

@dataclass
class LoadMetadata:
    token_ids: list
    slot_mapping: object
    offset: int
    prefix_pad: int = 0

@dataclass
class StoreMetadata:
    last_node: object
    token_ids: list
    kv_indices: object
    offset: int

class LMCacheConnector:
    def __init__(self, sgl_config, tp_size, rank, k_pool, v_pool, config_file): ...
    def load_kv(self, load_metadata): ...
    def store_kv(self, store_metadata): ...
    def chunk_size(self): ...
    def reset(self): ...
    def close(self): ...

class LMCacheLayerwiseConnector(LMCacheConnector):
    def __init__(self, sgl_config, tp_size, rank, k_pool, v_pool, config_file, tp_group=None):
        ...
    def start_load_kv(self, load_metadata): ...
    def load_kv_layerwise(self, layer_id): ...
    def store_kv(self, store_metadata): ...
"""
#: vLLM's own connector of the same name (lmcache/integration/vllm in 0.4.4 on).
VLLM_MP_CONNECTOR = """
class LMCacheMPConnector:
    def __init__(self, vllm_config, role, kv_cache_config=None): ...
    def start_load_kv(self, forward_context, **kwargs): ...
"""
UTILS = """
def lmcache_get_config(config_file: str = ""):
    ...
"""


def _wheel(tmp_path: Path, files: dict[str, str]) -> Path:
    return make_wheel(tmp_path / "lmcache-9.0.0-py3-none-any.whl", files, version="9.0.0")


def test_the_sglang_classes_and_the_config_loader_are_read_at_their_known_paths(
    tmp_path: Path,
) -> None:
    wheel = _wheel(
        tmp_path,
        {
            V1: ADAPTER_0_3_10_POST2,
            "lmcache/integration/sglang/sglang_adapter.py": SGLANG_ADAPTER,
            "lmcache/integration/sglang/utils.py": UTILS,
        },
    )
    data = scan(wheel).to_json()
    assert data["modules"][SGLANG_LAYERWISE.name] == loc.SGLANG_LAYERWISE.modules[0]
    assert data["functions"]["lmcache_get_config"] == {
        "params": ["config_file"],
        "optional": ["config_file"],
        "defaults": {"config_file": "''"},
        "annotations": {"config_file": "str"},
    }
    caps = data["capabilities"]
    assert caps["sglang_in_process"] and caps["sglang_config_file"] and caps["sglang_tp_group"]
    assert caps["sglang_prefix_pad"] and not caps["sglang_request_id"]  # StoreMetadata lacks it
    assert not caps["sglang_mp"] and not caps["sglang_unified_mp"]
    assert "LMCacheMPConnector" in data["missing_classes"]


def test_a_moved_sglang_module_is_found_by_name_and_namesakes_elsewhere_are_not(
    tmp_path: Path,
) -> None:
    moved = "lmcache/inprocess/integration/sglang/"
    wheel = _wheel(
        tmp_path,
        {
            V1: ADAPTER_0_3_10_POST2,
            moved + "sglang_adapter.py": SGLANG_ADAPTER,
            moved + "utils.py": UTILS,
            # namesakes outside any sglang module: never taken for SGLang's
            "lmcache/integration/vllm/lmcache_mp_connector.py": VLLM_MP_CONNECTOR,
            "lmcache/integration/tensorrt_llm/utils.py": UTILS,
        },
    )
    result = scan(wheel)
    assert (
        result.modules[SGLANG_LAYERWISE.name]
        == "lmcache.inprocess.integration.sglang.sglang_adapter"
    )
    assert result.found_by[SGLANG_LAYERWISE.name] == "search"
    assert result.modules["lmcache_get_config"] == "lmcache.inprocess.integration.sglang.utils"
    assert SGLANG_MP.name in result.missing_classes
    assert not result.ambiguous


def test_a_removed_capability_names_the_range_that_has_it() -> None:
    matrix = load_matrix()
    spec = Capability.SGLANG_IN_PROCESS.spec
    assert spec.removed is not None
    assert matrix.since(Capability.SGLANG_IN_PROCESS) == spec.since
    assert not matrix.row(spec.removed).has(Capability.SGLANG_IN_PROCESS)
    assert expectation(spec.since, parse_version(spec.removed), spec.removed) == "no"
    assert expectation(spec.since, parse_version(spec.since), spec.removed) == "yes"
    error = MissingCapabilityError(
        spec.capability.value,
        member=spec.member,
        cls_name="X",
        installed=spec.removed,
        since=spec.since,
        removed=spec.removed,
    )
    assert f"lmcache>={spec.since},<{spec.removed}" in str(error)
    import pickle

    assert str(pickle.loads(pickle.dumps(error))) == str(error)


@pytest.mark.parametrize("capability", [c for c in Capability if c.value.startswith("sglang_")])
def test_every_sglang_capability_has_its_first_release_in_the_matrix(
    capability: Capability,
) -> None:
    matrix = load_matrix()
    first = matrix.row(capability.since)
    assert first.has(capability)
    before = [r for r in matrix.rows if parse_version(r.version) < parse_version(capability.since)]
    assert before and not before[-1].has(capability)
