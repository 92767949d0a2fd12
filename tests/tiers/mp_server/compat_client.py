"""lmcache-compat's MP adapters against a real LMCache MP server, run under a release's venv.

The test process (``test_mp_adapters_real.py``) starts the server(s) and runs this script with
the Python of the release's venv and ``PYTHONPATH`` set to the repository root, so that the
installed LMCache is the release under test and ``lmcache_compat`` is this checkout. Every step
goes through OUR adapters (``MPSchedulerAdapter.create`` / ``MPWorkerAdapter.create`` from an
``MPConfig``); the release's own classes are touched only where a step says so (the benchmark's
baseline, the "own adapter" half of the mixed-version measurement, the release's own token codec
and ``BlockAllocationRecord``). Every wait is a bounded poll. One JSON object is printed.

    python compat_client.py '{"mode": "release", "urls": ["tcp://127.0.0.1:PORT"], ...}'

Modes: ``release`` (every step of one release against its own server(s)), ``mixed`` (this
release's adapters against another release's server), ``bench`` (lookup round trips: ours vs
the release's own adapter, interleaved).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.metadata
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from typing import Any

TOKENS = list(range(1, 513))  # two 256-token chunks (the servers run with --chunk-size 256)
BLOCK = 16  # vLLM block size: 16 blocks per chunk
SALT_A, SALT_B = "tenant-a", "tenant-b"
SPINS = range(100_000)  # the benchmark's poll bound (10 s at POLL_S)
POLL_S = 0.0001  # between two polls of a benchmark round trip

zmq: Any = importlib.import_module("zmq")

from lmcache_compat import Capability, MPConfig, MPSchedulerAdapter, MPWorkerAdapter  # noqa: E402
from lmcache_compat.errors import (  # noqa: E402
    MPServerError,
    MPVersionMismatchError,
    UnsupportedArgumentError,
)
from tests.tiers.mp_server.release_side import (  # noqa: E402
    own_init_kwargs,
    pack_token_ids,
    parallel_strategy_class,
    scheduler_class,
    worker_class,
)


def _error(exc: BaseException) -> dict[str, Any]:
    out: dict[str, Any] = {"type": type(exc).__name__, "message": str(exc)[:2000]}
    if isinstance(exc, UnsupportedArgumentError):
        out["argument"] = exc.argument
    if isinstance(exc, MPVersionMismatchError):
        out.update(client=exc.client, server=exc.server, url=exc.url)
    return out


class Steps:
    """Records each step: its value, or the exception it raised, and how long it took."""

    def __init__(self) -> None:
        self.out: dict[str, Any] = {}

    @contextlib.contextmanager
    def step(self, name: str) -> Iterator[dict[str, Any]]:
        record: dict[str, Any] = {}
        self.out[name] = record
        print(f"compat_client: step {name}", file=sys.stderr, flush=True)
        t0 = time.monotonic()
        try:
            yield record
            record.setdefault("ok", True)
        except Exception as exc:
            record["ok"] = False
            record["error"] = _error(exc)
            record["traceback"] = traceback.format_exc().splitlines()[-6:]
        finally:
            record["seconds"] = round(time.monotonic() - t0, 4)


def poll(fn: Callable[[], Any], timeout: float, interval: float = 0.002) -> tuple[Any, int]:
    """Call ``fn`` until it returns something other than None/empty, at most ``timeout`` s."""
    deadline = time.monotonic() + timeout
    polls = 0
    while True:
        polls += 1
        value = fn()
        if value is not None and value != set():
            return value, polls
        if time.monotonic() > deadline:
            return value, polls
        time.sleep(interval)


def block_hashes(tokens: list[int]) -> list[bytes]:
    """vLLM-style block hashes for 0.3.13 (lookups keyed by block hashes)."""
    n = len(tokens) // BLOCK
    return [hashlib.sha256(str(tokens[: (i + 1) * BLOCK]).encode()).digest() for i in range(n)]


def lookup_round_trip(
    sched: MPSchedulerAdapter,
    request_id: str,
    tokens: Any,
    timeout: float,
    cleanup: bool = True,
    **kwargs: Any,
) -> dict[str, Any]:
    """lookup + poll check_lookup_result (bounded) [+ cleanup]: the adapter's round trip."""
    if Capability.MP_LOOKUP_BY_TOKEN_IDS not in sched.capabilities:
        kwargs["block_hashes"] = block_hashes(list(tokens))
    t0 = time.perf_counter()
    submitted = sched.lookup(request_id, tokens, **kwargs)
    result, polls = poll(lambda: sched.check_lookup_result(request_id), timeout, 0.001)
    seconds = time.perf_counter() - t0
    if cleanup:
        sched.cleanup_lookup_result(request_id)
    return {
        "submitted": submitted,
        "hits": result,
        "polls": polls,
        "ms": round(seconds * 1e3, 3),
    }


