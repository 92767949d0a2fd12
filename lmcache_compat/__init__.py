"""lmcache-compat: one stable API over every LMCache release.

``import lmcache_compat`` never imports torch, vLLM or LMCache, and imports nothing of its own
until a name is used (PEP 562): the command line pays only for the command it runs.
"""

from __future__ import annotations

from lmcache_compat._lazy import lazy_names

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up time)
if TYPE_CHECKING:
    from lmcache_compat.core.adapter import ConnectorAdapter
    from lmcache_compat.core.binding import UnreadableMethodWarning
    from lmcache_compat.core.catalog import CATALOG, Capability, CapabilitySpec
    from lmcache_compat.core.probes import Capabilities, clear_probe_cache, probe
    from lmcache_compat.engine import EngineAdapter, get_or_create_engine
    from lmcache_compat.errors import (
        AmbiguousLocationError,
        LMCacheCompatError,
        LMCacheVersionError,
        MalformedResultError,
        MissingCapabilityError,
        MPServerError,
        MPServerURLError,
        MPVersionMismatchError,
        NotAFrontEndError,
        NotAnEngineError,
        UnknownCapabilityError,
        UnsupportedArgumentError,
        UpstreamNotFoundError,
    )
    from lmcache_compat.mp import MPSchedulerAdapter, MPWorkerAdapter
    from lmcache_compat.mp.config import MPConfig
    from lmcache_compat.versions import installed_lmcache_version, parse_version

#: Public name -> the module that defines it (imported on first use).
_LAZY = {
    "CATALOG": "lmcache_compat.core.catalog",
    "Capability": "lmcache_compat.core.catalog",
    "CapabilitySpec": "lmcache_compat.core.catalog",
    "Capabilities": "lmcache_compat.core.probes",
    "clear_probe_cache": "lmcache_compat.core.probes",
    "probe": "lmcache_compat.core.probes",
    "ConnectorAdapter": "lmcache_compat.core.adapter",
    "UnreadableMethodWarning": "lmcache_compat.core.binding",
    "EngineAdapter": "lmcache_compat.engine",
    "get_or_create_engine": "lmcache_compat.engine",
    "MPConfig": "lmcache_compat.mp.config",
    "MPSchedulerAdapter": "lmcache_compat.mp",
    "MPWorkerAdapter": "lmcache_compat.mp",
    "AmbiguousLocationError": "lmcache_compat.errors",
    "LMCacheCompatError": "lmcache_compat.errors",
    "MPServerError": "lmcache_compat.errors",
    "MPServerURLError": "lmcache_compat.errors",
    "MPVersionMismatchError": "lmcache_compat.errors",
    "NotAFrontEndError": "lmcache_compat.errors",
    "UnknownCapabilityError": "lmcache_compat.errors",
    "UpstreamNotFoundError": "lmcache_compat.errors",
    "LMCacheVersionError": "lmcache_compat.errors",
    "MalformedResultError": "lmcache_compat.errors",
    "MissingCapabilityError": "lmcache_compat.errors",
    "NotAnEngineError": "lmcache_compat.errors",
    "UnsupportedArgumentError": "lmcache_compat.errors",
    "installed_lmcache_version": "lmcache_compat.versions",
    "parse_version": "lmcache_compat.versions",
}


#: This release of lmcache-compat.
__version__ = "0.2.0"

__all__ = [
    "CATALOG",
    "AmbiguousLocationError",
    "Capabilities",
    "Capability",
    "CapabilitySpec",
    "ConnectorAdapter",
    "EngineAdapter",
    "LMCacheCompatError",
    "LMCacheVersionError",
    "MPConfig",
    "MPSchedulerAdapter",
    "MPServerError",
    "MPServerURLError",
    "MPVersionMismatchError",
    "MPWorkerAdapter",
    "MalformedResultError",
    "MissingCapabilityError",
    "NotAFrontEndError",
    "NotAnEngineError",
    "UnknownCapabilityError",
    "UnreadableMethodWarning",
    "UnsupportedArgumentError",
    "UpstreamNotFoundError",
    "__version__",
    "clear_probe_cache",
    "get_or_create_engine",
    "installed_lmcache_version",
    "parse_version",
    "probe",
]

__getattr__, __dir__ = lazy_names("lmcache_compat", _LAZY, globals(), __all__)
