"""lmcache-compat for SGLang: adapters over LMCache's SGLang connectors of every release, and a
radix-cache backend (the ``sglang.srt.plugins`` entry point) that serves sglang 0.5.13 on.

Importing this package imports neither sglang, torch nor LMCache: every name is loaded on first
use (PEP 562).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lmcache_compat.sglang.plan import Plan, plan
    from lmcache_compat.sglang.variants import VARIANTS, Variant

__all__ = ["VARIANTS", "Plan", "Variant", "plan"]

#: Public name -> the module that defines it (imported on first use).
_LAZY = {
    "Plan": "lmcache_compat.sglang.plan",
    "plan": "lmcache_compat.sglang.plan",
    "VARIANTS": "lmcache_compat.sglang.variants",
    "Variant": "lmcache_compat.sglang.variants",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'lmcache_compat.sglang' has no attribute {name!r}")
    import importlib  # lazy: import lmcache_compat.sglang stays light (PEP 562)

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