# --- the worker: CPU KV caches ---------------------------------------------------------------


def kv_caches(seed: int) -> dict[str, Any]:
    import torch

    torch.manual_seed(seed)
    # vLLM's CPU attention layout, HND: [2, num_blocks, num_heads, block_size, head_size]
    kv = {
        f"model.layers.{i}.self_attn.attn": torch.zeros(2, 64, 2, BLOCK, 8, dtype=torch.bfloat16)
        for i in range(2)
    }
    for t in kv.values():
        t[:, :32].normal_()
    return kv


def refill(kv: dict[str, Any], seed: int) -> None:
    import torch

    gen = torch.Generator().manual_seed(seed)
    for t in kv.values():
        t[:, :32] = torch.randn(t[:, :32].shape, generator=gen).to(t.dtype)


def snapshot(kv: dict[str, Any]) -> dict[str, Any]:
    return {k: v[:, :32].clone() for k, v in kv.items()}


def equal_to(kv: dict[str, Any], before: dict[str, Any]) -> bool:
    import torch

    return all(torch.equal(kv[k][:, 32:64], before[k]) for k in kv)


def store(
    worker: MPWorkerAdapter, request_id: str, tokens: list[int], timeout: float, **kw: Any
) -> Any:
    op = worker.make_load_store_op(list(range(32)), tokens)
    worker.submit_store_request(request_id, op, None, **kw)
    done, _ = poll(lambda: worker.get_finished({request_id})[0], timeout)
    return sorted(done) if done else None


def retrieve(
    worker: MPWorkerAdapter, request_id: str, tokens: list[int], timeout: float, **kw: Any
) -> Any:
    op = worker.make_load_store_op(list(range(32, 64)), tokens)
    worker.submit_retrieve_request(request_id, op, None, **kw)
    done, _ = poll(lambda: worker.get_finished({request_id})[1], timeout)
    return sorted(done) if done else None


def register(worker: MPWorkerAdapter, kv: dict[str, Any]) -> None:
    worker.register_kv_caches(kv, layout_hints={"kv_layout": "HND"})


# --- modes -----------------------------------------------------------------------------------


def config(spec: dict[str, Any], urls: list[str], http: list[str] | None, **kw: Any) -> MPConfig:
    return MPConfig(
        urls, kw.pop("model", "m"), BLOCK, mq_timeout=spec["mq_timeout"], http_urls=http, **kw
    )


def raw_reply(front: str, route: str | None = None) -> dict[str, Any]:
    """What the front end sends for ``GET route`` (default ``/lmc_version``), byte for byte
    (the library reads it with ``release_of_reply``; the test compares both)."""
    import http.client
    import urllib.parse

    from lmcache_compat.mp.server import ROUTE

    parts = urllib.parse.urlsplit(front)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=5)  # no proxy
    try:
        conn.request("GET", route or ROUTE)
        response = conn.getresponse()
        body = response.read(4097)
        return {
            "status": response.status,
            "content_type": response.getheader("Content-Type"),
            "body": body.decode("utf-8", "backslashreplace"),
        }
    finally:
        conn.close()


