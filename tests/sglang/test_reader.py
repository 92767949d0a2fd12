"""The static reader of sglang releases, on sglang trees the tests write (the grid's data and
the sglang-grid tier prove it on the real wheels)."""

from __future__ import annotations

from pathlib import Path

from lmcache_compat.sglang.known.bind import bind_pair
from lmcache_compat.sglang.known.reader import read_sglang
from lmcache_compat.upstream.matrix import load_matrix
from tests.support.archives import make_wheel

CACHE = "sglang/srt/mem_cache/storage/lmcache/lmc_radix_cache.py"
MOVED = "sglang/srt/mem_cache/lmcache/cache.py"
#: sglang 0.5.17 ... 0.5.20's shape, cut down: both modes, one try around every import.
LMC_RADIX = """
import enum
from typing import TYPE_CHECKING
try:
    from lmcache.integration.sglang.multi_process_adapter import LMCacheMPConnector
    from lmcache.integration.sglang.sglang_adapter import (
        LMCacheLayerwiseConnector, LoadMetadata, StoreMetadata,
    )
    from lmcache.integration.sglang.utils import lmcache_get_config
except ImportError as e:
    raise RuntimeError("LMCache is not installed. Please install it") from e
if TYPE_CHECKING:
    from lmcache.v1.whatever import Nothing

class LMCacheMode(enum.Enum):
    MP = enum.auto()
    IP = enum.auto()

class LMCRadixCache:
    def __init__(self, params, model_config=None, tp_size=1, rank=0, tp_group=None):
        connector_kwargs = dict(sgl_config=model_config, tp_size=tp_size, rank=rank,
                                k_pool=1, v_pool=2,
                                tp_group=tp_group.device_group if tp_group is not None else None)
        self._mode = LMCacheMode.IP if self.device.type == "xpu" else LMCacheMode.MP
        if self._mode is LMCacheMode.MP:
            cfg = lmcache_get_config("x")
            self.lmcache_connector = LMCacheMPConnector(page_size=1, host=cfg.h, port=cfg.p,
                                                        **connector_kwargs)
        elif self._mode is LMCacheMode.IP:
            self.lmcache_connector = LMCacheLayerwiseConnector(config_file="x",
                                                               **connector_kwargs)

    def match_prefix(self, params):
        return self.lmcache_connector.chunk_size()

    def _mp_match_prefix(self, key, req):
        return self.lmcache_connector.lookup_kv(key.raw_token_ids(), req.rid)

    def init_load_back(self, params):
        self.lmcache_connector.release_pending(params.req.rid)

    def _ip_load_back(self, token_ids):
        connector = self.lmcache_connector
        return connector.start_load_kv(LoadMetadata(token_ids=token_ids, slot_mapping=1, offset=0))
"""
PLUGINS = """
GENERAL_PLUGINS_GROUP = "sglang.srt.plugins"
OTHER_GROUP = "sglang.srt.platforms"

def load_plugins():
    return load_plugins_by_group(GENERAL_PLUGINS_GROUP)
"""


def _sglang(tmp_path: Path, files: dict[str, str], version: str = "9.0.0") -> Path:
    return make_wheel(
        tmp_path / f"sglang-{version}-py3-none-any.whl", files, name="sglang", version=version
    )


def test_import_lines_call_shapes_modes_and_the_plugin_group(tmp_path: Path) -> None:
    facts = read_sglang(
        _sglang(tmp_path, {CACHE: LMC_RADIX, "sglang/srt/plugins/__init__.py": PLUGINS})
    )
    assert facts["sglang"] == "9.0.0" and facts["plugin_group"] == "sglang.srt.plugins"
    assert not facts["registry"]
    (module,) = facts["integration"]
    assert module["cache_class"] == "LMCRadixCache"
    assert [i["module"].rsplit(".", 1)[-1] for i in module["imports"]] == [
        "multi_process_adapter",
        "sglang_adapter",
        "utils",
    ]  # the TYPE_CHECKING import is left out
    guards = [i["guard"] or "" for i in module["imports"]]
    assert all(g.startswith("RuntimeError: LMCache is not installed") for g in guards)
    calls = {c["callee"]: c for c in module["calls"]}
    layerwise = calls["LMCacheLayerwiseConnector"]
    assert layerwise["mode"] == "IP"
    assert (
        layerwise["keywords"]["tp_group"]
        == "tp_group.device_group if tp_group is not None else None"
    )
    assert set(layerwise["keywords"]) >= {
        "config_file",
        "sgl_config",
        "k_pool",
    }  # **kwargs expanded
    assert calls["LMCacheMPConnector"]["mode"] == "MP"
    assert calls["lmcache_get_config"]["positional"] == 1
    methods = {(m["method"], m["mode"]) for m in module["methods"]}
    assert {("chunk_size", "shared"), ("lookup_kv", "MP"), ("release_pending", "MP")} <= methods
    assert ("start_load_kv", "IP") in methods  # through the local alias
    lookup = next(m for m in module["methods"] if m["method"] == "lookup_kv")
    assert lookup["arguments"] == ["key.raw_token_ids()", "req.rid"]
    assert module["modes"] == {"in-process": "when self.device.type == 'xpu'", "mp": "default"}


def test_a_moved_cache_module_is_found_by_name(tmp_path: Path) -> None:
    facts = read_sglang(_sglang(tmp_path, {MOVED: LMC_RADIX}))
    (module,) = facts["integration"]
    assert module["module"] == "sglang.srt.mem_cache.lmcache.cache"


def test_an_sglang_without_lmcache_integration(tmp_path: Path) -> None:
    facts = read_sglang(_sglang(tmp_path, {"sglang/srt/other.py": "x = 1\n"}))
    assert facts["integration"] == [] and facts["plugin_group"] is None


def test_binding_the_read_facts(tmp_path: Path) -> None:
    facts = read_sglang(_sglang(tmp_path, {CACHE: LMC_RADIX}))
    matrix = load_matrix()
    old = bind_pair(facts, matrix.row("0.4.5"))
    assert old.status == "broken"
    assert (
        "No module named 'lmcache.integration.sglang.multi_process_adapter'"
        in old.modes[0]["reasons"][0]
    )
    assert bind_pair(facts, matrix.row("0.5.6")).status == "works"
