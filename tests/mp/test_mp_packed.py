"""LMCache 0.5.7rc2's multi-process surface: packed token ids, ``start``, ``extra_ranges``,
``required_chunk_alignment`` and ``LoadStoreOp.token_bytes``, over fakes generated from the
shipped matrix rows (the real tier binds the same calls to the real classes and compares the
bytes with the release's own codec)."""

from __future__ import annotations

import struct
from typing import Any

import pytest

from lmcache_compat import MPConfig, MPSchedulerAdapter, MPWorkerAdapter, UnsupportedArgumentError
from lmcache_compat.mp import mp_init_kwargs

# pack_token_ids: the adapter looks for the codec first in the module that defines the adapter
# class (``Sent`` below is defined here), then where lmcache_compat.upstream.locations says (not
# installed here)
from lmcache_compat.testing.fakes import pack_tokens as pack_token_ids  # noqa: F401
from lmcache_compat.upstream.matrix import load_matrix
from tools.generated_fakes import GeneratedEngine, fake_module, instantiate

MATRIX = load_matrix()
PACKED = "0.5.7rc2"
IDS = [1, 2, 3, 70000, 2**32 - 1]


def _packed(ids: list[int]) -> bytes:
    return struct.pack(f">{len(ids)}I", *ids)


def _scheduler(version: str, **options: Any) -> tuple[MPSchedulerAdapter, GeneratedEngine]:
    target = instantiate(fake_module(MATRIX.row(version)).LMCacheMPSchedulerAdapter)
    return MPSchedulerAdapter(target, **options), target


#: What the releases default to (0.5.6 on, an adapter may pass them explicitly, positionally).
DEFAULTS = {"cache_salt": "", "request_configs": None, "reserve_last_token": False, "start": 0}


def _last(target: GeneratedEngine) -> tuple[str, tuple[Any, ...], dict[str, Any]]:
    name, args, kwargs = target._call_args[-1]
    if name != "maybe_submit_lookup_request":
        return name, args, kwargs
    effective = {k: v for k, v in kwargs.items() if k not in DEFAULTS or DEFAULTS[k] != v}
    return name, args, effective


def test_the_matrix_knows_which_releases_take_packed_token_ids() -> None:
    packed = [r.version for r in MATRIX.rows if r.has("mp_packed_token_ids")]
    assert packed == [PACKED]
    # still a lookup by token ids: the encoding is a separate fact
    assert MATRIX.row(PACKED).has("mp_lookup_by_token_ids")
    assert not MATRIX.row("0.3.13").has("mp_lookup_by_token_ids")
    assert MATRIX.since("mp_lookup_start") == PACKED


def test_lookup_hands_the_release_its_own_packed_bytes() -> None:
    adapter, target = _scheduler(PACKED)
    adapter.lookup("r1", IDS, cache_salt="tenant", start=32)
    name, _, kwargs = _last(target)  # generated fakes record every argument by name
    assert name == "maybe_submit_lookup_request"
    assert kwargs == {
        "request_id": "r1",
        "packed_token_ids": _packed(IDS),
        "cache_salt": "tenant",
        "start": 32,
    }
    adapter.lookup("r2", IDS, reserve_last_token=True)  # passed through, not emulated
    assert _last(target)[2] == {
        "request_id": "r2",
        "packed_token_ids": _packed(IDS),
        "reserve_last_token": True,
    }
    adapter.lookup("r3", _packed(IDS))  # a caller that packed already: passed as is
    assert _last(target)[2] == {"request_id": "r3", "packed_token_ids": _packed(IDS)}


def test_older_releases_take_the_list_and_refuse_bytes() -> None:
    adapter, target = _scheduler("0.5.6")
    adapter.lookup("r1", IDS)
    assert _last(target)[2] == {"request_id": "r1", "token_ids": IDS}
    with pytest.raises(TypeError, match="list of ints"):
        adapter.lookup("r1", _packed(IDS))


def test_start_is_refused_where_it_would_be_dropped() -> None:
    adapter, target = _scheduler("0.5.6")
    adapter.lookup("r1", IDS, start=0)  # nothing to drop
    with pytest.raises(UnsupportedArgumentError, match="start") as info:
        adapter.lookup("r1", IDS, start=16)
    assert f"lmcache>={PACKED}" in str(info.value)
    allowed, target = _scheduler("0.5.6", allow={"start"})
    allowed.lookup("r1", IDS, start=16)
    assert _last(target)[2] == {"request_id": "r1", "token_ids": IDS}


def test_free_lookup_locks_packs_and_passes_extra_ranges() -> None:
    adapter, target = _scheduler(PACKED)
    adapter.free_lookup_locks(IDS, 0, 32, "r1", extra_ranges=[(32, 48)])
    name, _, kwargs = _last(target)
    assert name == "free_lookup_locks"
    assert kwargs == {
        "packed_token_ids": _packed(IDS),
        "start": 0,
        "end": 32,
        "request_id": "r1",
        "extra_ranges": ((32, 48),),
    }


