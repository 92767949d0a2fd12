"""Fakes of ``LMCacheMPWorkerAdapter`` whose retrieve internals mirror the real releases'
(read from their wheels: ``lmcache/integration/vllm/vllm_multi_process_adapter.py``), on top of
the generated surface fakes: how ``submit_retrieve_request`` stores its future, how
``get_finished`` reads it, what the release itself puts into its error set. The futures are
stand-ins for ``MessagingFuture`` (``query`` / ``result``), resolved by the test."""

from __future__ import annotations

from typing import Any

from lmcache_compat.testing.fakes import fake_class

RetrieveResult = bool
ChunkResults = list[bool]


class Future:
    """``MessagingFuture``'s surface: ``query()``, ``result(timeout)``."""

    def __init__(self, result: Any = True, *, done: bool = True, raises: Exception | None = None):
        self.done, self.value, self.raises = done, result, raises

    def query(self) -> bool:
        return self.done

    def result(self, timeout: float | None = None) -> Any:
        if self.raises is not None:
            raise self.raises
        return self.value


class _Base:
    next_future: list[Future]

    def _take(self) -> Future:
        return self.next_future.pop(0) if self.next_future else Future()


class Worker054(fake_class("0.5.4", "LMCacheMPWorkerAdapter"), _Base):  # type: ignore[misc]
    """0.5.4: ``(future, block ids)`` pairs; a False result is logged, reported finished, and
    its ids are NOT errors (the upstream bug); a drop at submit while unhealthy is."""

    healthy = True

    def __init__(self) -> None:
        self.retrieve_futures: dict[str, tuple[Future[RetrieveResult], list[int]]] = {}  # type: ignore[type-arg]
        self.retrieve_events: dict[str, Any] = {}
        self.error_block_ids: set[int] = set()
        self._dropped_retrieves: set[str] = set()
        self.next_future = []

    def submit_retrieve_request(self, request_id, op, event, cache_salt=""):  # type: ignore[no-untyped-def]
        if not self.healthy:
            self.error_block_ids.update(op.flat_block_ids)
            self._dropped_retrieves.add(request_id)
            return
        future = self._take()
        self.retrieve_futures[request_id] = (future, op.flat_block_ids)
        self.retrieve_events[request_id] = event

    def batched_submit_retrieve_requests(self, request_ids, ops, event, cache_salts=None):  # type: ignore[no-untyped-def]
        for request_id, op in zip(request_ids, ops, strict=False):
            self.submit_retrieve_request(request_id, op, event)  # type: ignore[no-untyped-call]

    reports_failed_results = False

    def get_finished(self, finished_req_ids_from_engine):  # type: ignore[no-untyped-def]
        finished = set()
        if not self.healthy:
            for request_id, (_f, ids) in self.retrieve_futures.items():
                finished.add(request_id)
                self.error_block_ids.update(ids)
            self.retrieve_futures.clear()
        for request_id, (future, ids) in self.retrieve_futures.items():
            if not future.query():
                continue
            result = future.result(timeout=60)
            finished.add(request_id)
            if not result and self.reports_failed_results:
                self.error_block_ids.update(ids)
        for request_id in finished:
            self.retrieve_futures.pop(request_id, None)
            self.retrieve_events.pop(request_id, None)
        dropped, self._dropped_retrieves = self._dropped_retrieves, set()
        finished.update(dropped)
        return set(), finished

    def get_block_ids_with_load_errors(self):  # type: ignore[no-untyped-def]
        errors = self.error_block_ids.copy()
        self.error_block_ids.clear()
        return errors


class Worker056(Worker054):
    """0.5.5 on: the same, and a False result's ids go into the release's error set."""

    reports_failed_results = True


class Worker0313(fake_class("0.3.13", "LMCacheMPWorkerAdapter"), _Base):  # type: ignore[misc]
    """0.3.13: no error set at all; per-chunk ``list[bool]`` results; a batch is one future under
    its first id, ``(future, other ids)``."""

    def __init__(self) -> None:
        self.retrieve_futures: dict[str, tuple[Future[ChunkResults], list[str]]] = {}  # type: ignore[type-arg]
        self.next_future = []

    def submit_retrieve_request(self, request_id, op, event):  # type: ignore[no-untyped-def]
        future = self._take()
        self.retrieve_futures[request_id] = (future, [])

    def batched_submit_retrieve_requests(self, request_ids, ops, event):  # type: ignore[no-untyped-def]
        future = self._take()
        self.retrieve_futures[request_ids[0]] = (future, request_ids[1:])

    def get_finished(self, finished_req_ids_from_engine):  # type: ignore[no-untyped-def]
        finished = set()
        for request_id, (future, others) in self.retrieve_futures.items():
            if not future.query():
                continue
            future.result()
            finished.add(request_id)
            finished.update(others)
        for request_id in list(self.retrieve_futures):
            if request_id in finished:
                self.retrieve_futures.pop(request_id)
        return set(), finished


class Worker0315(fake_class("0.3.15", "LMCacheMPWorkerAdapter"), _Base):  # type: ignore[misc]
    """0.3.15, 0.4.1: the bare future, a bool result, no error set."""

    def __init__(self) -> None:
        self.retrieve_futures: dict[str, Future[RetrieveResult]] = {}  # type: ignore[type-arg]
        self.next_future = []

    def submit_retrieve_request(self, request_id, op, event):  # type: ignore[no-untyped-def]
        future = self._take()
        self.retrieve_futures[request_id] = future

    def get_finished(self, finished_req_ids_from_engine):  # type: ignore[no-untyped-def]
        finished = {r for r, f in self.retrieve_futures.items() if f.query()}
        for request_id in finished:
            self.retrieve_futures.pop(request_id).result()
        return set(), finished


class NoStore(fake_class("0.5.4", "LMCacheMPWorkerAdapter")):  # type: ignore[misc]
    """A class whose submit keeps no future anywhere readable."""

    def submit_retrieve_request(self, request_id, op, event, cache_salt=""):  # type: ignore[no-untyped-def]
        return None


class Op:
    """A ``LoadStoreOp`` of 0.4.7 on: ``block_ids`` per KV cache group, ``flat_block_ids``."""

    def __init__(self, *block_ids: int) -> None:
        self.block_ids = [list(block_ids)]
        self.flat_block_ids = list(block_ids)
