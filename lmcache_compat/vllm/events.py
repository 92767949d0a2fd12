"""KV cache events: LMCache's events converted to the running vLLM's, aggregated per step.

:class:`CompatKVEvents` is the container a worker returns and vLLM's ``KVOutputAggregator``
merges; :class:`EventConverter` turns LMCache's ``CacheStoreEvent`` / ``CacheRemoveEvent`` into
``BlockStored`` / ``BlockRemoved``. Imports vLLM (its container base class and event classes).

What a step costs is decided once: the conversion plan per LMCache event class (which fields to
copy, in the target's positional order where they lead it), and one comprehension per step for a
batch of one class (the usual case); the container counts events only when the scheduler
aggregates them, once, as vLLM's ``KVEventAggregator`` would.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import logging
from collections import Counter
from collections.abc import Callable, Iterable
from operator import attrgetter
from typing import Any

from lmcache_compat.core.adapter import ConnectorAdapter
from lmcache_compat.core.catalog import Capability
from lmcache_compat.errors import UpstreamNotFoundError
from lmcache_compat.upstream import locations as loc
from lmcache_compat.upstream.resolve import find
from lmcache_compat.vllm.decisions import engine_binding
from lmcache_compat.vllm.facts import VllmFacts, optional_vllm_class, vllm_facts

__all__ = ["CompatKVEvents", "EventConverter", "events_factory", "shared_collector"]

logger = logging.getLogger("lmcache_compat.vllm")

#: vLLM >= 0.13.0: connectors hand KV cache events to the scheduler in a container of this kind.
_EventsBase: Any = optional_vllm_class(loc.KV_CONNECTOR_KV_EVENTS) or object


class CompatKVEvents(_EventsBase):  # type: ignore[misc]
    """The KV cache events of one step, with the number of workers that reported them.

    A worker returns one of these (one worker, its converted events); vLLM's
    ``KVOutputAggregator`` merges the workers' containers (``add_events`` +
    ``increment_workers``); the scheduler-side connector keeps, per step, only the events every
    worker reported (:meth:`aggregate`: an event counted as many times as there are workers,
    once each, in first-seen order), which is exactly what vLLM's ``KVEventAggregator`` keeps
    for its own LMCache connector. The events are counted once, there, not on every merge.
    """

    __slots__ = ("_events", "_workers")

    def __init__(self, num_workers: int = 1) -> None:
        if num_workers <= 0:
            raise ValueError("num_workers must be greater than zero.")
        self._events: list[Any] = []
        self._workers = num_workers

    def add_events(self, events: list[Any]) -> None:
        if not isinstance(events, list):
            raise TypeError("events must be a list of KVCacheEvent.")
        self._events += events

    def aggregate(self) -> CompatKVEvents:
        """Keep only the events reported by every contributing worker (one copy each)."""
        workers = self._workers
        self._events = [e for e, n in Counter(self._events).items() if n == workers]
        self._workers = 1
        return self

    def increment_workers(self, count: int = 1) -> None:
        if count <= 0:
            raise ValueError("count must be positive.")
        self._workers += count

    def get_all_events(self) -> list[Any]:
        return list(self._events)

    def get_number_of_workers(self) -> int:
        return self._workers

    def clear_events(self) -> None:
        self._events = []
        self._workers = 1

    def __repr__(self) -> str:
        return f"<CompatKVEvents workers={self._workers} events={len(self._events)}>"


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


#: How one LMCache event class converts: ``(target, getter, None)`` for ``target(*getter(e))``,
#: or ``(None, None, convert)`` for ``convert(e)``.
_Plan = tuple[Any, Any, "Callable[[Any], Any] | None"]


class EventConverter:
    """LMCache event objects -> the running vLLM's ``BlockStored`` / ``BlockRemoved``.

    The conversion of each LMCache event class is decided once from the target's declared
    fields: fields the event has (declared by its class, or -- for a class that sets them in
    ``__init__`` -- found on the first event of that class) are copied, required fields it lacks
    (``lora_name`` before LMCache 0.3.13) are ``None``, fields the target does not declare
    (``medium`` before vLLM 0.10.2, ``lora_name`` before 0.14.1) are left out. Byte hashes
    (LMCache 0.5.x) pass through unchanged where ``ExternalBlockHash`` takes bytes and become
    big-endian ints where it does not. When the copied fields lead the target's positional
    parameters (every current pairing) an event becomes ``target(*attrgetter(event))``, and a
    batch of one class is one comprehension.
    """

    def __init__(self, facts: VllmFacts) -> None:
        self._facts = facts
        self._plans: dict[type, _Plan | None] = {}
        for place in (loc.CACHE_STORE_EVENT, loc.CACHE_REMOVE_EVENT):
            cls = _lmcache_event_class(place)
            if cls is not None:
                self._plans[cls] = self._plan(cls)

    def __call__(self, events: Iterable[Any]) -> list[Any]:
        if type(events) is not list:
            events = list(events)
        if not events:
            return []
        first = type(events[0])
        plan = self._plans.get(first, _UNSEEN)
        if plan is _UNSEEN or plan is None:
            return self._mixed(events)
        for event in events:
            if type(event) is not first:
                return self._mixed(events)
        target, getter, convert = plan
        if convert is None:
            return [target(*getter(e)) for e in events]
        return [convert(e) for e in events]

    def _mixed(self, events: list[Any]) -> list[Any]:
        out: list[Any] = []
        plans = self._plans
        for event in events:
            cls = type(event)
            plan = plans.get(cls, _UNSEEN)
            if plan is _UNSEEN:  # a class not seen at construction: decided once, here
                plan = plans[cls] = self._plan(cls, event)
            if plan is None:
                continue
            target, getter, convert = plan
            out.append(target(*getter(event)) if convert is None else convert(event))
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
        if (
            len(copied) >= 2
            and not filled
            and facts.hashes_accept_bytes
            and _positional_prefix(target)[: len(copied)] == copied
        ):
            return (target, getter, None)
        single = len(copied) == 1
        fix_hashes = not facts.hashes_accept_bytes

        def by_keyword(event: Any) -> Any:
            values = getter(event)
            kwargs = dict(zip(copied, (values,) if single else values, strict=True))
            if fix_hashes:
                kwargs["block_hashes"] = [_hash_to_int(h) for h in kwargs["block_hashes"]]
                if "parent_block_hash" in kwargs:
                    kwargs["parent_block_hash"] = _hash_to_int(kwargs["parent_block_hash"])
            kwargs.update(filled)
            return target(**kwargs)

        return (None, None, by_keyword)


_UNSEEN: Any = object()


def _lmcache_event_class(place: loc.Place) -> type | None:
    """LMCache's event class, where the installed release has it (0.3.10.post2 on)."""
    try:
        cls = find(place)
    except (UpstreamNotFoundError, ImportError):
        return None
    return cls if isinstance(cls, type) else None