def test_extra_ranges_are_freed_one_call_each_before_0_5_7() -> None:
    adapter, target = _scheduler("0.5.6")
    before = len(target._call_args)
    adapter.free_lookup_locks(IDS, 0, 32, "r1", cache_salt="s", extra_ranges=[(32, 48), (64, 80)])
    calls = target._call_args[before:]
    assert [(c[2]["start"], c[2]["end"]) for c in calls] == [(0, 32), (32, 48), (64, 80)]
    assert all(c[2]["token_ids"] == IDS and c[2]["cache_salt"] == "s" for c in calls)


def test_lookup_returns_what_the_release_returns() -> None:
    base: Any = fake_module(MATRIX.row(PACKED)).LMCacheMPSchedulerAdapter

    class Sent(base):  # type: ignore[misc]
        def maybe_submit_lookup_request(  # noqa: PLR0917 - 0.5.7rc2's signature
            self,
            request_id: str,
            packed_token_ids: bytes,
            cache_salt: str = "",
            request_configs: Any = None,
            reserve_last_token: bool = False,
            start: int = 0,
        ) -> bool:
            return packed_token_ids == _packed(IDS)

    adapter = MPSchedulerAdapter(instantiate(Sent))
    assert adapter.lookup("r1", IDS) is True  # 0.5.7rc2: whether a LOOKUP went out
    old, _ = _scheduler("0.5.6")
    assert old.lookup("r1", IDS) is None  # before: nothing to say


def test_required_chunk_alignment() -> None:
    config = MPConfig("tcp://h:1", "m", 16, required_chunk_alignment=64)
    new = fake_module(MATRIX.row(PACKED))
    kw = mp_init_kwargs(
        new.LMCacheMPSchedulerAdapter, config, object(), parallel_strategy_cls=new.ParallelStrategy
    )
    assert kw["required_chunk_alignment"] == 64
    old = fake_module(MATRIX.row("0.5.6"))
    with pytest.raises(UnsupportedArgumentError, match="required_chunk_alignment"):
        mp_init_kwargs(
            old.LMCacheMPWorkerAdapter, config, object(), parallel_strategy_cls=old.ParallelStrategy
        )
    kw = mp_init_kwargs(
        old.LMCacheMPWorkerAdapter,
        config,
        object(),
        parallel_strategy_cls=old.ParallelStrategy,
        allow={"required_chunk_alignment"},
    )
    assert "required_chunk_alignment" not in kw
    with pytest.raises(ValueError, match="required_chunk_alignment"):
        MPConfig("u", "m", 16, required_chunk_alignment=0)


def test_load_store_op_carries_token_bytes() -> None:
    mod = fake_module(MATRIX.row(PACKED))
    worker = MPWorkerAdapter(instantiate(mod.LMCacheMPWorkerAdapter))
    op = worker.make_load_store_op([4, 5], IDS, start=0)
    assert type(op) is mod.LoadStoreOp
    assert vars(op)["token_bytes"] == _packed(IDS)
    assert vars(op)["block_ids"] == [[4, 5]]
    assert vars(op)["end"] == len(IDS)
    with pytest.raises(TypeError, match="end="):
        worker.make_load_store_op([4, 5], _packed(IDS))
    op = worker.make_load_store_op([4, 5], _packed(IDS), end=5)
    assert vars(op)["token_bytes"] == _packed(IDS)


def test_a_set_of_urls_is_refused() -> None:
    with pytest.raises(TypeError, match="order"):
        MPConfig({"tcp://a:1", "tcp://b:1"}, "m", 16)  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
def test_bytes_like_packed_ids_reach_every_call_as_the_same_bytes(kind: type) -> None:
    """A caller that packed the ids already (``bytes``, ``bytearray`` or a ``memoryview``):
    the lookup's fast path, the lock free and the load/store op pass exactly those bytes, so
    the free releases the read locks the lookup took (packing them again would ask for one
    token per byte, or byte-swapped words: a different prefix)."""
    packed = _packed(IDS)
    adapter, target = _scheduler(PACKED)
    adapter.lookup("r1", kind(packed))
    assert _last(target)[2] == {"request_id": "r1", "packed_token_ids": packed}
    adapter.lookup("r2", kind(packed), cache_salt="s", start=16)
    assert _last(target)[2]["packed_token_ids"] == packed
    adapter.free_lookup_locks(kind(packed), 0, 32, "r1")
    sent = _last(target)[2]["packed_token_ids"]
    assert sent == packed and type(sent) is bytes
    mod = fake_module(MATRIX.row(PACKED))
    worker = MPWorkerAdapter(instantiate(mod.LMCacheMPWorkerAdapter))
    op = worker.make_load_store_op([4, 5], kind(packed), end=len(IDS))
    assert vars(op)["token_bytes"] == packed
