"""The capability catalog: the one place that says what each capability is.

Every row of :data:`CATALOG` names a capability, the LMCache class that owns it, the method that
carries it, the positional parameters a caller passes, the first LMCache release that has it, the
fallback an adapter binds when it is absent, and what the user loses then. Probes (live and
static), adapters, ``doctor`` and the release matrix all read this table; nothing else hard-codes
a capability's facts.

The "since" column was derived from the sources of every LMCache release on PyPI
(0.3.0 ... 0.5.6) and is checked against the shipped release matrix by the test-suite.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = [
    "CATALOG",
    "CONNECTOR_CORE_METHODS",
    "CONNECTOR_IMPL",
    "Capability",
    "CapabilitySpec",
    "spec_for",
]

#: Class name of the engine object vLLM's ``LMCacheConnectorV1`` keeps as ``_lmcache_engine``.
CONNECTOR_IMPL = "LMCacheConnectorV1Impl"


class Capability(str, enum.Enum):
    """A feature an LMCache release may or may not offer.

    The value is the stable, public name. ``Capability.X.since`` is the first LMCache release
    that has it and ``Capability.X.spec`` its full catalog row; each member's ``__doc__`` says the
    same in words.
    """

    GET_FINISHED = "get_finished"
    REQUEST_FINISHED = "request_finished"
    ASYNC_LOOKUP = "async_lookup"
    INFERENCE_INFO = "inference_info"
    LOAD_ERROR_REPORTING = "load_error_reporting"
    SHUTDOWN = "shutdown"
    KV_EVENTS = "kv_events"
    REGISTER_KV_CACHES = "register_kv_caches"

    def __str__(self) -> str:
        return self.value

    @property
    def spec(self) -> CapabilitySpec:
        """This capability's row of :data:`CATALOG`."""
        return _BY_CAPABILITY[self]

    @property
    def since(self) -> str:
        """The first LMCache release that has this capability."""
        return _BY_CAPABILITY[self].since


# --- fallbacks: installed as methods of an adapter class when a capability is absent ----------
# Each takes the adapter as ``self`` (so a call costs exactly a plain method call) and returns a
# *new* object per call where the result is mutable, so callers may mutate it.


def _no_finished(self: object, finished_req_ids: Any) -> tuple[None, None]:
    """Fallback of ``get_finished(ids)``: no asynchronous sends or receives are tracked."""
    return (None, None)


def _request_not_held(self: object, request: Any, block_ids: Any) -> tuple[bool, None]:
    """Fallback of ``request_finished(request, block_ids)``: blocks may be freed at once."""
    return (False, None)


def _no_inference_info(self: object) -> dict[str, Any]:
    """Fallback of ``get_inference_info()``: an empty dict."""
    return {}


def _no_load_errors(self: object) -> set[int]:
    """Fallback of ``get_block_ids_with_load_errors()``: a new empty set."""
    return set()


def _noop(self: object) -> None:
    """Fallback of ``shutdown()``: nothing to stop."""


def _no_kv_events(self: object) -> list[Any]:
    """Fallback of ``get_kv_events()``: a new empty list."""
    return []


def _noop_register(self: object, kv_caches: Any) -> None:
    """Fallback of ``register_kv_caches(kv_caches)``: releases before 0.3.12 take the KV caches
    from the forward context on the first ``start_load_kv``."""


@dataclass(frozen=True)
class CapabilitySpec:
    """One row of the capability catalog."""

    capability: Capability
    #: LMCache class that owns the method.
    owner: str
    #: Method whose presence carries the capability.
    method: str
    #: Positional parameters the adapter passes (documentation names; probes check arity).
    params: tuple[str, ...]
    #: First LMCache release that has the capability.
    since: str
    #: What an adapter calls when the capability is absent, as a method (its first parameter
    #: is the adapter); ``None``: the capability has no adapter method of its own.
    fallback: Callable[..., Any] | None
    #: The fallback's result, in words, as documented to users.
    fallback_result: str
    #: What a user loses on a release without it.
    impact: str
    #: When true the capability is "the method may return None", read from its return
    #: annotation (e.g. ``int`` -> ``Optional[int]`` in 0.3.6), not from its presence.
    returns_none: bool = False

    @property
    def member(self) -> str:
        """``Owner.method(params)``: how messages name the member."""
        return f"{self.owner}.{self.method}({', '.join(self.params)})"