def collector(
    kv_events: Callable[[], Any], convert: EventConverter
) -> Callable[[], CompatKVEvents | None]:
    """``get_kv_connector_kv_cache_events`` over an engine's ``get_kv_events`` (decided once):
    ``None`` when there are no events, else one worker's container of the converted ones."""

    def get_kv_connector_kv_cache_events() -> CompatKVEvents | None:
        events = kv_events()
        if not events:
            return None
        converted = convert(events)
        if not converted:
            return None
        container = CompatKVEvents()
        container._events = converted
        return container

    return get_kv_connector_kv_cache_events


def events_factory(facts: VllmFacts) -> Callable[[Callable[[], Any]], Callable[[], Any]] | None:
    """What the connector's decisions build its event collector with (``None``: this vLLM has
    no connector events)."""
    if not facts.connector_events:
        return None
    convert = EventConverter(facts)
    return functools.partial(collector, convert=convert)


def _none() -> None:
    return None


def shared_collector(engine: Any) -> Callable[[], CompatKVEvents | None]:
    """The collector for a connector ``attach`` never saw (vLLM's white-box unit tests call
    ``get_kv_connector_kv_cache_events`` on a mock that carries only ``_lmcache_engine``):
    decided from that engine now, with one converter per process."""

    binding = engine_binding(engine, require_engine=False)
    convert = _shared_converter()
    if convert is None or Capability.KV_EVENTS not in binding.capabilities:
        return _none
    events: Callable[[], Any] = (
        binding.engine.get_kv_events
        if isinstance(binding, ConnectorAdapter)
        else binding.get_kv_events
    )
    return collector(events, convert)


@functools.cache
def _shared_converter() -> EventConverter | None:
    facts = vllm_facts()
    return EventConverter(facts) if facts.connector_events else None
