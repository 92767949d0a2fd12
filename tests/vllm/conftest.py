"""The connector's unit tier runs without vLLM: ``stub/`` holds a stand-in vLLM 0.33.0 (its
connector base class, factory, event and output classes) and a stand-in LMCache 0.5.6 (its
``LMCacheConnectorV1Impl`` surface and event classes). The ``stub`` fixture puts both first on
``sys.path`` and forgets every cached fact about the installed packages before and after, so the
connector finds them exactly as it finds the real ones: by reading their files."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

STUB = Path(__file__).resolve().parent / "stub"
#: Modules that read the installed vLLM or LMCache when imported.
_READS_UPSTREAM = (
    "lmcache_compat.vllm.connector",
    "lmcache_compat.vllm.events",
    "lmcache_compat.vllm.mp_connector",
)


def _forget() -> None:
    from lmcache_compat import vllm as package
    from lmcache_compat.core.probes import clear_probe_cache
    from lmcache_compat.distributions import clear_installed
    from lmcache_compat.upstream.resolve import clear_find_cache
    from lmcache_compat.vllm import decisions, facts

    for name in list(sys.modules):
        if name.split(".")[0] in ("vllm", "lmcache") or name in _READS_UPSTREAM:
            del sys.modules[name]
    for name in package._LAZY:
        package.__dict__.pop(name, None)
    facts.vllm_facts.cache_clear()
    decisions.engine_has_sleep_hooks.cache_clear()
    clear_installed()
    clear_find_cache()
    clear_probe_cache()
    importlib.invalidate_caches()


@pytest.fixture
def stub(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """The stand-in vLLM and LMCache installed; yields ``lmcache_compat.vllm``."""
    _forget()
    monkeypatch.syspath_prepend(str(STUB))
    importlib.invalidate_caches()
    import lmcache_compat.vllm

    yield lmcache_compat.vllm
    monkeypatch.undo()
    _forget()