def release_mode(spec: dict[str, Any], s: Steps, ctx: Any) -> None:
    timeout = spec["poll_timeout"]
    url, http = spec["url"], spec.get("http_url")
    sched: Any = None
    worker: Any = None
    adapters: list[Any] = []

    with s.step("create") as r:
        sched = MPSchedulerAdapter.create(ctx, config(spec, [url], [http] if http else None))
        adapters.append(sched)
        r["capabilities"] = sorted(c.value for c in sched.capabilities)
        r["servers"] = sched.servers
        r["check_lookup_result_wrapped"] = (
            sched.check_lookup_result != sched.target.check_lookup_result
        )
    if http:
        with s.step("lmc_version_raw") as r:
            r.update(raw_reply(http))
        with s.step("root_raw") as r:  # how a front end without /lmc_version proves what it is
            r.update(raw_reply(http, "/"))
    if sched is None:
        return
    caps = sched.capabilities
    with s.step("health") as r:
        r["value"] = sched.is_healthy()
        r["capability"] = Capability.MP_HEALTH_CHECK in caps
    with s.step("lookup_cold") as r:
        r.update(lookup_round_trip(sched, "cold-0", TOKENS, timeout))
    with s.step("round_trip") as r:
        times = [lookup_round_trip(sched, f"rt-{i}", TOKENS, timeout)["ms"] for i in range(20)]
        r["median_ms"] = round(statistics.median(times), 3)
        r["min_ms"] = min(times)
    with s.step("free_lookup_locks") as r:
        r["capability"] = Capability.MP_FREE_LOOKUP_LOCKS in caps
        r["value"] = sched.free_lookup_locks(TOKENS, 0, 256, "cold-0")
    with s.step("end_session") as r:
        r["capability"] = Capability.MP_END_SESSION in caps
        r["value"] = sched.end_session("cold-0")
    with s.step("report_block_allocations") as r:
        r["capability"] = Capability.MP_REPORT_BLOCK_ALLOCATIONS in caps
        records: list[Any] = []
        if r["capability"]:
            types = importlib.import_module("lmcache.v1.multiprocess.custom_types")
            records = [types.BlockAllocationRecord("cold-0", [0, 1], TOKENS[:32])]
        r["value"] = sched.report_block_allocations(records)
        # the server still answers in order after the fire-and-forget report
        r["then_lookup"] = lookup_round_trip(sched, "after-report", TOKENS, timeout)["hits"]
    with s.step("salt_refused_or_taken") as r:
        r["capability"] = Capability.MP_CACHE_SALT in caps
        r.update(lookup_round_trip(sched, "salt-0", TOKENS, timeout, cache_salt=SALT_A))
    with s.step("packed_bytes_argument") as r:
        r["capability"] = Capability.MP_PACKED_TOKEN_IDS in caps
        if r["capability"]:
            pack = pack_token_ids()
            r["packed_len"] = len(pack(TOKENS))
            r.update(lookup_round_trip(sched, "packed-0", pack(TOKENS), timeout))
        else:
            r.update(lookup_round_trip(sched, "packed-0", bytes(8), timeout))

    if spec.get("worker"):
        worker_steps(spec, s, ctx, sched, adapters)
    else:
        with s.step("worker_cpu") as r:
            worker = MPWorkerAdapter.create(ctx, config(spec, [url], None))
            adapters.append(worker)
            # the salt is the scheduler row's capability; the release's submits take it alike
            r["salt_capability"] = Capability.MP_CACHE_SALT in caps
            if not r["salt_capability"]:  # refused by the adapter before anything is sent
                op = worker.make_load_store_op(
                    list(range(32)), TOKENS, block_hashes=block_hashes(TOKENS)
                )
                try:
                    worker.submit_store_request("salted", op, None, cache_salt=SALT_A)
                    r["salted_submit"] = "submitted"
                except UnsupportedArgumentError as exc:
                    r["salted_submit"] = _error(exc)
            r["registering"] = True
            register(worker, kv_caches(0))  # raises on releases whose worker needs CUDA
            r["registered"] = True

    if spec.get("multi"):
        multi_server_steps(spec, s, ctx, adapters)
    elif Capability.MP_MULTI_SERVER not in caps:
        with s.step("several_servers") as r:
            two = [url, "tcp://127.0.0.1:9"]  # never contacted: refused before connecting
            MPSchedulerAdapter.create(ctx, config(spec, two, None, world_size=2))

    with s.step("reset_cache") as r:
        r["capability"] = Capability.MP_RESET_CACHE in caps
        r["value"] = sched.reset_cache()
    if spec.get("server_pgid"):
        stall_step(spec, s, ctx)
    with s.step("shutdown") as r:
        r["capability"] = Capability.MP_SCHEDULER_SHUTDOWN in caps
        for a in reversed(adapters):
            a.shutdown()


