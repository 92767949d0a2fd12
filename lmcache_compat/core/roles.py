"""The LMCache classes lmcache-compat adapts, each a *role*: its upstream class name and the
methods every release that has the class has.

An object plays a role when its class has every core method (found by reading the class, never
by calling): that is how an adapter tells an engine from something else, and how a search by
name tells the right class from a namesake. The catalog's rows name their owner by role; where
each class lives is :mod:`lmcache_compat.upstream.locations`' concern.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "CONNECTOR",
    "ENGINE",
    "MP_SCHEDULER",
    "MP_WORKER",
    "ROLES",
    "SGLANG_LAYERWISE",
    "SGLANG_LOAD_METADATA",
    "SGLANG_MP",
    "SGLANG_ROLES",
    "SGLANG_STORE_METADATA",
    "SGLANG_UNIFIED",
    "Role",
    "role_named",
]


@dataclass(frozen=True, slots=True)
class Role:
    """One adapted LMCache class."""

    #: The upstream class name.
    name: str
    #: ``(method, positional parameters a caller passes)`` for each method every release of the
    #: class has: an object lacking one does not play the role.
    core: tuple[tuple[str, tuple[str, ...]], ...]
    #: Older members adapters fall back to (read like every other member, never called by a
    #: probe).
    older: tuple[str, ...] = ()
    #: Whether a class of another name plays the role when it has the core members (a fake or
    #: third-party engine). ``False`` for records whose only core member is ``__init__``:
    #: every class would match them.
    by_members: bool = True

    @property
    def core_methods(self) -> dict[str, tuple[str, ...]]:
        return dict(self.core)

    def __str__(self) -> str:
        return self.name


#: ``LMCacheConnectorV1Impl``: the engine vLLM's ``LMCacheConnectorV1`` keeps as
#: ``_lmcache_engine`` (0.3.0 on).
CONNECTOR = Role(
    name="LMCacheConnectorV1Impl",
    core=(
        ("start_load_kv", ("forward_context",)),
        ("wait_for_layer_load", ("layer_name",)),
        ("save_kv_layer", ("layer_name", "kv_layer", "attn_metadata")),
        ("wait_for_save", ()),
        ("get_num_new_matched_tokens", ("request", "num_computed_tokens")),
        ("update_state_after_alloc", ("request", "num_external_tokens")),
        ("build_connector_meta", ("scheduler_output",)),
    ),
)
#: The multi-process adapters (0.3.13 on).
MP_SCHEDULER = Role(
    name="LMCacheMPSchedulerAdapter",
    core=(
        ("maybe_submit_lookup_request", ("request_id", "token_ids")),
        ("check_lookup_result", ("request_id",)),
        ("cleanup_lookup_result", ("request_id",)),
        ("num_blocks_per_chunk", ()),
    ),
)
MP_WORKER = Role(
    name="LMCacheMPWorkerAdapter",
    core=(
        ("register_kv_caches", ("kv_caches",)),
        ("submit_store_request", ("request_id", "op", "event")),
        ("submit_retrieve_request", ("request_id", "op", "event")),
        ("batched_submit_store_requests", ("request_ids", "ops", "event")),
        ("batched_submit_retrieve_requests", ("request_ids", "ops", "event")),
        ("get_finished", ("finished_req_ids",)),
        ("num_blocks_per_chunk", ()),
        ("shutdown", ()),
    ),
)
#: ``LMCacheEngine``, as SGLang-style integrations call it directly (0.3.0 on).
ENGINE = Role(
    name="LMCacheEngine",
    core=(
        ("store", ("tokens",)),
        ("retrieve", ("tokens",)),
        ("lookup", ("tokens",)),
        ("close", ()),
    ),
    older=("prefetch", "is_frozen", "lookup_unpin"),
)


# --- LMCache's SGLang integration (the classes sglang's own cache builds) -----------------------

#: ``LMCacheLayerwiseConnector``: the in-process connector (0.3.6 ... 0.5.6).
SGLANG_LAYERWISE = Role(
    name="LMCacheLayerwiseConnector",
    core=(
        ("chunk_size", ()),
        ("start_load_kv", ("load_metadata",)),
        ("load_kv_layerwise", ("layer_id",)),
        ("store_kv", ("store_metadata",)),
        ("reset", ()),
        ("close", ()),
    ),
)
#: ``LMCacheMPConnector``: the multi-process connector (0.4.6 ... 0.5.6).
SGLANG_MP = Role(
    name="LMCacheMPConnector",
    core=(
        ("chunk_size", ()),
        ("lookup_kv", ("token_ids", "request_id")),
        ("release_pending", ("request_id",)),
        ("retrieve_kv", ("load_metadata",)),
        ("store_kv", ("store_metadata",)),
        ("end_session", ("request_id",)),
        ("reset", ()),
        ("close", ()),
    ),
)
#: ``UnifiedLMCacheMPConnector``: the unified multi-process connector (0.5.6 on).
SGLANG_UNIFIED = Role(
    name="UnifiedLMCacheMPConnector",
    core=(
        ("submit_lookup", ("request_id", "token_ids")),
        ("poll_lookup", ("operation",)),
        ("submit_load", ("operation", "device_indices")),
        ("prepare_load_on_stream", ("operation", "stream")),
        ("complete_load", ("operation",)),
        ("get_store_start", ("request_id", "end")),
        ("submit_store", ("request_id", "token_ids", "device_indices")),
        ("complete_store", ("operation",)),
        ("ready_prefix_count", ("operations",)),
        ("free_lookup_locks", ("request_id", "start", "end")),
        ("end_session", ("request_id",)),
        ("finish_request", ("request_id",)),
        ("end_all_sessions", ()),
        ("clear", ()),
        ("close", ()),
        ("register_kv_cache", ()),
        ("parallel_all_reduce", ("tensor", "op")),
        ("device_indices_by_group", ("full_indices",)),
        ("aligned_swa_window_size", ()),
        ("reset_mamba_checkpoint_metadata", ("indices",)),
        ("build_cache_salt", ("cache_salt", "extra_key")),
    ),
)
#: The metadata records sglang hands the in-process and MP connectors (0.3.6 ... 0.5.6).
SGLANG_LOAD_METADATA = Role(
    name="LoadMetadata",
    core=(("__init__", ("token_ids", "slot_mapping", "offset")),),
    by_members=False,
)
SGLANG_STORE_METADATA = Role(
    name="StoreMetadata",
    core=(("__init__", ("last_node", "token_ids", "kv_indices", "offset")),),
    by_members=False,
)

SGLANG_ROLES: tuple[Role, ...] = (
    SGLANG_LAYERWISE,
    SGLANG_MP,
    SGLANG_UNIFIED,
    SGLANG_LOAD_METADATA,
    SGLANG_STORE_METADATA,
)
ROLES: tuple[Role, ...] = (CONNECTOR, MP_SCHEDULER, MP_WORKER, ENGINE, *SGLANG_ROLES)
_BY_NAME = {role.name: role for role in ROLES}


def role_named(name: str) -> Role | None:
    """The role whose upstream class is called ``name`` (``None``: not an adapted class)."""
    return _BY_NAME.get(name)
