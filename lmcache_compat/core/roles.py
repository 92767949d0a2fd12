"""The LMCache classes lmcache-compat adapts, each a *role*: its upstream class name and the
methods every release that has the class has.

An object plays a role when its class has every core method (found by reading the class, never
by calling): that is how an adapter tells an engine from something else, and how a search by
name tells the right class from a namesake. The catalog's rows name their owner by role; where
each class lives is :mod:`lmcache_compat.upstream.locations`' concern.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CONNECTOR", "ENGINE", "MP_SCHEDULER", "MP_WORKER", "ROLES", "Role", "role_named"]


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

ROLES: tuple[Role, ...] = (CONNECTOR, MP_SCHEDULER, MP_WORKER, ENGINE)
_BY_NAME = {role.name: role for role in ROLES}


def role_named(name: str) -> Role | None:
    """The role whose upstream class is called ``name`` (``None``: not an adapted class)."""
    return _BY_NAME.get(name)