def worker_steps(
    spec: dict[str, Any], s: Steps, ctx: Any, sched: MPSchedulerAdapter, adapters: list[Any]
) -> None:
    timeout = spec["poll_timeout"]
    url = spec["url"]
    kv: dict[str, Any] = {}
    worker: Any = None
    with s.step("worker_roundtrip") as r:
        worker = MPWorkerAdapter.create(ctx, config(spec, [url], None))
        adapters.append(worker)
        kv = kv_caches(0)
        register(worker, kv)
        before = snapshot(kv)
        r["stored"] = store(worker, "store-plain", TOKENS, timeout)
        r["lookup"] = lookup_round_trip(sched, "look-plain", TOKENS, timeout, cleanup=False)
        r["retrieved"] = retrieve(worker, "look-plain", TOKENS, timeout)
        sched.cleanup_lookup_result("look-plain")
        r["bytes_equal"] = equal_to(kv, before)
        r["bytes_compared"] = sum(v[:, 32:64].numel() * v.element_size() for v in kv.values())
    if worker is None or not kv:
        return
    with s.step("salt_isolation") as r:
        r["unsalted_seen_under_a"] = lookup_round_trip(
            sched, "iso-0", TOKENS, timeout, cache_salt=SALT_A
        )["hits"]
        refill(kv, 1234)  # different bytes under salt A than the unsalted entry
        before = snapshot(kv)
        r["stored_a"] = store(worker, "store-a", TOKENS, timeout, cache_salt=SALT_A)
        r["hits_a"] = lookup_round_trip(
            sched, "look-a", TOKENS, timeout, cleanup=False, cache_salt=SALT_A
        )["hits"]
        r["hits_b"] = lookup_round_trip(sched, "look-b", TOKENS, timeout, cache_salt=SALT_B)["hits"]
        r["retrieved_a"] = retrieve(worker, "look-a", TOKENS, timeout, cache_salt=SALT_A)
        sched.cleanup_lookup_result("look-a")
        r["bytes_equal_a"] = equal_to(kv, before)
    if Capability.MP_PACKED_TOKEN_IDS in sched.capabilities:
        with s.step("packed_end_to_end") as r:
            packed = pack_token_ids()(TOKENS)
            # our adapter packs a list of ids with the release's own codec
            from_list = worker.make_load_store_op(list(range(32)), TOKENS)
            r["ours_pack_equals_codec"] = from_list.token_bytes == packed
            r["hits_list"] = lookup_round_trip(sched, "pk-list", TOKENS, timeout)["hits"]
            r["hits_bytes"] = lookup_round_trip(sched, "pk-bytes", packed, timeout, cleanup=False)[
                "hits"
            ]
            sched.free_lookup_locks(TOKENS, 0, 256, "pk-bytes", extra_ranges=[(256, 512)])
            sched.cleanup_lookup_result("pk-bytes")
            refill(kv, 99)
            before = snapshot(kv)
            op = worker.make_load_store_op(list(range(32)), packed, end=len(TOKENS))
            r["op_token_bytes_equal"] = op.token_bytes == packed
            worker.submit_store_request("pk-store", op, None, cache_salt="packed")
            poll(lambda: worker.get_finished({"pk-store"})[0], timeout)
            r["hits_packed_salt"] = lookup_round_trip(
                sched, "pk-look", packed, timeout, cleanup=False, cache_salt="packed"
            )["hits"]
            r["retrieved"] = retrieve(worker, "pk-look", TOKENS, timeout, cache_salt="packed")
            sched.cleanup_lookup_result("pk-look")
            r["bytes_equal"] = equal_to(kv, before)
    # last: on 0.4.6 and 0.4.7 a retrieve of keys the server never held leaves that worker's
    # later operations failing (measured), so nothing of the job may come after it
    failed_retrieve_steps(spec, s, ctx, sched, worker=worker, kv=kv)


