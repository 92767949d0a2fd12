"""lmcache-compat: one stable API over every LMCache release.

``import lmcache_compat`` never imports torch, vLLM or LMCache; integrations import them lazily.
"""

from __future__ import annotations

from lmcache_compat.adapter import ConnectorAdapter
from lmcache_compat.catalog import CATALOG, Capability, CapabilitySpec
from lmcache_compat.errors import (
    LMCacheCompatError,
    LMCacheVersionError,
    MalformedResultError,
    MissingCapabilityError,
    NotAnEngineError,
)
from lmcache_compat.probe import Capabilities, clear_probe_cache, probe
from lmcache_compat.versions import installed_lmcache_version, parse_version

__version__ = "0.1.0"

__all__ = [
    "CATALOG",
    "Capabilities",
    "Capability",
    "CapabilitySpec",
    "ConnectorAdapter",
    "LMCacheCompatError",
    "LMCacheVersionError",
    "MalformedResultError",
    "MissingCapabilityError",
    "NotAnEngineError",
    "__version__",
    "clear_probe_cache",
    "installed_lmcache_version",
    "parse_version",
    "probe",
]
