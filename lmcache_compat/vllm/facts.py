"""What the running vLLM offers a KV connector, read once from its own code.

Signatures, struct fields and class members, never version numbers: whether the connector base
``__init__`` takes ``kv_cache_config``, whether ``get_num_new_matched_tokens`` may answer
``None``, whether the connector KV-event path exists and which fields ``BlockStored`` /
``BlockRemoved`` declare, whether failed loads travel back to the scheduler, which hooks the
base class has. :class:`VllmFacts` itself imports nothing (the decisions module and its unit
tests build it directly); :func:`vllm_facts` reads the running vLLM (importing it).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from typing import Any

from lmcache_compat.core.annotations import parse
from lmcache_compat.errors import UpstreamNotFoundError
from lmcache_compat.upstream import locations as loc
from lmcache_compat.upstream.resolve import find

__all__ = ["SLEEP_HOOKS", "VllmFacts", "optional_vllm_class", "vllm_facts"]

#: The sleep-mode hooks of vLLM's connector base class (0.33.0): the GPU worker calls them on
#: sleep, wake-up and discard. A connector supports sleep mode when its engine has every one.
SLEEP_HOOKS = ("unregister_kv_caches", "restore_kv_caches")


def optional_vllm_class(place: loc.Place) -> Any:
    """``place`` in the running vLLM, or ``None`` where this vLLM does not have it."""

    try:
        return find(place)
    except UpstreamNotFoundError:
        return None


@dataclasses.dataclass(frozen=True)
class VllmFacts:
    """What the connector needs to know about the running vLLM, read from its code once."""

    #: ``KVConnectorBase_V1.__init__`` takes ``kv_cache_config`` (optional from 0.11.2,
    #: required from 0.21.0).
    base_takes_kv_cache_config: bool
    #: ``get_num_new_matched_tokens`` may answer ``None`` ("ask again later", 0.10.2 on).
    accepts_none_matched: bool
    #: The connector KV-event path exists (``get_kv_connector_kv_cache_events``,
    #: ``KVConnectorKVEvents``, ``KVEventAggregator``, ``BlockStored``: 0.13.0 on).
    connector_events: bool
    #: ``BlockStored`` / ``BlockRemoved`` classes and their ``(field, required)`` pairs (0.33.0
    #: adds the optional ``lookahead_token_ids``: copied where an event has it, else defaulted).
    block_stored: type | None
    block_stored_fields: tuple[tuple[str, bool], ...]
    block_removed: type | None
    block_removed_fields: tuple[tuple[str, bool], ...]
    #: ``BlockStored.block_hashes`` accepts ``bytes`` (``ExternalBlockHash = bytes | int``).
    hashes_accept_bytes: bool
    #: vLLM carries failed KV loads back to the scheduler
    #: (``KVConnectorOutput.invalid_block_ids``: 0.11.2 on). Before it, nothing in vLLM calls
    #: ``get_block_ids_with_load_errors`` and a block that failed to load is used as loaded.
    load_failure_path: bool = True
    #: The sleep-mode hooks the base class defines (0.33.0: :data:`SLEEP_HOOKS`; before: none).
    sleep_hooks: tuple[str, ...] = ()
    #: Every method name the connector base class defines: the connector forwards an LMCache
    #: pass-through method only under a name vLLM calls.
    base_methods: frozenset[str] = frozenset()


def _struct_fields(cls: type) -> tuple[tuple[str, bool], ...]:
    """``(name, required)`` for each declared field of a msgspec Struct or a dataclass."""
    if hasattr(cls, "__struct_fields__"):
        import importlib  # lazy: msgspec comes with vLLM; this module imports without it

        structs: Any = importlib.import_module("msgspec.structs")
        return tuple((f.name, bool(f.required)) for f in structs.fields(cls))
    if dataclasses.is_dataclass(cls):
        missing = dataclasses.MISSING
        return tuple(
            (f.name, f.default is missing and f.default_factory is missing)
            for f in dataclasses.fields(cls)
        )
    raise TypeError(f"{cls!r} is neither a msgspec Struct nor a dataclass")


def _field_type_text(cls: type, name: str) -> str:

    if hasattr(cls, "__struct_fields__"):
        import importlib  # lazy: msgspec comes with vLLM; this module imports without it

        structs: Any = importlib.import_module("msgspec.structs")
        for f in structs.fields(cls):
            if f.name == name:
                return _text(f.type)
    value = getattr(cls, "__annotations__", {}).get(name, "")
    return value if isinstance(value, str) else inspect.formatannotation(value)


def _text(annotation: object) -> str:

    return annotation if isinstance(annotation, str) else inspect.formatannotation(annotation)


def _declares_field(cls: Any, field: str) -> bool:
    """Whether ``cls`` (a dataclass or annotated class) declares ``field``."""
    return field in getattr(cls, "__dataclass_fields__", {}) or field in getattr(
        cls, "__annotations__", {}
    )


def count_admits_none(annotation: str) -> bool:
    """Whether the matched-token count in ``get_num_new_matched_tokens``'s return annotation
    (``tuple[int | None, bool]`` from 0.10.2) admits ``None``."""
    parsed = parse(annotation)
    if parsed is None:
        return False
    for alternative in parsed.without_none():
        if alternative.head == "tuple" and alternative.args:
            return alternative.args[0].admits_none
    return parsed.admits_none


def accepts_bytes(annotation: str) -> bool:
    """Whether ``BlockStored.block_hashes``' annotation admits bytes (``list[ExternalBlockHash]``
    with ``ExternalBlockHash = bytes | int``, spelled out or not)."""
    parsed = parse(annotation)
    return "bytes" in annotation if parsed is None else "bytes" in parsed.text()


@functools.cache
def vllm_facts() -> VllmFacts:
    """Read the running vLLM's connector surface (cached: vLLM does not change in a process)."""

    base = find(loc.KV_CONNECTOR_BASE)
    base_init = inspect.signature(base.__init__).parameters
    matched = inspect.signature(base.get_num_new_matched_tokens)
    stored = optional_vllm_class(loc.BLOCK_STORED)
    removed = optional_vllm_class(loc.BLOCK_REMOVED)
    aggregator = optional_vllm_class(loc.KV_EVENT_AGGREGATOR)
    stored_fields = _struct_fields(stored) if stored is not None else ()
    removed_fields = _struct_fields(removed) if removed is not None else ()
    return VllmFacts(
        base_takes_kv_cache_config="kv_cache_config" in base_init,
        accepts_none_matched=count_admits_none(_text(matched.return_annotation)),
        connector_events=(
            aggregator is not None
            and stored is not None
            and hasattr(base, "get_kv_connector_kv_cache_events")
        ),
        block_stored=stored,
        block_stored_fields=stored_fields,
        block_removed=removed,
        block_removed_fields=removed_fields,
        hashes_accept_bytes=stored is not None
        and accepts_bytes(_field_type_text(stored, "block_hashes")),
        load_failure_path=_declares_field(
            optional_vllm_class(loc.KV_CONNECTOR_OUTPUT), "invalid_block_ids"
        ),
        sleep_hooks=tuple(h for h in SLEEP_HOOKS if hasattr(base, h)),
        base_methods=frozenset(
            name for klass in base.__mro__ for name, v in vars(klass).items() if callable(v)
        ),
    )