#: Tokens never stored on any server (a lookup of them hits 0 blocks).
NEVER = list(range(100_001, 100_513))
#: Passes of get_finished + get_block_ids_with_load_errors watched after the finishing one.
AFTER_PASSES = 3


def _watch(get_finished: Any, load_errors: Any, request_id: str, timeout: float) -> dict[str, Any]:
    """Poll as vLLM does (get_finished, then get_block_ids_with_load_errors, each step): the
    pass that reports ``request_id`` finished, the ids on that pass, and any on later passes."""
    deadline = time.monotonic() + timeout
    passes = 0
    while time.monotonic() < deadline:
        passes += 1
        _, done = get_finished({request_id})
        errors = sorted(load_errors())
        if done and request_id in done:
            later = [sorted(load_errors()) for _ in range(AFTER_PASSES) if get_finished(set())]
            return {"finished_on_pass": passes, "ids": errors, "later_ids": later}
        if errors:
            return {"finished_on_pass": None, "ids": errors, "early": True}
        time.sleep(0.002)
    return {"finished_on_pass": None, "ids": [], "timed_out": True}


def failed_retrieve_steps(
    spec: dict[str, Any],
    s: Steps,
    ctx: Any,
    sched: MPSchedulerAdapter,
    *,
    worker: MPWorkerAdapter,
    kv: dict[str, Any],
) -> None:
    """Keys never stored (a lookup with 0 hits, then a retrieve): the release's own worker
    adapter and ours side by side, against the same server; then successes with ours."""
    timeout = spec["poll_timeout"]
    blocks = list(range(32, 64))
    with s.step("failed_retrieve_never_stored") as r:
        cls = worker_class()
        own = cls(
            **own_init_kwargs(
                cls, spec["url"], ctx, block_size=BLOCK, mq_timeout=spec["mq_timeout"]
            )
        )
        MPWorkerAdapter(own).register_kv_caches(kv, layout_hints={"kv_layout": "HND"})
        r["op_block_ids"] = blocks
        r["own_lookup_hits"] = lookup_round_trip(sched, "never-own", NEVER, timeout, cleanup=False)[
            "hits"
        ]
        own.submit_retrieve_request("never-own", worker.make_load_store_op(blocks, NEVER), None)
        r["own"] = _watch(
            own.get_finished, own.get_block_ids_with_load_errors, "never-own", timeout
        )
        sched.cleanup_lookup_result("never-own")
        with contextlib.suppress(Exception):
            own.shutdown()
        r["ours_lookup_hits"] = lookup_round_trip(
            sched, "never-ours", NEVER, timeout, cleanup=False
        )["hits"]
        worker.submit_retrieve_request("never-ours", worker.make_load_store_op(blocks, NEVER), None)
        r["ours"] = _watch(
            worker.get_finished, worker.get_block_ids_with_load_errors, "never-ours", timeout
        )
        sched.cleanup_lookup_result("never-ours")
    with s.step("successful_retrieves") as r:
        n = int(spec.get("successes", 0))
        false_ids: list[int] = []
        finished = 0
        t0 = time.perf_counter()
        for i in range(n):
            rid = f"ok-{i}"
            lookup_round_trip(sched, rid, TOKENS, timeout, cleanup=False)
            worker.submit_retrieve_request(rid, worker.make_load_store_op(blocks, TOKENS), None)
            got = _watch(worker.get_finished, worker.get_block_ids_with_load_errors, rid, timeout)
            finished += got["finished_on_pass"] is not None
            false_ids += got["ids"] + [b for later in got.get("later_ids", []) for b in later]
            sched.cleanup_lookup_result(rid)
        r.update(
            retrieves=n,
            finished=finished,
            false_failure_ids=len(false_ids),
            seconds=round(time.perf_counter() - t0, 2),
        )


