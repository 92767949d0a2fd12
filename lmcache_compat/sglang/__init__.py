"""lmcache-compat for SGLang: adapters over LMCache's SGLang connectors of every release, and a
radix-cache backend (the ``sglang.srt.plugins`` entry point) that serves sglang 0.5.13 on.

Importing this package imports neither sglang, torch nor LMCache: every name is loaded on first
use (PEP 562).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lmcache_compat._lazy import lazy_names

if TYPE_CHECKING:
    from lmcache_compat.sglang.adapters import (
        CompletedFuture,
        SGLangLayerwiseAdapter,
        SGLangMPAdapter,
        SGLangUnifiedAdapter,
    )
    from lmcache_compat.sglang.backend import BackendRefused
    from lmcache_compat.sglang.decisions import Plan, plan
    from lmcache_compat.sglang.metadata import MetadataBuilder
    from lmcache_compat.sglang.plugin import BACKEND_NAME, register
    from lmcache_compat.sglang.upstream import SGLangImportError, load_config, torch_group
    from lmcache_compat.sglang.variants import VARIANTS, Variant

__all__ = [
    "BACKEND_NAME",
    "VARIANTS",
    "BackendRefused",
    "CompletedFuture",
    "MetadataBuilder",
    "Plan",
    "SGLangImportError",
    "SGLangLayerwiseAdapter",
    "SGLangMPAdapter",
    "SGLangUnifiedAdapter",
    "Variant",
    "load_config",
    "plan",
    "register",
    "torch_group",
]

#: Public name -> the module that defines it (imported on first use).
_LAZY = {
    "BACKEND_NAME": "lmcache_compat.sglang.plugin",
    "register": "lmcache_compat.sglang.plugin",
    "BackendRefused": "lmcache_compat.sglang.backend",
    "CompletedFuture": "lmcache_compat.sglang.adapters",
    "SGLangLayerwiseAdapter": "lmcache_compat.sglang.adapters",
    "SGLangMPAdapter": "lmcache_compat.sglang.adapters",
    "SGLangUnifiedAdapter": "lmcache_compat.sglang.adapters",
    "MetadataBuilder": "lmcache_compat.sglang.metadata",
    "SGLangImportError": "lmcache_compat.sglang.upstream",
    "load_config": "lmcache_compat.sglang.upstream",
    "torch_group": "lmcache_compat.sglang.upstream",
    "Plan": "lmcache_compat.sglang.decisions",
    "plan": "lmcache_compat.sglang.decisions",
    "VARIANTS": "lmcache_compat.sglang.variants",
    "Variant": "lmcache_compat.sglang.variants",
}


__getattr__, __dir__ = lazy_names(__name__, _LAZY, globals(), __all__)
