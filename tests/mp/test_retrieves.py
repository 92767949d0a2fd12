"""Failed MP retrieves fail closed (lmcache_compat.mp.retrieves), over fakes whose retrieve
internals mirror the real releases' (tests/mp/retrieve_fakes.py)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from lmcache_compat import MPWorkerAdapter
from lmcache_compat.errors import NotAnEngineError
from lmcache_compat.mp.retrieves import RetrieveRecords, read_records
from lmcache_compat.testing.fakes import fake_class
from tests.mp import retrieve_fakes as rf
from tests.mp.retrieve_fakes import Future, Op


def _worker(cls: type, *futures: Future) -> tuple[MPWorkerAdapter, Any]:
    engine = cls()
    engine.next_future = list(futures)
    return MPWorkerAdapter(engine), engine


def _step(worker: MPWorkerAdapter, *ids: str) -> tuple[set[str], set[int]]:
    _, done = worker.get_finished(set(ids))
    return set(done or ()), worker.get_block_ids_with_load_errors()


def test_the_records_of_each_shape_are_read_from_the_source() -> None:
    assert read_records(rf.Worker054, "0.5.4") == RetrieveRecords(
        "retrieve_futures", "pair", "per-request", "bool"
    )
    assert read_records(rf.Worker0313, "0.3.13") == RetrieveRecords(
        "retrieve_futures", "pair", "first-id", "all"
    )
    assert read_records(rf.Worker0315, "0.3.15") == RetrieveRecords(
        "retrieve_futures", "bare", "per-request", "bool"
    )
    # the public fakes keep no futures: they declare it
    assert read_records(fake_class("0.5.6", "LMCacheMPWorkerAdapter"), "0.5.6") is None


def test_unreadable_internals_are_refused_in_one_line() -> None:
    with pytest.raises(NotAnEngineError) as info:
        MPWorkerAdapter(rf.NoStore.__new__(rf.NoStore))
    text = str(info.value)
    assert "\n" not in text and "retrieve_records=" in text and "LMCache" in text


@pytest.mark.parametrize("cls", [rf.Worker054, rf.Worker0315])
def test_a_false_result_is_exactly_that_ops_block_ids_on_the_finishing_pass(cls: type) -> None:
    worker, _ = _worker(cls, Future(False), Future(True))
    worker.submit_retrieve_request("bad", Op(3, 4), None)
    worker.submit_retrieve_request("good", Op(5, 6), None)
    assert _step(worker, "bad", "good") == ({"bad", "good"}, {3, 4})
    assert _step(worker) == (set(), set())  # once


def test_nothing_is_counted_twice_where_the_release_reports_it_too() -> None:
    worker, engine = _worker(rf.Worker056, Future(False))
    worker.submit_retrieve_request("bad", Op(7, 8), None)
    assert _step(worker, "bad") == ({"bad"}, {7, 8})
    assert _step(worker) == (set(), set())
    assert engine.error_block_ids == set()


def test_a_pending_future_is_judged_when_the_release_reports_it_finished() -> None:
    late = Future(False, done=False)
    worker, _ = _worker(rf.Worker054, late)
    worker.submit_retrieve_request("r", Op(1, 2), None)
    assert _step(worker, "r") == (set(), set())
    late.done = True
    assert _step(worker, "r") == ({"r"}, {1, 2})


def test_the_unhealthy_drain_and_a_drop_at_submit_are_reported_once() -> None:
    worker, engine = _worker(rf.Worker054, Future(done=False))
    worker.submit_retrieve_request("inflight", Op(1), None)
    engine.healthy = False
    worker.submit_retrieve_request("dropped", Op(2), None)
    assert _step(worker) == ({"inflight", "dropped"}, {1, 2})
    assert _step(worker) == (set(), set())


def test_a_future_that_raises_is_a_load_error_logged_once(caplog: Any) -> None:
    boom = Future(done=False)
    worker, engine = _worker(rf.Worker054, boom, Future(True))
    worker.submit_retrieve_request("r", Op(9), None)
    worker.submit_retrieve_request("ok", Op(10), None)
    boom.done, boom.raises = True, RuntimeError("transfer broke")
    with caplog.at_level(logging.ERROR, logger="lmcache_compat.mp"):
        assert _step(worker, "r") == ({"r", "ok"}, {9})
        assert _step(worker) == (set(), set())
    logged = [r for r in caplog.records if "raised" in r.getMessage()]
    assert len(logged) == 1 and logged[0].exc_info is not None
    assert engine.retrieve_futures == {}


def test_a_future_resolved_at_submit_that_raises_never_reaches_the_release() -> None:
    worker, engine = _worker(rf.Worker054, Future(raises=RuntimeError("x")))
    worker.submit_retrieve_request("r", Op(4), None)
    assert "r" not in engine.retrieve_futures
    assert _step(worker, "r") == ({"r"}, {4})


def test_an_engine_error_no_future_explains_propagates() -> None:
    worker, engine = _worker(rf.Worker054)

    def broken(ids: set[str]) -> Any:
        raise ValueError("not a retrieve")

    engine.get_finished = broken
    worker = MPWorkerAdapter(engine)
    with pytest.raises(ValueError, match="not a retrieve"):
        worker.get_finished(set())


def test_0_3_13_partial_results_and_batches_without_an_error_method() -> None:
    worker, _ = _worker(rf.Worker0313, Future([True, False]), Future([True, True]))
    worker.submit_retrieve_request("part", Op(1, 2), None)
    worker.batched_submit_retrieve_requests(["a", "b"], [Op(3), Op(4)], None)
    assert _step(worker) == ({"part", "a", "b"}, {1, 2})


def test_a_failed_batch_fails_each_of_its_ops_on_0_3_13() -> None:
    worker, _ = _worker(rf.Worker0313, Future([False]))
    worker.batched_submit_retrieve_requests(["a", "b"], [Op(3), Op(4)], None)
    assert _step(worker) == ({"a", "b"}, {3, 4})


def test_no_false_failure_over_many_successes() -> None:
    worker, _ = _worker(rf.Worker054, *(Future(True) for _ in range(1000)))
    for i in range(1000):
        worker.submit_retrieve_request(f"r{i}", Op(i), None)
    done, errors = _step(worker)
    assert len(done) == 1000 and errors == set()


@pytest.mark.parametrize(
    ("lmcache", "listed"), [("0.3.13", True), ("0.5.4", True), ("0.5.5", False)]
)
def test_doctor_names_the_dropped_failed_retrieves_until_0_5_5(lmcache: str, listed: bool) -> None:
    from lmcache_compat.upstream.known_issues import verdict

    found = [
        i
        for i in verdict("0.32.0", lmcache).issues
        if i.key == "mp-failed-retrieve-reported-loaded"
    ]
    assert bool(found) is listed
    if found:
        assert "LMCache#2865, #3388; fixed in 0.5.5" in found[0].problem
        assert "use LMCacheCompatMPConnector" in found[0].fix


def test_the_catalog_says_the_mp_worker_tracks_failed_retrieves_itself() -> None:
    """The MP row's impact is about the release's own adapter: MPWorkerAdapter (and so
    LMCacheCompatMPConnector) reports failed retrieves on every release."""
    from lmcache_compat import Capability

    spec = Capability.MP_LOAD_ERROR_REPORTING.spec
    assert "cannot be detected" not in spec.impact
    assert "release's own worker adapter" in spec.impact
    assert "MPWorkerAdapter" in spec.impact and "own tracking" in spec.impact
    assert spec.impact in (Capability.MP_LOAD_ERROR_REPORTING.__doc__ or "")
