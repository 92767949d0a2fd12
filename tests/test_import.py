"""``import lmcache_compat`` must not import torch, vLLM or LMCache (nor pay for metadata)."""

from __future__ import annotations

import json
import subprocess
import sys

FORBIDDEN = ("torch", "vllm", "lmcache", "sglang", "numpy", "importlib.metadata")


def _modules_after(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport sys, json; print(json.dumps(sorted(sys.modules)))"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return set(json.loads(out.splitlines()[-1]))


def test_import_pulls_in_none_of_the_wrapped_libraries() -> None:
    mods = _modules_after("import lmcache_compat")
    assert "lmcache_compat" in mods
    for name in FORBIDDEN:
        assert not any(m == name or m.startswith(name + ".") for m in mods), name


def test_probe_and_adapter_need_none_of_them_either() -> None:
    code = (
        "import lmcache_compat\n"
        "from tests.support.fakes import Fake_0_5_6\n"
        "a = lmcache_compat.ConnectorAdapter(Fake_0_5_6())\n"
        "a.get_block_ids_with_load_errors(); a.get_kv_events()\n"
    )
    mods = _modules_after(code)
    for name in ("torch", "vllm", "lmcache"):
        assert not any(m == name or m.startswith(name + ".") for m in mods), name


def test_the_sglang_package_and_its_plugin_import_none_of_them() -> None:
    mods = _modules_after(
        "import lmcache_compat.sglang, lmcache_compat.sglang.plugin\n"
        "from lmcache_compat.sglang import BACKEND_NAME, plan, VARIANTS\n"
    )
    for name in ("torch", "vllm", "lmcache", "sglang"):
        assert not any(m == name or m.startswith(name + ".") for m in mods), name
