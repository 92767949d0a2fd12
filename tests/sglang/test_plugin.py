"""The ``sglang.srt.plugins`` entry point against a stand-in sglang registry (the sglang tier
runs it with sglang's real one): idempotent, asks the registry first, survives a concurrent
registration, and on an sglang without the registry says so in one line."""

from __future__ import annotations

import importlib
import logging
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import tomllib

from lmcache_compat.sglang import BACKEND_NAME, register
from lmcache_compat.upstream.resolve import clear_find_cache
from tests.support.archives import make_tree
from tools.paths import ROOT

REGISTRY = """
CALLS = []
_REGISTRY = {}

def register_radix_cache_backend(name, factory):
    CALLS.append(name)
    if name in _REGISTRY:
        raise ValueError(f"{name!r} is already registered")
    _REGISTRY[name] = factory

def get_radix_cache_factory(name):
    return _REGISTRY.get(name)
"""


@pytest.fixture
def sglang_site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    clear_find_cache()
    yield tmp_path
    for name in [m for m in sys.modules if m == "sglang" or m.startswith("sglang.")]:
        del sys.modules[name]
    clear_find_cache()


def _registry(site: Path, text: str = REGISTRY) -> None:
    make_tree(site, {"sglang/__init__.py": "", "sglang/srt/mem_cache/registry.py": text})


def test_register_is_idempotent_and_asks_the_registry_first(sglang_site: Path) -> None:
    _registry(sglang_site)
    register()
    register()
    registry = importlib.import_module("sglang.srt.mem_cache.registry")
    assert registry.CALLS == [BACKEND_NAME]
    from lmcache_compat.sglang.backend import build

    assert registry.get_radix_cache_factory(BACKEND_NAME) is build
    assert not any(m.split(".")[0] in ("torch", "lmcache") for m in sys.modules)


def test_a_concurrent_registration_is_not_an_error(sglang_site: Path) -> None:
    _registry(
        sglang_site,
        REGISTRY + "\n_asked = []\n"
        "def get_radix_cache_factory(name):\n"
        "    _asked.append(name)\n"
        "    if len(_asked) == 1:\n"
        "        _REGISTRY[name] = 'another process'\n"
        "        return None\n"
        "    return _REGISTRY.get(name)\n",
    )
    register()  # registering raises "already registered"; the registry has it: fine


def test_an_sglang_without_the_registry_is_told_in_one_line(
    sglang_site: Path, caplog: pytest.LogCaptureFixture
) -> None:
    make_tree(sglang_site, {"sglang/__init__.py": "", "sglang/srt/other.py": ""})
    with caplog.at_level(logging.WARNING):
        register()
    (record,) = caplog.records
    assert "no radix-cache registry" in record.getMessage()
    assert "\n" not in record.getMessage()


def test_the_entry_point_is_declared() -> None:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    group = data["project"]["entry-points"]["sglang.srt.plugins"]
    assert group == {"lmcache_compat": "lmcache_compat.sglang.plugin:register"}
