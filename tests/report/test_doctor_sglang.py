"""``doctor`` with sglang installed (trees the tests write in a temp site dir): sglang's own
integration is judged from the installed files of both packages (nothing is imported), the fix
names the lmcache-compat backend where it serves the pair, else the LMCache releases that work;
with vLLM installed too, both verdicts are reported."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from lmcache_compat.report.cli import main
from tests.report.conftest import install_dist as _dist
from tests.sglang.test_reader import CACHE, LMC_RADIX
from tests.support.archives import ADAPTER_0_3_10_POST2, V1, make_tree
from tests.upstream.test_sglang_surface import SGLANG_ADAPTER, UTILS

REGISTRY = """
from dataclasses import dataclass

@dataclass
class TreeCacheBuildContext:
    server_args: object
    params: object

def register_radix_cache_backend(name, factory): ...

def get_radix_cache_factory(name): ...
"""
RADIX = """
class RadixKey:
    def __init__(self, token_ids, extra_key=None, is_bigram=False, cache_salt=None): ...
    def raw_token_ids(self): ...

class RadixCache:
    def match_prefix(self, params): ...
    def cache_finished_req(self, req, is_insert=True, *, kv_len_to_handle): ...
"""
REQ = """
class Req:
    def __init__(self):
        self.kv = None
"""
MP_ADAPTER = """
class LMCacheMPConnector:
    def __init__(self, sgl_config, tp_size, rank, page_size, host, port, k_pool, v_pool,
                 tp_group=None, mq_timeout=1.0): ...
    def chunk_size(self): ...
    def lookup_kv(self, token_ids, request_id): ...
    def release_pending(self, request_id): ...
    def retrieve_kv(self, load_metadata): ...
    def store_kv(self, store_metadata): ...
    def end_session(self, request_id): ...
    def reset(self): ...
    def close(self): ...
"""


def _sglang(site: Path, registry: bool) -> None:
    files = {"sglang/__init__.py": "", CACHE: LMC_RADIX}
    if registry:
        files |= {
            "sglang/srt/mem_cache/registry.py": REGISTRY,
            "sglang/srt/mem_cache/radix_cache.py": RADIX,
            "sglang/srt/managers/schedule_batch.py": REQ,
        }
    make_tree(site, files)
    _dist(site, "sglang", "9.0.0")


def _lmcache(site: Path, *, mp: bool) -> None:
    files = {
        "lmcache/integration/sglang/sglang_adapter.py": SGLANG_ADAPTER,
        "lmcache/integration/sglang/utils.py": UTILS,
        V1: ADAPTER_0_3_10_POST2,
    }
    if mp:
        files["lmcache/integration/sglang/multi_process_adapter.py"] = MP_ADAPTER
    make_tree(site, files)
    _dist(site, "lmcache", "0.5.6" if mp else "0.4.5")


def _doctor(capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any], str]:
    code = main(["doctor", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert main(["doctor"]) == code
    return code, report, capsys.readouterr().out


def test_a_broken_pair_without_a_plugin_mechanism_names_the_lmcache_that_works(
    site: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _sglang(site, registry=False)
    _lmcache(site, mp=False)
    code, report, text = _doctor(capsys)
    assert code == 1 and report["verdict"] == "broken" and report["sglang_verdict"] == "broken"
    assert report["vllm_verdict"] == "unknown"
    (issue,) = [i for i in report["issues"] if i["connector_key"] == "sglang"]
    assert "RuntimeError: LMCache is not installed" in issue["problem"]
    assert "the real cause" in issue["problem"] and "multi_process_adapter" in issue["problem"]
    assert "0.4.6 ... 0.5.6" in issue["fix"] and "--radix-cache-backend" not in issue["fix"]
    assert report["sglang_integration"]["plugin"]["serves"] is False
    assert "Verdict for sglang 9.0.0 + LMCache 0.4.5: BROKEN" in text
    assert "Verdict for vLLM" not in text  # vLLM is not installed: no vLLM block
    assert not any(m.split(".")[0] in ("sglang", "lmcache") for m in sys.modules)


def test_the_fix_names_the_backend_where_it_serves_the_pair(
    site: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _sglang(site, registry=True)
    _lmcache(site, mp=False)
    _, report, _ = _doctor(capsys)
    (issue,) = [i for i in report["issues"] if i["connector_key"] == "sglang"]
    assert "--radix-cache-backend lmcache-compat" in issue["fix"]
    assert "in-process mode" in issue["fix"] and "needs CUDA" in issue["fix"]


def test_a_working_pair_exits_0_and_vllm_is_reported_beside_it(
    site: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _sglang(site, registry=True)
    _lmcache(site, mp=True)
    make_tree(site, {"vllm/__init__.py": ""})
    _dist(site, "vllm", "0.32.0")
    code, report, text = _doctor(capsys)
    assert report["sglang_verdict"] == "ok"
    assert report["sglang_integration"]["modes"][1]["status"] == "works"
    assert report["vllm"] == "0.32.0" and report["vllm_verdict"] != "unknown"
    assert "Verdict for vLLM 0.32.0" in text and "Verdict for sglang 9.0.0" in text
    assert code == (1 if report["vllm_verdict"] == "broken" else 0)
