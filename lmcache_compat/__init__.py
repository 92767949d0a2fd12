"""lmcache-compat: one stable API over every LMCache release.

``import lmcache_compat`` never imports torch, vLLM or LMCache; integrations import them lazily.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lmcache_compat.adapter import ConnectorAdapter
from lmcache_compat.catalog import CATALOG, Capability, CapabilitySpec
from lmcache_compat.errors import (
    LMCacheCompatError,
    LMCacheVersionError,
    MalformedResultError,
    MissingCapabilityError,
    NotAnEngineError,
    UnsupportedArgumentError,
)
from lmcache_compat.probe import Capabilities, clear_probe_cache, probe
from lmcache_compat.versions import installed_lmcache_version, parse_version

if TYPE_CHECKING:  # imported on first use (PEP 562) to keep `import lmcache_compat` cheap
    from lmcache_compat.engine import EngineAdapter, get_or_create_engine
    from lmcache_compat.mp import MPSchedulerAdapter, MPWorkerAdapter
    from lmcache_compat.mp_calls import MPConfig

_LAZY = {
    "EngineAdapter": "lmcache_compat.engine",
    "get_or_create_engine": "lmcache_compat.engine",
    "MPConfig": "lmcache_compat.mp_calls",
    "MPSchedulerAdapter": "lmcache_compat.mp",
    "MPWorkerAdapter": "lmcache_compat.mp",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'lmcache_compat' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


__version__ = "0.1.0"

__all__ = [
    "CATALOG",
    "Capabilities",
    "Capability",
    "CapabilitySpec",
    "ConnectorAdapter",
    "EngineAdapter",
    "LMCacheCompatError",
    "LMCacheVersionError",
    "MPConfig",
    "MPSchedulerAdapter",
    "MPWorkerAdapter",
    "MalformedResultError",
    "MissingCapabilityError",
    "NotAnEngineError",
    "UnsupportedArgumentError",
    "__version__",
    "clear_probe_cache",
    "get_or_create_engine",
    "installed_lmcache_version",
    "parse_version",
    "probe",
]