def multi_server_steps(spec: dict[str, Any], s: Steps, ctx: Any, adapters: list[Any]) -> None:
    """Two servers, world size 2: each worker rank reaches its own server (its block of
    MPConfig.server_urls); the scheduler looks up on both and takes the minimum."""
    timeout = spec["poll_timeout"]
    urls = [spec["url"], spec["multi"]["url"]]
    http = [spec["http_url"], spec["multi"]["http_url"]]
    tokens = list(range(5001, 5513))
    with s.step("multi_server") as r:
        sched = MPSchedulerAdapter.create(ctx, config(spec, urls, http, model="m2", world_size=2))
        adapters.append(sched)
        r["scheduler_servers"] = sched.servers
        workers, kvs, befores = [], [], []
        for rank in (0, 1):
            cfg = config(spec, urls, http, model="m2", world_size=2, rank=rank)
            worker = MPWorkerAdapter.create(ctx, cfg)
            adapters.append(worker)
            r[f"rank{rank}_local_server_url"] = cfg.local_server_url()
            r[f"rank{rank}_servers"] = worker.servers
            kv = kv_caches(100 + rank)  # each rank its own bytes
            register(worker, kv)
            workers.append(worker)
            kvs.append(kv)
            befores.append(snapshot(kv))
        r["stored_rank0"] = store(workers[0], "m-store", tokens, timeout)
        r["hits_after_rank0_only"] = lookup_round_trip(sched, "m-look-0", tokens, timeout)["hits"]
        r["stored_rank1"] = store(workers[1], "m-store", tokens, timeout)
        r["hits_after_both"] = lookup_round_trip(sched, "m-look", tokens, timeout, cleanup=False)[
            "hits"
        ]
        for rank in (0, 1):
            r[f"retrieved_rank{rank}"] = retrieve(workers[rank], "m-look", tokens, timeout)
            r[f"bytes_equal_rank{rank}"] = equal_to(kvs[rank], befores[rank])
        sched.cleanup_lookup_result("m-look")


def stall_step(spec: dict[str, Any], s: Steps, ctx: Any) -> None:
    """The server stops answering (SIGSTOP to its process group) after the adapter was built:
    what does a lookup report? Bounded: the poll runs in a thread, the server is resumed
    (SIGCONT) after ``stall_seconds`` whatever happened."""
    pgid = int(spec["server_pgid"])
    bound = float(spec["stall_seconds"])
    with s.step("stall") as r:
        sched = MPSchedulerAdapter.create(ctx, config(spec, [spec["url"]], None))
        r["health_capability"] = Capability.MP_HEALTH_CHECK in sched.capabilities
        outcome: dict[str, Any] = {}

        def run() -> None:
            t0 = time.monotonic()
            try:
                kwargs: dict[str, Any] = {}
                if Capability.MP_LOOKUP_BY_TOKEN_IDS not in sched.capabilities:
                    kwargs["block_hashes"] = block_hashes(TOKENS)
                sched.lookup("stall-0", TOKENS, **kwargs)
                value, polls = poll(lambda: sched.check_lookup_result("stall-0"), bound, 0.01)
                outcome.update(value=value, polls=polls)
            except Exception as exc:
                outcome["error"] = _error(exc)
            outcome["seconds"] = round(time.monotonic() - t0, 3)

        os.killpg(pgid, signal.SIGSTOP)
        try:
            thread = threading.Thread(target=run, daemon=True)
            thread.start()
            thread.join(bound + 2.0)
            r["blocked"] = thread.is_alive()
            r["outcome_while_stopped"] = dict(outcome)
        finally:
            os.killpg(pgid, signal.SIGCONT)
        thread.join(spec["poll_timeout"])
        r["outcome_after_resume"] = dict(outcome)
        with contextlib.suppress(Exception):
            sched.cleanup_lookup_result("stall-0")
            sched.shutdown()


