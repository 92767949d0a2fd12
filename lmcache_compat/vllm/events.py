"""KV cache events: LMCache's events converted to the running vLLM's, aggregated per step.

:class:`CompatKVEvents` is the container a worker returns and vLLM's ``KVOutputAggregator``
merges; :class:`EventConverter` turns LMCache's ``CacheStoreEvent`` / ``CacheRemoveEvent`` (or
any object with the same attributes) into ``BlockStored`` / ``BlockRemoved``, reading each field
from the event, whatever its class, the way vLLM's own connector does. Imports vLLM.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import logging
from collections.abc import Callable, Iterable
from operator import attrgetter
from typing import Any

from lmcache_compat.errors import UpstreamNotFoundError
from lmcache_compat.upstream import locations as loc
from lmcache_compat.upstream.resolve import find
from lmcache_compat.vllm.facts import VllmFacts, optional_vllm_class, vllm_facts

__all__ = ["CompatKVEvents", "EventConverter", "events_collector", "shared_converter"]

logger = logging.getLogger("lmcache_compat.vllm")

#: vLLM >= 0.13.0: connectors hand KV cache events to the scheduler in a container of this kind.
_EventsBase: Any = optional_vllm_class(loc.KV_CONNECTOR_KV_EVENTS) or object
_Aggregator: Any = optional_vllm_class(loc.KV_EVENT_AGGREGATOR)


class CompatKVEvents(_EventsBase):  # type: ignore[misc]
    """The KV cache events of one step, counted per worker with vLLM's ``KVEventAggregator``.

    A worker returns one of these (one worker, its converted events); vLLM's
    ``KVOutputAggregator`` merges the workers' containers (``add_events`` +
    ``increment_workers``); the scheduler-side connector keeps, per step, only the events every
    worker reported (:meth:`aggregate`), which is how vLLM's own LMCache connector publishes.
    """

    def __init__(self, num_workers: int = 1) -> None:
        if _Aggregator is None:  # pragma: no cover - the connector never builds one then
            raise RuntimeError("this vLLM has no KVEventAggregator")
        self._counts: Any = _Aggregator(num_workers)

    def add_events(self, events: list[Any]) -> None:
        self._counts.add_events(events)

    def aggregate(self) -> CompatKVEvents:
        """Keep only the events reported by every contributing worker (one copy each)."""
        common = self._counts.get_common_events()
        self._counts.clear_events()
        self._counts.add_events(common)
        self._counts.reset_workers()
        return self

    def increment_workers(self, count: int = 1) -> None:
        self._counts.increment_workers(count)

    def get_all_events(self) -> list[Any]:
        events: list[Any] = self._counts.get_all_events()
        return events

    def get_number_of_workers(self) -> int:
        return int(self._counts.get_number_of_workers())

    def clear_events(self) -> None:
        self._counts.clear_events()
        self._counts.reset_workers()

    def __repr__(self) -> str:
        return (
            f"<CompatKVEvents workers={self.get_number_of_workers()} "
            f"events={len(self.get_all_events())}>"
        )


def _source_fields(cls: type, sample: object = None) -> frozenset[str]:
    """Field names of an LMCache event class (dataclass fields, else annotations), plus the
    instance attributes of ``sample``, an event of that class: a class that sets its attributes
    in ``__init__`` declares nothing (vLLM reads each field from the event, whatever its class)."""
    names: set[str] = set()
    if dataclasses.is_dataclass(cls):
        names.update(f.name for f in dataclasses.fields(cls))
    else:
        for klass in cls.__mro__:
            names.update(getattr(klass, "__annotations__", {}))
    if sample is not None:
        names.update(getattr(sample, "__dict__", ()))
    return frozenset(names)


def _hash_to_int(value: Any) -> Any:
    return int.from_bytes(value, "big") if isinstance(value, (bytes, bytearray)) else value


_Plan = tuple[Any, Any, "Callable[[Any], Any] | None"]


def _positional_prefix(target: type) -> tuple[str, ...]:
    """The names ``target`` accepts positionally, in order (from its signature)."""
    try:
        params = inspect.signature(target).parameters.values()
    except (TypeError, ValueError):
        return ()
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    names: list[str] = []
    for param in params:
        if param.kind not in positional:
            break
        names.append(param.name)
    return tuple(names)


class EventConverter:
    """LMCache event objects -> the running vLLM's ``BlockStored`` / ``BlockRemoved``.

    The arguments for each target are decided once per LMCache event class from the target's
    declared fields: fields the event has (declared by its class, or -- for a class that sets
    them in ``__init__`` -- found on the first event of that class) are copied, required fields
    it lacks (``lora_name`` before LMCache 0.3.13) are ``None``, fields the target does not
    declare (``medium`` before vLLM 0.10.2, ``lora_name`` before 0.14.1) are left out. Byte
    hashes (LMCache 0.5.x) pass through unchanged where ``ExternalBlockHash`` takes bytes and
    become big-endian ints where it does not. When the copied fields are the target's leading
    fields (every current pairing) an event becomes ``target(*attrgetter(event))`` with no
    per-event Python frame.
    """

    def __init__(self, facts: VllmFacts) -> None:
        self._facts = facts
        self._plans: dict[type, _Plan | None] = {}
        for place in (loc.CACHE_STORE_EVENT, loc.CACHE_REMOVE_EVENT):
            cls = _lmcache_event_class(place)
            if cls is not None:
                self._plans[cls] = self._plan(cls)

    def __call__(self, events: Iterable[Any]) -> list[Any]:
        plans = self._plans
        out: list[Any] = []
        append = out.append
        last: type | None = None
        plan: _Plan | None = None
        for event in events:
            cls = type(event)
            if cls is not last:
                last = cls
                try:
                    plan = plans[cls]
                except KeyError:  # a class not seen at construction: decided once, here
                    plan = plans[cls] = self._plan(cls, event)
            if plan is None:
                continue
            target, getter, convert = plan
            if convert is None:
                append(target(*getter(event)))
            else:
                append(convert(event))
        return out

    def _plan(self, cls: type, sample: object = None) -> _Plan | None:
        facts = self._facts
        fields = _source_fields(cls, sample)
        if "block_hashes" not in fields:
            logger.warning("Ignoring KV cache events of unknown type %s", cls.__qualname__)
            return None
        is_store = "token_ids" in fields or "parent_block_hash" in fields
        target = facts.block_stored if is_store else facts.block_removed
        declared = facts.block_stored_fields if is_store else facts.block_removed_fields
        if target is None:
            return None
        copied = tuple(name for name, _ in declared if name in fields)
        filled = {name: None for name, required in declared if required and name not in fields}
        getter = attrgetter(*copied)
        positional = (
            len(copied) >= 2
            and not filled
            and facts.hashes_accept_bytes
            and _positional_prefix(target)[: len(copied)] == copied
        )
        if positional:
            return (target, getter, None)
        single = len(copied) == 1
        fix_hashes = not facts.hashes_accept_bytes

        def convert(event: Any) -> Any:
            values = getter(event)
            kwargs = dict(zip(copied, (values,) if single else values, strict=True))
            if fix_hashes:
                kwargs["block_hashes"] = [_hash_to_int(h) for h in kwargs["block_hashes"]]
                if "parent_block_hash" in kwargs:
                    kwargs["parent_block_hash"] = _hash_to_int(kwargs["parent_block_hash"])
            kwargs.update(filled)
            return target(**kwargs)

        return (target, getter, convert)


def _lmcache_event_class(place: loc.Place) -> type | None:
    """LMCache's event class, where the installed release has it (0.3.10.post2 on)."""
    try:
        cls = find(place)
    except (UpstreamNotFoundError, ImportError):
        return None
    return cls if isinstance(cls, type) else None


def events_collector(
    kv_events: Callable[[], Any], convert: EventConverter | None
) -> Callable[[], CompatKVEvents | None]:
    """``get_kv_connector_kv_cache_events`` over an engine's ``get_kv_events`` (decided once)."""
    if convert is None:
        return _none

    def get_kv_connector_kv_cache_events() -> CompatKVEvents | None:
        events = kv_events()
        if not events:
            return None
        converted = convert(events)
        if not converted:
            return None
        container = CompatKVEvents(num_workers=1)
        container.add_events(converted)
        return container

    return get_kv_connector_kv_cache_events


def _none() -> None:
    return None


@functools.cache
def shared_converter() -> EventConverter | None:
    """The converter of connectors ``attach`` never saw (vLLM's white-box unit tests)."""
    facts = vllm_facts()
    return EventConverter(facts) if facts.connector_events else None
