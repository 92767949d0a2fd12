"""Result checks: what an adapter puts around an engine method whose result must be trusted.

A catalog row names its check (``CapabilitySpec.check``); the adapter wraps the engine's own
bound method with it where the engine has the capability. A check never copies, filters or
converts a valid result: the engine's own object is returned. A malformed one raises
:class:`~lmcache_compat.errors.MalformedResultError` naming the method and the release.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, NoReturn, cast

from lmcache_compat.errors import MalformedResultError

__all__ = ["Check", "block_ids_check", "events_check"]

#: ``check(method, "Class.method", lmcache_version) -> the bound callable``.
Check = Callable[[Callable[..., Any], str, "str | None"], Callable[..., Any]]


def _describe(value: object) -> str:
    text = repr(value)
    if len(text) > 120:
        text = text[:117] + "..."
    return f"{type(value).__name__} {text}"


def block_ids_check(
    method: Callable[[], Any], where: str, version: str | None
) -> Callable[[], set[int]]:
    """``get_block_ids_with_load_errors``: the engine's own set of non-negative int block ids,
    returned as is (never copied, cached, filtered or converted); anything else is loud."""

    def malformed(detail: str) -> NoReturn:
        raise MalformedResultError(
            f"{where}() returned {detail}; expected a set of non-negative int block ids "
            f"(LMCache {version or 'unknown'}). The failed-load block ids cannot be trusted, "
            "so nothing was dropped or converted."
        )

    def slow_path(ids: object) -> set[int]:
        if not isinstance(ids, (set, frozenset)):
            malformed(_describe(ids))
        for block in ids:
            if not isinstance(block, int) or isinstance(block, bool) or block < 0:
                malformed(f"a set containing {_describe(block)}")
        return ids  # type: ignore[return-value]  # a frozenset or int subclasses: valid ids

    def get_block_ids_with_load_errors() -> set[int]:
        ids = method()
        if type(ids) is set:
            for block in ids:
                if type(block) is not int or block < 0:
                    return slow_path(ids)
            return ids
        return slow_path(ids)

    return get_block_ids_with_load_errors


def events_check(
    method: Callable[[], Any], where: str, version: str | None
) -> Callable[[], list[Any]]:
    """``get_kv_events``: always a list (the events themselves untouched)."""

    def slow_path(events: object) -> list[Any]:
        if (
            events is None
            or isinstance(events, (str, bytes))
            or not hasattr(type(events), "__iter__")
        ):
            raise MalformedResultError(
                f"{where}() returned {_describe(events)}; expected an iterable of KV cache "
                f"events (LMCache {version or 'unknown'})."
            )
        return list(cast("Iterable[Any]", events))

    def get_kv_events() -> list[Any]:
        events = method()
        if type(events) is list:
            return events
        return slow_path(events)

    return get_kv_events