CATALOG: tuple[CapabilitySpec, ...] = (
    CapabilitySpec(
        Capability.GET_FINISHED,
        CONNECTOR_IMPL,
        "get_finished",
        ("finished_req_ids",),
        "0.3.1",
        _no_finished,
        "(None, None)",
        "no asynchronous send/receive completion is reported (nothing is lost: LMCache "
        "transfers are synchronous in these releases)",
    ),
    CapabilitySpec(
        Capability.REQUEST_FINISHED,
        CONNECTOR_IMPL,
        "request_finished",
        ("request", "block_ids"),
        "0.3.1",
        _request_not_held,
        "(False, None)",
        "blocks are freed as soon as a request finishes; no KV transfer parameters are returned",
    ),
    CapabilitySpec(
        Capability.ASYNC_LOOKUP,
        CONNECTOR_IMPL,
        "get_num_new_matched_tokens",
        ("request", "num_computed_tokens"),
        "0.3.6",
        None,
        "get_num_new_matched_tokens always returns an int",
        "lookups are synchronous: scheduling waits for each LMCache lookup",
        returns_none=True,
    ),
    CapabilitySpec(
        Capability.INFERENCE_INFO,
        CONNECTOR_IMPL,
        "get_inference_info",
        (),
        "0.3.7",
        _no_inference_info,
        "{} (an empty dict)",
        "no inference/configuration summary is available for diagnostics",
    ),
    CapabilitySpec(
        Capability.LOAD_ERROR_REPORTING,
        CONNECTOR_IMPL,
        "get_block_ids_with_load_errors",
        (),
        "0.3.9.post1",
        _no_load_errors,
        "set() (an empty set: no failure can be reported)",
        "KV load failures cannot be detected: requests may compute on missing KV",
    ),
    CapabilitySpec(
        Capability.SHUTDOWN,
        CONNECTOR_IMPL,
        "shutdown",
        (),
        "0.3.10",
        _noop,
        "None (a no-op)",
        "LMCache's background services are not stopped cleanly at exit",
    ),
    CapabilitySpec(
        Capability.KV_EVENTS,
        CONNECTOR_IMPL,
        "get_kv_events",
        (),
        "0.3.10.post2",
        _no_kv_events,
        "[] (an empty list: no events)",
        "no KV cache events: KV-aware routers cannot see what LMCache stores",
    ),
    CapabilitySpec(
        Capability.REGISTER_KV_CACHES,
        CONNECTOR_IMPL,
        "register_kv_caches",
        ("kv_caches",),
        "0.3.12",
        _noop_register,
        "None (a no-op: the release takes KV caches from the forward context)",
        "none in practice: KV caches are picked up from the forward context on first load",
    ),
)

#: Methods every LMCache release's ``LMCacheConnectorV1Impl`` has (0.3.0 on), with their
#: positional parameters. An object missing one is not an engine (:class:`NotAnEngineError`).
CONNECTOR_CORE_METHODS: dict[str, tuple[str, ...]] = {
    "start_load_kv": ("forward_context",),
    "wait_for_layer_load": ("layer_name",),
    "save_kv_layer": ("layer_name", "kv_layer", "attn_metadata"),
    "wait_for_save": (),
    "get_num_new_matched_tokens": ("request", "num_computed_tokens"),
    "update_state_after_alloc": ("request", "num_external_tokens"),
    "build_connector_meta": ("scheduler_output",),
}

_BY_CAPABILITY: dict[Capability, CapabilitySpec] = {row.capability: row for row in CATALOG}


def spec_for(capability: Capability | str) -> CapabilitySpec:
    """The catalog row of ``capability`` (a member or its string value).

    Raises ``ValueError`` naming the known capabilities for an unknown name.
    """
    try:
        return _BY_CAPABILITY[Capability(capability)]
    except ValueError:
        known = ", ".join(c.value for c in Capability)
        raise ValueError(f"unknown capability {capability!r}; known: {known}") from None


def _document_members() -> None:
    for row in CATALOG:
        row.capability.__doc__ = (
            f"{row.member} -- since LMCache {row.since}. "
            f"Absent: adapters return {row.fallback_result}; {row.impact}."
        )


_document_members()
assert set(_BY_CAPABILITY) == set(Capability), "every Capability needs exactly one catalog row"
