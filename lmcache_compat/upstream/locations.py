"""Where upstream code lives: every LMCache and vLLM class (and function) lmcache-compat touches.

Each :class:`Place` names one upstream symbol, the distribution that ships it and the dotted
modules it is known to live in, **newest first**. The scanner, the connector, the MP adapters,
``get_or_create_engine`` and ``doctor`` all find upstream code through these entries and
:mod:`lmcache_compat.upstream.resolve`; no other module of lmcache-compat spells an upstream
module path (``tests/upstream/test_locations.py`` proves it).

A known path is a hint, not a requirement: when a release moves a class to a module listed
nowhere here (LMCache 0.5.7rc2 moved the in-process code under ``lmcache.inprocess`` and left
nothing behind), :func:`lmcache_compat.upstream.resolve.locate` finds it by class name anywhere in
the package and says where. Add the new path here when a release is added to the shipped matrix
(``tests/upstream/test_locations.py`` fails until every module the matrix records is listed).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from lmcache_compat.core import roles

__all__ = [
    "BLOCK_REMOVED",
    "BLOCK_STORED",
    "CACHE_REMOVE_EVENT",
    "CACHE_STORE_EVENT",
    "CONFIG_ALIASES",
    "CONFIG_ALIAS_RESOLVER",
    "CONFIG_CLASS",
    "CONFIG_DEFINITIONS",
    "CONFIG_GETTER",
    "CONFIG_GETTER_OLD",
    "CONFIG_PLACES",
    "CONFIG_SAFE_CONVERTER",
    "CONNECTOR_IMPL",
    "CONTROLLER_DEFINITIONS",
    "DEPRECATED_CONFIGS",
    "EC_ENV_PREFIX",
    "EC_FILE_PREFIX",
    "ENGINE",
    "ENGINE_BUILDER",
    "KV_CONNECTOR_BASE",
    "KV_CONNECTOR_FACTORY",
    "KV_CONNECTOR_KV_EVENTS",
    "KV_CONNECTOR_OUTPUT",
    "KV_EVENT_AGGREGATOR",
    "LEGACY_CONFIG_CLASS",
    "LMCACHE",
    "LMCACHE_SCANNED",
    "LOAD_STORE_OP",
    "MP_CLI_COORDINATOR",
    "MP_CLI_SERVER",
    "MP_COMMANDS",
    "MP_HTTP_SERVER_ARGS",
    "MP_ORCHESTRATOR_ARGS",
    "MP_SCHEDULER",
    "MP_SERVER_ARGS",
    "MP_WORKER",
    "NATIVE_CONNECTOR_IMPL",
    "NATIVE_LOAD_STORE_OP",
    "NATIVE_MP_SCHEDULER",
    "NATIVE_MP_WORKER",
    "NATIVE_PARALLEL_STRATEGY",
    "NATIVE_SCANNED",
    "PACK_TOKEN_IDS",
    "PARALLEL_STRATEGY",
    "PLACES",
    "SGLANG",
    "SGLANG_CONNECTOR",
    "SGLANG_EXTERNAL_FLOW",
    "SGLANG_GET_CONFIG",
    "SGLANG_KV_COMPONENT_GROUP",
    "SGLANG_LAYERWISE",
    "SGLANG_LOAD_METADATA",
    "SGLANG_LOAD_OPERATION",
    "SGLANG_LOOKUP_OPERATION",
    "SGLANG_MP",
    "SGLANG_PENDING_STORE",
    "SGLANG_SCANNED",
    "SGLANG_STORE_METADATA",
    "SGLANG_STORE_OPERATION",
    "SGLANG_UNIFIED",
    "VLLM",
    "VLLM_LMCACHE_CONNECTOR",
    "VLLM_LMCACHE_MP_CONNECTOR",
    "MPCommand",
    "Place",
    "module_file",
]

#: Distribution (and top-level package) names.
LMCACHE = "lmcache"
VLLM = "vllm"


@dataclass(frozen=True)
class Place:
    """One upstream symbol and the modules it is known to live in, newest first."""

    name: str
    package: str
    modules: tuple[str, ...]
    #: ``"table"``: a module-level assignment (a configuration table or constant).
    kind: Literal["class", "function", "table"] = "class"
    #: Members that identify the symbol when a search by name finds several candidates
    #: (roles use the catalog's core methods instead; see :func:`resolve.identifying_members`).
    core: tuple[str, ...] = field(default=())
    #: Where a search by name looks when no known path has the symbol (default: the package).
    under: str | None = None
    #: A component every candidate module of a search by name must have in its dotted path
    #: (``"sglang"``: LMCache's SGLang code, wherever a release moves it, and never the
    #: namesakes its vLLM and TensorRT-LLM integrations define).
    segment: str | None = None

    @property
    def search_under(self) -> str:
        return self.under or self.package

    def admits(self, dotted: str) -> bool:
        """Whether a definition found by name in module ``dotted`` may be this symbol."""
        return self.segment is None or self.segment in dotted.split(".")

    def __post_init__(self) -> None:
        bad = [m for m in self.modules if m.split(".")[0] != self.package]
        if not self.modules or bad:
            raise ValueError(f"{self.name}: modules {bad or '()'} are not in {self.package}")

    @property
    def files(self) -> tuple[str, ...]:
        """The known modules as POSIX paths relative to site-packages."""
        return tuple(module_file(m) for m in self.modules)


def module_file(dotted: str) -> str:
    """``a.b.c`` -> ``a/b/c.py``."""
    return dotted.replace(".", "/") + ".py"


_ADAPTER = "lmcache.integration.vllm.vllm_multi_process_adapter"
_NATIVE = "vllm.distributed.kv_transfer.kv_connector.v1.lmcache_integration."
#: vLLM is large: a search for its classes stays in the KV-transfer code.
_KV = "vllm.distributed.kv_transfer"

# --- LMCache ------------------------------------------------------------------------------------

#: The engine object vLLM's ``LMCacheConnectorV1`` keeps as ``_lmcache_engine``.
#: 0.5.7rc2 moved it under ``lmcache.inprocess`` (nothing left at the old path).
CONNECTOR_IMPL = Place(
    roles.CONNECTOR.name,
    LMCACHE,
    (
        "lmcache.inprocess.integration.vllm.vllm_v1_adapter",
        "lmcache.integration.vllm.vllm_v1_adapter",
    ),
)
#: The multi-process adapters and their argument types (0.3.13 on).
MP_SCHEDULER = Place(roles.MP_SCHEDULER.name, LMCACHE, (_ADAPTER,))
MP_WORKER = Place(roles.MP_WORKER.name, LMCACHE, (_ADAPTER,))
LOAD_STORE_OP = Place("LoadStoreOp", LMCACHE, (_ADAPTER,), core=("block_ids",))
PARALLEL_STRATEGY = Place("ParallelStrategy", LMCACHE, (_ADAPTER,), core=("tp_size",))
#: The core engine and its builder. 0.3.1-0.3.10.post2 also define unrelated classes of these
#: names in ``lmcache/cache_engine.py`` (the v0 engine): only the paths below count.
ENGINE = Place(
    roles.ENGINE.name, LMCACHE, ("lmcache.inprocess.v1.cache_engine", "lmcache.v1.cache_engine")
)
ENGINE_BUILDER = Place(
    "LMCacheEngineBuilder",
    LMCACHE,
    ("lmcache.inprocess.v1.cache_engine", "lmcache.v1.cache_engine"),
    core=("get_or_create",),
)
#: KV cache event classes (0.3.10.post2; ``CacheRemoveEvent`` 0.5.6).
CACHE_STORE_EVENT = Place("CacheStoreEvent", LMCACHE, ("lmcache.utils",), core=("block_hashes",))
CACHE_REMOVE_EVENT = Place("CacheRemoveEvent", LMCACHE, ("lmcache.utils",), core=("block_hashes",))
#: The codec of packed token ids (0.5.7rc2: big-endian uint32 words).
PACK_TOKEN_IDS = Place(
    "pack_token_ids", LMCACHE, ("lmcache.v1.multiprocess.token_codec",), kind="function"
)

# --- vLLM's vendored copy of LMCache's adapter (``use_native=True``) ----------------------------

NATIVE_CONNECTOR_IMPL = Place(roles.CONNECTOR.name, VLLM, (_NATIVE + "vllm_v1_adapter",), under=_KV)
NATIVE_MP_SCHEDULER = Place(
    roles.MP_SCHEDULER.name, VLLM, (_NATIVE + "multi_process_adapter",), under=_KV
)
NATIVE_MP_WORKER = Place(
    roles.MP_WORKER.name, VLLM, (_NATIVE + "multi_process_adapter",), under=_KV
)
NATIVE_LOAD_STORE_OP = Place(
    "LoadStoreOp", VLLM, (_NATIVE + "multi_process_adapter",), core=("block_ids",), under=_KV
)
NATIVE_PARALLEL_STRATEGY = Place(
    "ParallelStrategy", VLLM, (_NATIVE + "multi_process_adapter",), core=("tp_size",), under=_KV
)

# --- vLLM ---------------------------------------------------------------------------------------

KV_CONNECTOR_BASE = Place("KVConnectorBase_V1", VLLM, (_KV + ".kv_connector.v1.base",), under=_KV)
KV_CONNECTOR_FACTORY = Place(
    "KVConnectorFactory", VLLM, (_KV + ".kv_connector.factory",), under=_KV
)
#: vLLM's in-tree connector over LMCache (what ``LMCacheCompatConnector`` replaces), and its
#: multi-process one.
VLLM_LMCACHE_CONNECTOR = Place(
    "LMCacheConnectorV1", VLLM, (_KV + ".kv_connector.v1.lmcache_connector",), under=_KV
)
VLLM_LMCACHE_MP_CONNECTOR = Place(
    "LMCacheMPConnector", VLLM, (_KV + ".kv_connector.v1.lmcache_mp_connector",), under=_KV
)
_EVENTS = "vllm.distributed.kv_events"
BLOCK_STORED = Place("BlockStored", VLLM, (_EVENTS,), under=_EVENTS)
BLOCK_REMOVED = Place("BlockRemoved", VLLM, (_EVENTS,), under=_EVENTS)
#: The connector KV-event path (vLLM 0.13.0 on).
KV_CONNECTOR_KV_EVENTS = Place("KVConnectorKVEvents", VLLM, (_EVENTS,), under=_EVENTS)
KV_EVENT_AGGREGATOR = Place("KVEventAggregator", VLLM, (_EVENTS,), under=_EVENTS)
#: Carries ``invalid_block_ids`` (failed KV loads) from the worker to the scheduler (0.11.2 on).
KV_CONNECTOR_OUTPUT = Place("KVConnectorOutput", VLLM, ("vllm.v1.outputs",), under="vllm.v1")

# --- LMCache's SGLang integration (``lmcache/integration/sglang``) ----------------------------
# 0.3.1 on (the in-process adapter), 0.4.6 (the MP connector), 0.5.6 (the unified MP connector);
# 0.5.7rc2 removed the in-process and legacy MP modules. A search by name accepts only modules
# with an ``sglang`` component (the vLLM integration has its own ``LMCacheMPConnector``).

_SGL = "lmcache.integration.sglang."
SGLANG = "sglang"
SGLANG_CONNECTOR = Place(
    "LMCacheConnector",
    LMCACHE,
    (_SGL + "sglang_adapter",),
    core=("load_kv", "store_kv"),
    segment=SGLANG,
)
SGLANG_LAYERWISE = Place(
    roles.SGLANG_LAYERWISE.name, LMCACHE, (_SGL + "sglang_adapter",), segment=SGLANG
)
SGLANG_LOAD_METADATA = Place(
    roles.SGLANG_LOAD_METADATA.name, LMCACHE, (_SGL + "sglang_adapter",), segment=SGLANG
)
SGLANG_STORE_METADATA = Place(
    roles.SGLANG_STORE_METADATA.name, LMCACHE, (_SGL + "sglang_adapter",), segment=SGLANG
)
SGLANG_MP = Place(roles.SGLANG_MP.name, LMCACHE, (_SGL + "multi_process_adapter",), segment=SGLANG)
SGLANG_UNIFIED = Place(
    roles.SGLANG_UNIFIED.name, LMCACHE, (_SGL + "unified_lmcache_mp_connector",), segment=SGLANG
)
_MP_METADATA = (_SGL + "lmcache_mp_metadata",)
SGLANG_LOOKUP_OPERATION = Place(
    "LMCacheLookupOperation",
    LMCACHE,
    _MP_METADATA,
    core=("request_id", "token_ids"),
    segment=SGLANG,
)
SGLANG_KV_COMPONENT_GROUP = Place(
    "SGLangKVComponentGroup", LMCACHE, _MP_METADATA, core=("name", "kv_tensors"), segment=SGLANG
)
SGLANG_LOAD_OPERATION = Place(
    "LMCacheLoadOperation",
    LMCACHE,
    _MP_METADATA,
    core=("request_id", "device_indices"),
    segment=SGLANG,
)
SGLANG_STORE_OPERATION = Place(
    "LMCacheStoreOperation", LMCACHE, _MP_METADATA, core=("request_id", "future"), segment=SGLANG
)
SGLANG_EXTERNAL_FLOW = Place(
    "LMCacheExternalFlow", LMCACHE, _MP_METADATA, core=("key", "lookup"), segment=SGLANG
)
SGLANG_PENDING_STORE = Place(
    "LMCachePendingStore", LMCACHE, _MP_METADATA, core=("operation", "node_id"), segment=SGLANG
)
#: Loads the LMCache configuration: ``()`` reading ``LMCACHE_CONFIG_FILE`` (0.3.1-0.4.5), then
#: ``(config_file="")``, where an empty path no longer reads the environment (0.4.6-0.5.6).
SGLANG_GET_CONFIG = Place(
    "lmcache_get_config", LMCACHE, (_SGL + "utils",), kind="function", segment=SGLANG
)
#: What ``scan`` reports of LMCache's SGLang integration.
SGLANG_SCANNED: tuple[Place, ...] = (
    SGLANG_CONNECTOR,
    SGLANG_LAYERWISE,
    SGLANG_LOAD_METADATA,
    SGLANG_STORE_METADATA,
    SGLANG_MP,
    SGLANG_UNIFIED,
    SGLANG_LOOKUP_OPERATION,
    SGLANG_KV_COMPONENT_GROUP,
    SGLANG_LOAD_OPERATION,
    SGLANG_STORE_OPERATION,
    SGLANG_EXTERNAL_FLOW,
    SGLANG_PENDING_STORE,
    SGLANG_GET_CONFIG,
)

# --- sglang (what its LMCache integration, plugin loader and cache registry are) ----------------

_SG_MEM = "sglang.srt.mem_cache."
_SG_LMC = _SG_MEM + "storage.lmcache."
#: sglang is large: a search by name stays in its runtime package.
_SRT = "sglang.srt"
#: sglang's own LMCache radix caches: ``LMCRadixCache`` (0.5.2 ... 0.5.20) over the in-process
#: and legacy MP connectors, ``LMCacheUnifiedRadixCache`` (0.5.21 on) over the unified one.
SGLANG_LMC_RADIX_CACHE = Place(
    "LMCRadixCache", SGLANG, (_SG_LMC + "lmc_radix_cache",), core=("match_prefix",), under=_SRT
)
SGLANG_LMC_UNIFIED_CACHE = Place(
    "LMCacheUnifiedRadixCache",
    SGLANG,
    (_SG_LMC + "lmcache_unified_radix_cache",),
    core=("match_prefix",),
    under=_SRT,
)
SGLANG_CACHES: tuple[Place, ...] = (SGLANG_LMC_RADIX_CACHE, SGLANG_LMC_UNIFIED_CACHE)
#: The radix-cache registry (0.5.13 on): ``--radix-cache-backend NAME`` builds the factory
#: registered under NAME with a ``TreeCacheBuildContext``.
_SG_REGISTRY = (_SG_MEM + "registry",)
SGLANG_REGISTER_BACKEND = Place(
    "register_radix_cache_backend", SGLANG, _SG_REGISTRY, kind="function", under=_SRT
)
SGLANG_GET_FACTORY = Place(
    "get_radix_cache_factory", SGLANG, _SG_REGISTRY, kind="function", under=_SRT
)
SGLANG_BUILD_CONTEXT = Place(
    "TreeCacheBuildContext", SGLANG, _SG_REGISTRY, core=("params", "server_args"), under=_SRT
)
#: The general-plugin loader (entry points, called with no arguments in each process).
SGLANG_LOAD_PLUGINS = Place(
    "load_plugins", SGLANG, ("sglang.srt.plugins",), kind="function", under=_SRT
)
#: What the lmcache-compat radix-cache backend builds on.
SGLANG_RADIX_CACHE = Place(
    "RadixCache", SGLANG, (_SG_MEM + "radix_cache",), core=("match_prefix",), under=_SRT
)
SGLANG_RADIX_KEY = Place("RadixKey", SGLANG, (_SG_MEM + "radix_cache",), under=_SRT)
SGLANG_TREE_NODE = Place("TreeNode", SGLANG, (_SG_MEM + "radix_cache",), under=_SRT)
_SG_BASE = (_SG_MEM + "base_prefix_cache",)
SGLANG_MATCH_PARAMS = Place("MatchPrefixParams", SGLANG, _SG_BASE, under=_SRT)
SGLANG_MATCH_RESULT = Place("MatchResult", SGLANG, _SG_BASE, under=_SRT)
SGLANG_EVICT_PARAMS = Place("EvictParams", SGLANG, _SG_BASE, under=_SRT)
SGLANG_EVICT_RESULT = Place("EvictResult", SGLANG, _SG_BASE, under=_SRT)
SGLANG_REQ = Place("Req", SGLANG, ("sglang.srt.managers.schedule_batch",), under=_SRT)
SGLANG_COMPONENT_TYPE = Place(
    "ComponentType", SGLANG, (_SG_MEM + "unified_cache.components",), under=_SRT
)
#: What the lmcache-compat backend reads of sglang's internals (the variant it builds).
SGLANG_INTERNALS: tuple[Place, ...] = (SGLANG_RADIX_CACHE, SGLANG_RADIX_KEY, SGLANG_REQ)

#: What ``scan`` reports for an LMCache release, and for vLLM's vendored copy.
LMCACHE_SCANNED: tuple[Place, ...] = (
    CONNECTOR_IMPL,
    MP_SCHEDULER,
    MP_WORKER,
    LOAD_STORE_OP,
    PARALLEL_STRATEGY,
    ENGINE,
    ENGINE_BUILDER,
    *SGLANG_SCANNED,
)
NATIVE_SCANNED: tuple[Place, ...] = (
    NATIVE_CONNECTOR_IMPL,
    NATIVE_MP_SCHEDULER,
    NATIVE_MP_WORKER,
    NATIVE_LOAD_STORE_OP,
    NATIVE_PARALLEL_STRATEGY,
)

# --- LMCache's configuration (read by lmcache_compat.upstream.config_scan; never imported) -----

_CONFIG = "lmcache.v1.config"
_CONFIG_BASE = "lmcache.v1.config_base"
#: The engine configuration's key table (0.3.4 on: ``LMCacheEngineConfig`` is made from it), or,
#: before it, the explicit ``LMCacheEngineConfig`` dataclass of the same module.
CONFIG_DEFINITIONS = Place("_CONFIG_DEFINITIONS", LMCACHE, (_CONFIG,), kind="table")
CONFIG_CLASS = Place("LMCacheEngineConfig", LMCACHE, (_CONFIG,), core=("from_file",))
#: Old key -> new key, and old key -> deprecation message (0.3.4 on, beside the key table).
CONFIG_ALIASES = Place("_CONFIG_ALIASES", LMCACHE, (_CONFIG,), kind="table")
DEPRECATED_CONFIGS = Place("_DEPRECATED_CONFIGS", LMCACHE, (_CONFIG,), kind="table")
#: What the loaders do with an old name (0.3.12 moved the loaders into ``config_base``).
CONFIG_ALIAS_RESOLVER = Place(
    "_resolve_config_aliases", LMCACHE, (_CONFIG_BASE, _CONFIG), kind="function"
)
#: A file value that fails its converter: a warning and ``None`` where this exists (0.3.12).
CONFIG_SAFE_CONVERTER = Place(
    "_apply_env_converter_safely", LMCACHE, (_CONFIG_BASE, _CONFIG), kind="function"
)
#: The getters vLLM's connector calls: which file, and whether the environment overrides it.
_VLLM_UTILS = "lmcache.integration.vllm.utils"
CONFIG_GETTER = Place("lmcache_get_or_create_config", LMCACHE, (_VLLM_UTILS,), kind="function")
CONFIG_GETTER_OLD = Place("lmcache_get_config", LMCACHE, (_VLLM_UTILS,), kind="function")
#: The encoder-cache (EC) overrides of the same file and environment (0.4.5 on).
EC_FILE_PREFIX = Place("_EC_FILE_PREFIX", LMCACHE, (_CONFIG,), kind="table")
EC_ENV_PREFIX = Place("_EC_ENV_PREFIX", LMCACHE, (_CONFIG,), kind="table")
#: The configuration chosen when ``LMCACHE_USE_EXPERIMENTAL`` is false (removed in 0.3.12).
LEGACY_CONFIG_CLASS = Place("LMCacheEngineConfig", LMCACHE, ("lmcache.config",))
#: The cache controller's own configuration (its own file and environment prefix).
CONTROLLER_DEFINITIONS = Place(
    "_CONTROLLER_CONFIG_DEFINITIONS",
    LMCACHE,
    ("lmcache.inprocess.v1.cache_controller.config", "lmcache.v1.cache_controller.config"),
    kind="table",
)

# --- the multi-process server's command lines (argparse, read statically) ----------------------

MP_SERVER_ARGS = Place("parse_args", LMCACHE, ("lmcache.v1.multiprocess.server",), kind="function")
MP_HTTP_SERVER_ARGS = Place(
    "parse_args", LMCACHE, ("lmcache.v1.multiprocess.http_server",), kind="function"
)
MP_CLI_SERVER = Place(
    "ServerCommand", LMCACHE, ("lmcache.cli.commands.server",), core=("add_arguments",)
)
MP_CLI_COORDINATOR = Place(
    "CoordinatorCommand", LMCACHE, ("lmcache.cli.commands.coordinator",), core=("add_arguments",)
)
MP_ORCHESTRATOR_ARGS = Place(
    "parse_args", LMCACHE, ("lmcache.v1.memory_orchestrator.server",), kind="function"
)


@dataclass(frozen=True)
class MPCommand:
    """One way to start an MP process: its id, the command a user types, where its flags are."""

    key: str
    command: str
    place: Place


#: Every MP command line whose flags the configuration schema records.
MP_COMMANDS: tuple[MPCommand, ...] = (
    MPCommand("server", f"python -m {MP_SERVER_ARGS.modules[0]}", MP_SERVER_ARGS),
    MPCommand("http_server", f"python -m {MP_HTTP_SERVER_ARGS.modules[0]}", MP_HTTP_SERVER_ARGS),
    MPCommand("cli_server", "lmcache server", MP_CLI_SERVER),
    MPCommand("cli_coordinator", "lmcache coordinator", MP_CLI_COORDINATOR),
    MPCommand(
        "memory_orchestrator", f"python -m {MP_ORCHESTRATOR_ARGS.modules[0]}", MP_ORCHESTRATOR_ARGS
    ),
)

#: What the configuration scan reads.
CONFIG_PLACES: tuple[Place, ...] = (
    CONFIG_DEFINITIONS,
    CONFIG_CLASS,
    CONFIG_ALIASES,
    DEPRECATED_CONFIGS,
    CONFIG_ALIAS_RESOLVER,
    CONFIG_SAFE_CONVERTER,
    CONFIG_GETTER,
    CONFIG_GETTER_OLD,
    EC_FILE_PREFIX,
    EC_ENV_PREFIX,
    LEGACY_CONFIG_CLASS,
    CONTROLLER_DEFINITIONS,
    *(c.place for c in MP_COMMANDS),
)

#: Every place, for tests and tools.
PLACES: tuple[Place, ...] = (
    *LMCACHE_SCANNED,
    CACHE_STORE_EVENT,
    CACHE_REMOVE_EVENT,
    PACK_TOKEN_IDS,
    *NATIVE_SCANNED,
    KV_CONNECTOR_BASE,
    KV_CONNECTOR_FACTORY,
    VLLM_LMCACHE_CONNECTOR,
    VLLM_LMCACHE_MP_CONNECTOR,
    BLOCK_STORED,
    BLOCK_REMOVED,
    KV_CONNECTOR_KV_EVENTS,
    KV_EVENT_AGGREGATOR,
    KV_CONNECTOR_OUTPUT,
    *CONFIG_PLACES,
)
