"""A scheduler method that requires a parameter no lmcache-compat release knows (what a next
LMCache release could add) is refused at construction, in one line naming it; it never binds a
call that would fail with a TypeError inside the engine (the mutation tier's "required parameter
added" over the real class)."""

from __future__ import annotations

import struct
from typing import Any

import pytest

from lmcache_compat import Capability, MPSchedulerAdapter, UnsupportedArgumentError


def pack_token_ids(ids: list[int]) -> bytes:  # the adapter takes the codec beside the class
    return struct.pack(f">{len(ids)}I", *ids)


class _Scheduler:
    def check_lookup_result(self, request_id: str) -> int | None:
        return None

    def cleanup_lookup_result(self, request_id: str) -> None: ...
    def num_blocks_per_chunk(self) -> int:
        return 1


class WithTenant(_Scheduler):
    def maybe_submit_lookup_request(
        self, request_id: str, packed_token_ids: bytes, tenant: str, cache_salt: str = ""
    ) -> bool:
        return True


class FreeWithTenant(_Scheduler):
    def maybe_submit_lookup_request(
        self, request_id: str, packed_token_ids: bytes, cache_salt: str = ""
    ) -> bool:
        return True

    def free_lookup_locks(
        self, packed_token_ids: bytes, start: int, end: int, request_id: str, tenant: str
    ) -> None: ...


class Known(_Scheduler):
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def maybe_submit_lookup_request(
        self, request_id: str, packed_token_ids: bytes, *, cache_salt: str = "", hint: int = 0
    ) -> bool:
        self.calls.append({"request_id": request_id, "packed_token_ids": packed_token_ids})
        return True


def test_an_unknown_required_parameter_is_refused_at_construction() -> None:
    with pytest.raises(UnsupportedArgumentError) as info:
        MPSchedulerAdapter(WithTenant())
    first = str(info.value).splitlines()[0]
    assert "maybe_submit_lookup_request in LMCache" in first and "requires 'tenant'" in first
    assert info.value.argument == "tenant"


def test_an_optional_method_that_requires_more_is_not_the_capability() -> None:
    """``free_lookup_locks`` cannot be called with what the capability passes: the capability
    is absent (its documented fallback), decided by the surface rule before any call is made."""
    adapter = MPSchedulerAdapter(FreeWithTenant())
    assert Capability.MP_FREE_LOOKUP_LOCKS not in adapter.capabilities


def test_optional_and_keyword_only_parameters_it_does_not_know_are_fine() -> None:
    target = Known()
    assert MPSchedulerAdapter(target).lookup("r", [1, 2]) is True
    assert target.calls == [{"request_id": "r", "packed_token_ids": pack_token_ids([1, 2])}]
