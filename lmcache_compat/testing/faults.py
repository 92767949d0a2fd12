"""Faults a connector must handle, injected into a fake with one call each.

Each injection returns an :class:`Injected` record. Where the fake's release has the capability
that makes the fault visible, the fake behaves as that release does (failed block ids are
reported once, events are delivered once...). Where it lacks it, nothing is queued and the record
says what the real release does instead (``visible`` is false), so a test sees the connector's
real exposure: for example failed KV loads are invisible before 0.3.9.post1.

The faults are keyword rows of :data:`FAULTS` (policy as data): the capabilities that make the
fault visible (one per role; the fake's class picks the one it owns) and what a release without
them does. :func:`_inject` is the one function that reads a row.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from lmcache_compat.core.catalog import Capability, CapabilitySpec
from lmcache_compat.core.roles import MP_SCHEDULER
from lmcache_compat.testing.fakes import Fake, queue, set_delay, set_result

__all__ = [
    "FAULTS",
    "FaultSpec",
    "Injected",
    "fail_loads",
    "kv_events",
    "lost_reply",
    "short_retrieve",
    "slow_wait_for_save",
    "unhealthy",
]


#: The MP scheduler's lookup-result member (one of the role's core methods).
_LOOKUP = "check_lookup_result"
assert _LOOKUP in dict(MP_SCHEDULER.core), MP_SCHEDULER.core


@dataclass(frozen=True, slots=True)
class FaultSpec:
    """One fault: the capabilities that make it visible and what a release without them does."""

    name: str
    #: One capability per role that can show the fault (the fake's class owns at most one).
    capabilities: tuple[Capability, ...]
    #: What the real release does when the fault happens and it lacks the capability.
    absent: str


#: Every injectable fault by name, with the capability it exercises.
FAULTS: dict[str, FaultSpec] = {
    row.name: row
    for row in (
        FaultSpec(
            name="failed_loads",
            capabilities=(Capability.LOAD_ERROR_REPORTING, Capability.MP_LOAD_ERROR_REPORTING),
            absent="the failed blocks are read as loaded (no release method reports them)",
        ),
        FaultSpec(
            name="kv_events",
            capabilities=(
                Capability.KV_EVENTS,
                Capability.MP_KV_EVENTS,
                Capability.ENGINE_KV_EVENTS,
            ),
            absent="the events are never delivered",
        ),
        FaultSpec(
            name="unhealthy",
            capabilities=(Capability.MP_HEALTH_CHECK,),
            absent="a lookup answers 0 and nothing says the server is down: read as a miss",
        ),
        FaultSpec(
            name="lost_reply",
            capabilities=(Capability.MP_HEALTH_CHECK,),
            absent="the lookup result stays None (pending) for ever: the release cannot tell a "
            "lost reply from an unfinished lookup",
        ),
    )
}


@dataclass(frozen=True, slots=True)
class Injected:
    """What an injection did on the fake's release."""

    fault: str
    release: str
    #: Whether the release lets a connector see the fault.
    visible: bool
    #: What the real release does (one line).
    note: str


def _owned(fake: Fake, spec: FaultSpec) -> CapabilitySpec | None:
    cls_name = type(fake).__name__
    for cap in spec.capabilities:
        row = cap.spec
        if row.owner.name == cls_name or any(r.name == cls_name for r in row.also):
            return row
    return None


def _inject(fake: Fake, fault: str, visible_note: str) -> tuple[Injected, CapabilitySpec | None]:
    """The one reader of :data:`FAULTS`: whether ``fake``'s release shows ``fault``."""
    if not isinstance(fake, Fake):
        raise TypeError(f"faults are injected into fakes (lmcache_compat.testing), not {fake!r}")
    spec = FAULTS[fault]
    owned = _owned(fake, spec)
    if owned is None:
        names = ", ".join(c.spec.owner.name for c in spec.capabilities)
        raise TypeError(f"fault {fault!r} is injected into {names}, not {type(fake).__name__}")
    release = fake._release
    if fake._row.has(owned.capability):
        return Injected(fault, release, True, visible_note), owned
    note = (
        f"LMCache {release} lacks {owned.capability.value} (since {owned.since}): {spec.absent}; "
        f"the adapter's fallback answers {owned.fallback_result}"
    )
    return Injected(fault, release, False, note), None


def fail_loads(fake: Fake, block_ids: Iterable[int]) -> Injected:
    """KV loads of ``block_ids`` failed: reported once by the release's load-error method."""
    ids = set(block_ids)
    done, owned = _inject(fake, "failed_loads", f"blocks {sorted(ids)} reported once")
    if owned is not None:
        queue(fake, owned.method, ids)
    return done


def short_retrieve(fake: Fake, hit: int, total: int, block_ids: Iterable[int] = ()) -> Injected:
    """A retrieve that found ``hit`` of ``total`` tokens. On ``LMCacheEngine`` ``retrieve``
    answers the mask (a list of ``total`` booleans, ``hit`` true); on a connector the blocks
    of the missing tokens (``block_ids``) fail to load, as :func:`fail_loads`."""
    if "retrieve" in type(fake)._returns:
        set_result(fake, "retrieve", [True] * hit + [False] * (total - hit))
        note = f"retrieve answers {hit} of {total} tokens"
        return Injected("short_retrieve", fake._release, True, note)
    done = fail_loads(fake, block_ids)
    return Injected("short_retrieve", done.release, done.visible, done.note)


def kv_events(fake: Fake, events: Iterable[Any]) -> Injected:
    """KV cache events happened: delivered once by the release's events method."""
    items = list(events)
    done, owned = _inject(fake, "kv_events", f"{len(items)} events delivered once")
    if owned is not None:
        queue(fake, owned.method, items)
    return done


def unhealthy(fake: Fake) -> Injected:
    """The MP server is down: lookups answer 0 while the health property says unhealthy."""
    done, owned = _inject(fake, "unhealthy", "lookups answer 0, is_healthy is False")
    if _LOOKUP in type(fake)._returns:
        set_result(fake, _LOOKUP, 0)
    if owned is not None:
        set_result(fake, owned.method, False)
    return done


def lost_reply(fake: Fake) -> Injected:
    """An MP reply that never comes: where the release has a health property it times out
    (``mq_timeout``), answers 0 and marks the server unhealthy; before, it stays pending."""
    done, owned = _inject(fake, "lost_reply", "after mq_timeout: 0 and is_healthy False")
    if _LOOKUP in type(fake)._returns:
        set_result(fake, _LOOKUP, 0 if owned is not None else None)
    if owned is not None:
        set_result(fake, owned.method, False)
    return done


def slow_wait_for_save(fake: Fake, seconds: float) -> Injected:
    """``wait_for_save`` takes ``seconds`` (every release has it: always visible)."""
    set_delay(fake, "wait_for_save", seconds)
    return Injected("slow_wait_for_save", fake._release, True, f"takes {seconds} s")
