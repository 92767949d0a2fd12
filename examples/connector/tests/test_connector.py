"""The example connector's tests: each runs once per release --lmcache-release selects, against
that release's fakes (or, with ``installed``, doubles of the installed LMCache's real classes),
and uses every fault lmcache_compat.testing injects."""

from __future__ import annotations

import warnings

import pytest
from example_connector import ExampleConnector, loaded_tokens, lookup_hits

from lmcache_compat import EngineAdapter, MPSchedulerAdapter, probe
from lmcache_compat.testing import (
    fail_loads,
    kv_events,
    lost_reply,
    short_retrieve,
    slow_wait_for_save,
    unhealthy,
)

IMPL = "LMCacheConnectorV1Impl"


def _connector(lmcache_release):  # type: ignore[no-untyped-def]
    engine = lmcache_release.engine(IMPL)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return engine, ExampleConnector(engine, slow_save_s=0.01)


def test_the_connector_sees_what_the_release_has(lmcache_release) -> None:  # type: ignore[no-untyped-def]
    engine, conn = _connector(lmcache_release)
    # with --lmcache-release=installed, fake() is the real class and engine a double of it
    assert probe(engine) == probe(lmcache_release.fake(IMPL))
    assert conn.reports_failed_loads is lmcache_release.has("load_error_reporting")


def test_failed_loads_are_reported_or_unknown(lmcache_release) -> None:  # type: ignore[no-untyped-def]
    engine, conn = _connector(lmcache_release)
    injected = fail_loads(engine, {4, 9})
    got = conn.failed_blocks()
    if injected.visible:
        assert got == {4, 9}
        assert conn.failed_blocks() == set()  # reported once
    else:
        assert got is None, injected.note  # unknown, never "no failures"


def test_short_retrieve_on_the_connector(lmcache_release) -> None:  # type: ignore[no-untyped-def]
    engine, conn = _connector(lmcache_release)
    injected = short_retrieve(engine, 2, 4, block_ids={7})
    assert conn.failed_blocks() == ({7} if injected.visible else None)


def test_a_short_retrieve_loads_less(lmcache_release) -> None:  # type: ignore[no-untyped-def]
    engine = lmcache_release.engine("LMCacheEngine")
    short_retrieve(engine, 3, 8)
    assert loaded_tokens(EngineAdapter(engine).retrieve(list(range(8)))) == 3


def test_events_arrive_once_where_the_release_has_them(lmcache_release) -> None:  # type: ignore[no-untyped-def]
    engine, conn = _connector(lmcache_release)
    injected = kv_events(engine, ["stored:1", "removed:2"])
    assert conn.events() == (["stored:1", "removed:2"] if injected.visible else [])
    assert conn.events() == []


def test_warns_when_failures_are_invisible(lmcache_release) -> None:  # type: ignore[no-untyped-def]
    engine = lmcache_release.engine(IMPL)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ExampleConnector(engine)
    invisible = not lmcache_release.has("load_error_reporting")
    assert any("cannot report failed KV loads" in str(w.message) for w in caught) is invisible


def test_slow_saves_are_counted(lmcache_release) -> None:  # type: ignore[no-untyped-def]
    engine, conn = _connector(lmcache_release)
    slow_wait_for_save(engine, 0.02)
    assert conn.save() >= 0.02 and conn.slow_saves == 1


def test_shutdown_once(lmcache_release) -> None:  # type: ignore[no-untyped-def]
    engine, conn = _connector(lmcache_release)
    conn.close()
    conn.close()
    shutdowns = [c for c in engine.calls if c.name == "shutdown"]
    assert len(shutdowns) == (1 if lmcache_release.has("shutdown") else 0)


@pytest.mark.lmcache_requires("mp_adapters")
def test_mp_server_unhealthy(lmcache_release) -> None:  # type: ignore[no-untyped-def]
    sched = lmcache_release.engine("LMCacheMPSchedulerAdapter")
    injected = unhealthy(sched)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert lookup_hits(MPSchedulerAdapter(sched), "r1") == 0
    # where the release has a health property the failure is seen, else it reads as a miss
    assert bool(caught) is injected.visible


@pytest.mark.lmcache_requires("mp_adapters")
def test_mp_reply_never_comes(lmcache_release) -> None:  # type: ignore[no-untyped-def]
    sched = lmcache_release.engine("LMCacheMPSchedulerAdapter")
    injected = lost_reply(sched)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        hits = lookup_hits(MPSchedulerAdapter(sched), "r1")
    # timed out and marked unhealthy where the release can say so; else pending for ever
    assert hits == (0 if injected.visible else None)
    assert bool(caught) is injected.visible
