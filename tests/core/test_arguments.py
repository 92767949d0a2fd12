"""The argument policy is executed from its rows: every row of ``core/arguments.py`` is driven
through the fakes generated from the release just before its first (and the release at its
first), and what happens must be what its ``on_older`` says:

* ``error``: refused with ``UnsupportedArgumentError`` naming the argument; with ``allow={name}``
  the call goes through and the release never sees it;
* ``drop``: the call goes through and the release never sees it;
* ``map``: the release gets it in its own form (a per-row check);
* ``emulate``: the release gets the same result another way (a per-row check);
* at the first release that takes it, the release gets it under its own name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from lmcache_compat import (
    EngineAdapter,
    MPConfig,
    MPSchedulerAdapter,
    MPWorkerAdapter,
    UnsupportedArgumentError,
    get_or_create_engine,
)
from lmcache_compat.core.arguments import (
    ARG,
    ARGUMENTS,
    Argument,
    Downgrades,
    apply,
    normalise_allow,
)
from lmcache_compat.core.roles import ENGINE, MP_SCHEDULER
from lmcache_compat.mp import mp_init_kwargs
from lmcache_compat.mp.config import build_parallel_strategy
from lmcache_compat.testing.fakes import pack_tokens as pack_token_ids
from lmcache_compat.upstream.matrix import load_matrix
from tools.generated_fakes import fake_module, instantiate

MATRIX = load_matrix()
IDS = [1, 2, 3, 4, 5]
REFUSED = "refused"
Seen = dict[str, Any]


def _fakes(version: str) -> Any:
    return fake_module(MATRIX.row(version))


def _last(target: Any, method: str) -> Seen:
    calls: list[Seen] = [kwargs for name, _, kwargs in target._call_args if name == method]
    return calls[-1]


def _calls(target: Any, method: str) -> list[Seen]:
    return [kwargs for name, _, kwargs in target._call_args if name == method]


def _attempt(run: Callable[[], Seen]) -> Seen | str:
    try:
        return run()
    except UnsupportedArgumentError:
        return REFUSED


# --- one driver per row: (release, allow) -> what the release received, or REFUSED ---------------


def _init(version: str, allow: Any, config: MPConfig, worker: bool = False) -> Seen | str:
    mod = _fakes(version)
    cls = mod.LMCacheMPWorkerAdapter if worker else mod.LMCacheMPSchedulerAdapter
    return _attempt(
        lambda: mp_init_kwargs(
            cls,
            config,
            object(),
            parallel_strategy_cls=getattr(mod, "ParallelStrategy", None),
            allow=allow,
        )
    )


def _strategy(version: str, allow: Any, config: MPConfig) -> Seen | str:
    mod = _fakes(version)
    downgrades = Downgrades(normalise_allow(allow), "ParallelStrategy", version)
    return _attempt(
        lambda: dict(vars(build_parallel_strategy(mod.ParallelStrategy, config, downgrades)))
    )


def _lookup(version: str, allow: Any, **kwargs: Any) -> Seen | str:
    target = instantiate(_fakes(version).LMCacheMPSchedulerAdapter)
    adapter = MPSchedulerAdapter(target, allow=allow)

    def run() -> Seen:
        adapter.lookup("r", list(IDS), block_hashes=["h1", "h2"], **kwargs)
        return _last(target, "maybe_submit_lookup_request")

    return _attempt(run)


def _free(version: str, allow: Any, **kwargs: Any) -> Seen | str:
    target = instantiate(_fakes(version).LMCacheMPSchedulerAdapter)
    adapter = MPSchedulerAdapter(target, allow=allow)

    def run() -> Seen:
        adapter.free_lookup_locks(list(IDS), 0, 2, "r", **kwargs)
        calls = _calls(target, "free_lookup_locks")
        return {"calls": calls, **calls[0]}

    return _attempt(run)


def _submit(version: str, allow: Any, **kwargs: Any) -> Seen | str:
    target = instantiate(_fakes(version).LMCacheMPWorkerAdapter)
    adapter = MPWorkerAdapter(target, allow=allow)

    def run() -> Seen:
        adapter.submit_store_request("r", "op", "event", **kwargs)
        return _last(target, "submit_store_request")

    return _attempt(run)


def _register(version: str, allow: Any, **kwargs: Any) -> Seen | str:
    target = instantiate(_fakes(version).LMCacheMPWorkerAdapter)
    adapter = MPWorkerAdapter(target, allow=allow)

    def run() -> Seen:
        adapter.register_kv_caches({"layer": 0}, **kwargs)
        return _last(target, "register_kv_caches")

    return _attempt(run)


def _op(version: str, allow: Any, block_ids: Any = (4, 5), **kwargs: Any) -> Seen | str:
    mod = _fakes(version)
    adapter = MPWorkerAdapter(instantiate(mod.LMCacheMPWorkerAdapter), allow=allow)
    return _attempt(
        lambda: dict(
            vars(
                adapter.make_load_store_op(
                    list(block_ids), list(IDS), block_hashes=["h1", "h2"], **kwargs
                )
            )
        )
    )


def _engine_lookup(version: str, allow: Any, **kwargs: Any) -> Seen | str:
    target = instantiate(_fakes(version).LMCacheEngine)
    adapter = EngineAdapter(target, allow=allow)

    def run() -> Seen:
        adapter.lookup(list(IDS), **kwargs)
        return _last(target, "lookup")

    return _attempt(run)


def _engine_unpin(version: str, allow: Any) -> Seen | str:
    target = instantiate(_fakes(version).LMCacheEngine)
    EngineAdapter(target, allow=allow).unpin("id-1")
    name, args, kwargs = target._call_args[-1]
    return {"method": name, "args": args, **kwargs}


def _engine_prefetch(version: str, allow: Any) -> Seen | str:
    target = instantiate(_fakes(version).LMCacheEngine)
    EngineAdapter(target, allow=allow).prefetch(list(IDS), lookup_id="id-1")
    name, args, kwargs = target._call_args[-1]
    return {"method": name, "args": args, **kwargs}


def _builder(version: str, allow: Any, **kwargs: Any) -> Seen | str:
    builder = instantiate(_fakes(version).LMCacheEngineBuilder)

    def run() -> Seen:
        get_or_create_engine(builder, "id", "cfg", "meta", "gpu", allow=allow, **kwargs)
        return _last(builder, "get_or_create")

    return _attempt(run)


def _no_broadcast(tensor: Any, src: int) -> None:
    return None


URLS = ["tcp://a:1", "tcp://b:1"]


@dataclass(frozen=True)
class Drive:
    """How to exercise one row, and what a release that takes it receives under which name."""

    run: Callable[[str, Any], Seen | str]
    #: The key the release receives the argument under (``None``: checked by ``mapped``).
    keyword: str | None
    #: map/emulate rows: what the release before must have received instead.
    mapped: Callable[[Seen], bool] | None = None
    #: The first release at which to check the keyword is received (default: the row's since).
    at: str | None = None


DRIVES: dict[str, Drive] = {
    "server_urls": Drive(
        lambda v, a: _init(v, a, MPConfig("tcp://a:1", "m", 16)),
        "server_urls",
        mapped=lambda seen: seen["server_url"] == "tcp://a:1" and "server_urls" not in seen,
    ),
    "several_servers": Drive(
        lambda v, a: _init(v, a, MPConfig(URLS, "m", 16, world_size=2)), "server_urls"
    ),
    "tp_size": Drive(
        lambda v, a: _init(v, a, MPConfig("u", "m", 16, world_size=4, tp_size=2, use_mla=True)),
        "tp_size",
    ),
    "mq_timeout": Drive(
        lambda v, a: _init(v, a, MPConfig("u", "m", 16, mq_timeout=3.0)), "mq_timeout"
    ),
    "heartbeat_interval": Drive(
        lambda v, a: _init(v, a, MPConfig("u", "m", 16, heartbeat_interval=3.0)),
        "heartbeat_interval",
    ),
    "parallel_strategy": Drive(
        lambda v, a: _init(v, a, MPConfig("u", "m", 16, world_size=4, rank=3)),
        "parallel_strategy",
        mapped=lambda seen: (seen["world_size"], seen["kv_rank"]) == (4, 3),
    ),
    "pp_size": Drive(
        lambda v, a: _init(v, a, MPConfig("u", "m", 16, pp_size=2)), "parallel_strategy"
    ),
    "dcp_size": Drive(lambda v, a: _strategy(v, a, MPConfig("u", "m", 16, dcp_size=2)), "dcp_size"),
    "extra_config": Drive(
        lambda v, a: _init(v, a, MPConfig("u", "m", 16, extra_config={"k": 1})), "extra_config"
    ),
    "enable_kv_events": Drive(
        lambda v, a: _init(v, a, MPConfig("u", "m", 16, enable_kv_events=True), worker=True),
        "enable_kv_events",
    ),
    "required_chunk_alignment": Drive(
        lambda v, a: _init(v, a, MPConfig("u", "m", 16, required_chunk_alignment=64)),
        "required_chunk_alignment",
    ),
    "token_ids": Drive(
        lambda v, a: _lookup(v, a),
        "token_ids",
        mapped=lambda seen: seen.get("block_hashes") == ["h1", "h2"],
    ),
    "packed_token_ids": Drive(
        lambda v, a: _lookup(v, a),
        "packed_token_ids",
        mapped=lambda seen: seen.get("token_ids") == IDS,
    ),
    "cache_salt": Drive(lambda v, a: _lookup(v, a, cache_salt="tenant"), "cache_salt"),
    "request_configs": Drive(
        lambda v, a: _lookup(v, a, request_configs={"k": 1}), "request_configs"
    ),
    "reserve_last_token": Drive(
        lambda v, a: _lookup(v, a, reserve_last_token=True),
        "reserve_last_token",
        mapped=lambda seen: seen.get("token_ids") == IDS[:-1],
    ),
    "reserve_by_hashes": Drive(
        lambda v, a: _lookup(v, a, reserve_last_token=True), "reserve_last_token", at="0.5.6"
    ),
    "start": Drive(lambda v, a: _lookup(v, a, start=2), "start"),
    "extra_ranges": Drive(
        lambda v, a: _free(v, a, extra_ranges=[(2, 4)]),
        "extra_ranges",
        mapped=lambda seen: [(c["start"], c["end"]) for c in seen["calls"]] == [(0, 2), (2, 4)],
    ),
    "engine_group_infos": Drive(
        lambda v, a: _register(v, a, engine_group_infos=["g0", "g1"]), "engine_group_infos"
    ),
    "layout_hints": Drive(lambda v, a: _register(v, a, layout_hints={"h": 1}), "layout_hints"),
    "skip_first_n_tokens": Drive(
        lambda v, a: _op(v, a, skip_first_n_tokens=1), "skip_first_n_tokens"
    ),
    "block_ids": Drive(
        lambda v, a: _op(v, a),
        None,
        mapped=lambda seen: seen["block_ids"] == [4, 5],
    ),
    "lookup_id": Drive(
        lambda v, a: _engine_lookup(v, a, lookup_id="id-1"),
        "lookup_id",
        mapped=lambda seen: seen.get("request_id") == "id-1",
    ),
    "pinned_lookup": Drive(
        lambda v, a: _engine_lookup(v, a, lookup_id="id-1", pin=True), "request_id"
    ),
    "engine_request_configs": Drive(
        lambda v, a: _engine_lookup(v, a, request_configs={"k": 1}), "request_configs"
    ),
    "unpin": Drive(
        _engine_unpin,
        None,
        mapped=lambda seen: seen["method"] == "lookup_unpin" and ["id-1"] in seen.values(),
    ),
    "prefetch": Drive(
        _engine_prefetch,
        None,
        mapped=lambda seen: seen["method"] == "prefetch",
    ),
    "broadcast_fn": Drive(lambda v, a: _builder(v, a, broadcast_fn=_no_broadcast), "broadcast_fn"),
    "broadcast_required": Drive(
        lambda v, a: _builder(v, a),
        "broadcast_fn",
        mapped=lambda seen: "broadcast_fn" not in seen,
    ),
}


def _owner_releases(row: Argument) -> list[str]:
    engine_rows = row.member.startswith((ENGINE.name, "LMCacheEngineBuilder"))
    cls = (
        "LMCacheEngineBuilder"
        if row.member.startswith("LMCacheEngineBuilder")
        else (ENGINE.name if engine_rows else MP_SCHEDULER.name)
    )
    return [r.version for r in MATRIX.rows if cls in r.surfaces]


def _before(row: Argument) -> str:
    from packaging.version import Version

    older = [v for v in _owner_releases(row) if Version(v) < Version(row.since)]
    assert older, f"{row.key}: no release of its class before {row.since}"
    return older[-1]


def test_every_row_has_a_driver() -> None:
    assert set(DRIVES) == {row.key for row in ARGUMENTS}


@pytest.mark.parametrize("row", ARGUMENTS, ids=lambda r: r.key)
def test_the_row_is_what_happens_on_the_release_before_its_first(row: Argument) -> None:
    drive = DRIVES[row.key]
    before = _before(row)
    seen = drive.run(before, ())
    if row.on_older == "error":
        assert seen == REFUSED, (row.key, before, seen)
        allowed = drive.run(before, {row.argument})
        assert allowed != REFUSED, (row.key, before)
        assert isinstance(allowed, dict)
        if drive.keyword is not None:
            assert drive.keyword not in allowed or allowed[drive.keyword] in (None, [], ()), (
                row.key,
                allowed,
            )
        everything = drive.run(before, True)
        assert everything != REFUSED, (row.key, "allow=True")
    elif row.on_older == "drop":
        assert isinstance(seen, dict), (row.key, before, seen)
        assert drive.keyword not in seen, (row.key, seen)
    else:  # map, emulate: the same meaning in the release's own form
        assert isinstance(seen, dict), (row.key, before, seen)
        assert drive.mapped is not None and drive.mapped(seen), (row.key, before, seen)


@pytest.mark.parametrize(
    "row", [r for r in ARGUMENTS if DRIVES[r.key].keyword is not None], ids=lambda r: r.key
)
def test_the_first_release_takes_it_under_its_name(row: Argument) -> None:
    drive = DRIVES[row.key]
    at = drive.at or row.since
    seen = drive.run(at, ())
    assert isinstance(seen, dict), (row.key, at, seen)
    assert drive.keyword in seen, (row.key, at, seen)


def test_allow_is_normalised_once_and_a_typo_is_refused() -> None:
    assert normalise_allow("cache_salt") == frozenset({"cache_salt"})
    assert normalise_allow(True) is True
    assert normalise_allow(False) == frozenset()
    with pytest.raises(UnsupportedArgumentError, match="cache_sault"):
        normalise_allow({"cache_sault"})
    with pytest.raises(UnsupportedArgumentError, match="cache_sault"):
        MPSchedulerAdapter(
            instantiate(_fakes("0.5.6").LMCacheMPSchedulerAdapter), allow={"cache_sault"}
        )


def test_a_keyword_only_parameter_is_taken() -> None:
    """Whether a release takes an argument is read from meaning: a keyword-only parameter of
    that name is taken (and passed by keyword); ``**kwargs`` is not (it would swallow it)."""
    from lmcache_compat.core.signatures import facts_of

    def keyword_only(request_id: str, *, cache_salt: str = "") -> None: ...

    def swallowing(request_id: str, **kwargs: Any) -> None: ...

    downgrades = Downgrades(frozenset(), "m", None)
    taken = apply(ARG.cache_salt, facts_of(keyword_only, drop_first=False), downgrades)
    assert taken.takes
    kwargs: dict[str, Any] = {}
    taken.put(kwargs, "tenant")
    assert kwargs == {"cache_salt": "tenant"}
    refused = apply(ARG.cache_salt, facts_of(swallowing, drop_first=False), downgrades)
    assert refused.action == "error"
    with pytest.raises(UnsupportedArgumentError):
        refused.put({}, "tenant")
    refused.put({}, "")  # not asked for: nothing to refuse


_ = pack_token_ids  # the fakes' codec (0.5.7rc2 rows) is found beside them