def own_adapter(spec: dict[str, Any], ctx: Any, url: str) -> Any:
    """The release's own LMCacheMPSchedulerAdapter, built with the keyword arguments our
    mp_init_kwargs maps (the construction is the same; every call below is the release's)."""
    from lmcache_compat.mp import mp_init_kwargs

    cls = scheduler_class()
    kwargs = mp_init_kwargs(
        cls, config(spec, [url], None), ctx, parallel_strategy_cls=parallel_strategy_class()
    )
    return cls(**kwargs)


def own_lookup_call(own: Any) -> Callable[[str], Any]:
    """The release's own lookup submit with what its signature takes (packing included)."""
    import inspect

    params = inspect.signature(own.maybe_submit_lookup_request).parameters
    if "packed_token_ids" in params:
        pack = pack_token_ids()
        return lambda rid: own.maybe_submit_lookup_request(rid, pack(TOKENS))
    return lambda rid: own.maybe_submit_lookup_request(rid, TOKENS)


def mixed_mode(spec: dict[str, Any], s: Steps, ctx: Any) -> None:
    """This release's adapters against a server of another release."""
    url, http = spec["url"], spec["http_url"]
    bound = spec["poll_timeout"]
    with s.step("ours_without_http_urls") as r:
        sched = MPSchedulerAdapter.create(ctx, config(spec, [url], None))
        r["created"] = True
        t0 = time.monotonic()
        try:
            r.update(lookup_round_trip(sched, "mix-0", TOKENS, bound))
        except MPServerError as exc:
            r["raised"] = _error(exc)
        r["after_s"] = round(time.monotonic() - t0, 3)
        r["is_healthy_after"] = sched.is_healthy()
        sched.shutdown()
    with s.step("own_adapter") as r:
        own = own_adapter(spec, ctx, url)
        submit = own_lookup_call(own)
        t0 = time.monotonic()
        submit("own-0")
        value, polls = poll(lambda: own.check_lookup_result("own-0"), bound, 0.01)
        r.update(value=value, polls=polls, after_s=round(time.monotonic() - t0, 3))
        r["is_healthy_after"] = bool(own.is_healthy)
        own.shutdown()
    with s.step("ours_with_http_urls") as r:
        t0 = time.monotonic()
        try:
            MPSchedulerAdapter.create(ctx, config(spec, [url], [http]))
            r["created"] = True
        except MPVersionMismatchError as exc:
            r["raised"] = _error(exc)
        r["after_s"] = round(time.monotonic() - t0, 3)
    with s.step("worker_with_http_urls") as r:
        try:
            MPWorkerAdapter.create(ctx, config(spec, [url], [http]))
            r["created"] = True
        except MPVersionMismatchError as exc:
            r["raised"] = _error(exc)
    with s.step("doctor") as r:
        proc = subprocess.run(
            [sys.executable, "-m", "lmcache_compat", "doctor", "--mp-server", http, "--json"],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        r["exit"] = proc.returncode
        report = json.loads(proc.stdout) if proc.stdout.startswith("{") else {}
        r["mp_servers"] = report.get("mp_servers")
        text = subprocess.run(
            [sys.executable, "-m", "lmcache_compat", "doctor", "--mp-server", http],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        ).stdout
        r["text_line"] = next((ln for ln in text.splitlines() if "MP server" in ln), None)


def bench_mode(spec: dict[str, Any], s: Steps, ctx: Any) -> None:
    """Lookup round trips (submit, then poll to a result, then clean up), ours and the
    release's own adapter alternating on one server; best and median per side. First misses
    (nothing stored), then hits (a CPU worker stored the tokens), where the server has a CPU
    transfer mode (``spec["worker"]``)."""
    url = spec["url"]
    n = int(spec.get("rounds", 200))
    ours = MPSchedulerAdapter.create(ctx, config(spec, [url], None))
    own = own_adapter(spec, ctx, url)
    submit = own_lookup_call(own)
    check, clean = own.check_lookup_result, own.cleanup_lookup_result
    ours_lookup, ours_check, ours_clean = (
        ours.lookup,
        ours.check_lookup_result,
        ours.cleanup_lookup_result,
    )
    sleep = time.sleep
    last: dict[str, Any] = {}

    def own_rt(rid: str) -> float:
        t0 = time.perf_counter()
        submit(rid)
        for _ in SPINS:  # bounded poll, the same on both sides
            result = check(rid)
            if result is not None:
                break
            sleep(POLL_S)  # yield the GIL to the release's I/O thread
        else:
            raise TimeoutError(rid)
        t = time.perf_counter() - t0
        clean(rid)
        last["own"] = result
        return t

    def ours_rt(rid: str) -> float:
        t0 = time.perf_counter()
        ours_lookup(rid, TOKENS)
        for _ in SPINS:
            result = ours_check(rid)
            if result is not None:
                break
            sleep(POLL_S)
        else:
            raise TimeoutError(rid)
        t = time.perf_counter() - t0
        ours_clean(rid)
        last["ours"] = result
        return t

    def measure(r: dict[str, Any], tag: str) -> None:
        for i in range(20):  # warm-up
            own_rt(f"w-own-{tag}-{i}")
            ours_rt(f"w-ours-{tag}-{i}")
        t_own: list[float] = []
        t_ours: list[float] = []
        for i in range(n):
            if i % 2:
                t_own.append(own_rt(f"own-{tag}-{i}"))
                t_ours.append(ours_rt(f"ours-{tag}-{i}"))
            else:
                t_ours.append(ours_rt(f"ours-{tag}-{i}"))
                t_own.append(own_rt(f"own-{tag}-{i}"))
        r["rounds"] = n
        r["hits_ours"], r["hits_own"] = last["ours"], last["own"]
        for name, ts in (("ours", t_ours), ("own", t_own)):
            r[f"{name}_median_us"] = round(statistics.median(ts) * 1e6, 1)
            r[f"{name}_min_us"] = round(min(ts) * 1e6, 1)
        r["ratio_median"] = round(statistics.median(t_ours) / statistics.median(t_own), 3)
        r["ratio_min"] = round(min(t_ours) / min(t_own), 3)

    with s.step("bench_miss") as r:
        measure(r, "miss")
    if spec.get("worker"):
        with s.step("bench_hit") as r:
            worker = MPWorkerAdapter.create(ctx, config(spec, [url], None))
            register(worker, kv_caches(0))
            r["stored"] = store(worker, "bench-store", TOKENS, spec["poll_timeout"])
            measure(r, "hit")
            worker.shutdown()
    ours.shutdown()
    own.shutdown()


def main() -> int:
    spec = json.loads(sys.argv[1])
    import faulthandler

    # a hang is reported with every thread's stack before the caller's timeout kills us
    faulthandler.dump_traceback_later(float(spec.get("hang_report_s", 240)), exit=True)
    out: dict[str, Any] = {
        "client_version": importlib.metadata.version("lmcache"),
        "mode": spec["mode"],
    }
    s = Steps()
    ctx = zmq.Context()
    t0 = time.monotonic()
    try:
        {"release": release_mode, "mixed": mixed_mode, "bench": bench_mode}[spec["mode"]](
            spec, s, ctx
        )
    except BaseException as exc:
        out["fatal"] = _error(exc)
        out["traceback"] = traceback.format_exc().splitlines()[-8:]
    out["steps"] = s.out
    out["total_s"] = round(time.monotonic() - t0, 2)
    print(json.dumps(out, default=repr), flush=True)
    # No ctx.destroy(): the releases' threads (heartbeats, transfer loops) may still hold
    # sockets, and zmq's term() would wait for them. Exit without waiting.
    os._exit(0)


if __name__ == "__main__":
    raise SystemExit(main())
