"""Drive ``lmcache_compat.vllm.LMCacheCompatConnector`` inside real vLLM 0.32.0 with a real
LMCache release, in a fresh process (``test_compat_connector.py`` runs one per release)::

    python -m tests.tiers.real.scheduler.compat_driver {full|lacking} TMP_DIR RESULT_JSON

``full`` (LMCache 0.5.6). Real: vLLM's ``Scheduler``, KV cache manager and
``KVConnectorFactory``; OUR connector in both roles, built by vLLM itself (scheduler role by
``Scheduler.__init__``, worker role by ``ensure_kv_transfer_initialized``, the call a GPU worker
makes); LMCache 0.5.6's ``LMCacheConnectorV1Impl`` behind each, with its lookup client, its
``build_connector_meta`` / ``start_load_kv`` / ``wait_for_save`` / ``record_failed_blocks`` /
``get_block_ids_with_load_errors`` / ``get_kv_events`` / ``shutdown``; vLLM's own worker-side
step (``KVConnectorModelRunnerMixin._get_kv_connector_output`` inside ``set_forward_context``),
which binds the metadata, starts the load, waits for the save and fills ``KVConnectorOutput``
(``invalid_block_ids`` from our ``get_block_ids_with_load_errors()``, ``kv_cache_events`` from
our ``get_kv_connector_kv_cache_events()``); ``KVOutputAggregator`` for the two-worker merge.
Injected, and nothing else:

* the lookup server's reply (``harness.inject_lmcache_lookup_hits``): LMCache "holds" the first
  48 tokens of request ``hit``;
* the worker's ``LMCacheEngine`` (``_FakeLMCacheEngine`` below, put where LMCacheManager keeps
  its engine): on CPU, LMCache 0.5.6 builds no engine ("No supported cpu connector found",
  degraded mode), so ``retrieve`` / ``store`` / ``lookup_unpin`` / ``get_kv_events`` are
  stand-ins. ``retrieve`` returns a mask in which the second 16-token chunk is missing (as if it
  was evicted between lookup and load), so LMCache's real ``start_load_kv`` sees fewer tokens
  than expected and its real ``record_failed_blocks`` turns the slot mapping vLLM's scheduler
  built into the failed block id; ``store`` records ``CacheStoreEvent`` objects (LMCache's own
  class, one per 16-token chunk, byte hashes) the way LMCacheEngine does with KV events on;
* the model's sampled tokens (``harness.make_model_runner_output``: a constant token);
* one ``CacheRemoveEvent`` (LMCache 0.5.6's class) in the two-worker merge: 0.5.6 emits those
  from its multi-process adapter, not from the engine path driven here;
* the KV event publisher: ``scheduler.kv_event_publisher`` (vLLM's ``NullEventPublisher``
  here) is replaced by a recorder, so what the scheduler publishes can be read back.

``lacking`` (LMCache 0.3.9: imports beside vLLM 0.32.0, lacks ``load_error_reporting``,
``shutdown`` and ``kv_events``). Scheduler role only: the worker role of 0.3.9 does not construct
on a machine without GPUs (the driver records the error). Our connector's worker-side methods
(``get_block_ids_with_load_errors``, ``get_kv_connector_kv_cache_events``) are called on the
scheduler-role instance: the adapter decides them from the impl's class, the same for both roles.
vLLM's own ``LMCacheConnectorV1`` is driven the same way, as the contrast. Last, our connector
with ``use_native=True`` over vLLM's vendored copy of the adapter (which has a
``bind_connector_metadata`` hook, unlike LMCache's own 0.3.9 / 0.5.6 impls).

Results go to RESULT_JSON; vLLM and LMCache log to stdout/stderr.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import pickle
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from tests.tiers.real.scheduler import harness as h

OURS = "LMCacheCompatConnector"
OURS_MODULE = "lmcache_compat.vllm"
VLLMS = "LMCacheConnectorV1"
COMPAT_LOGGER = "lmcache_compat.vllm"
#: The connector's start-up configuration check (lmcache_compat/vllm/startup_config.py).
CONFIG_LOGGER = "lmcache_compat.config"
PROMPT_TOKENS = 64
STORED_TOKENS = 48  # three 16-token blocks (and LMCache chunks) held "externally"
FAILED_CHUNK = 1  # the second of them goes missing between lookup and load
MAX_STEPS = 12
EXTRA = {"lmcache.chunk_size": h.BLOCK_SIZE}

START = time.perf_counter()


class _Publisher:
    """Stands in for the scheduler's ``kv_event_publisher``: records every published batch."""

    def __init__(self) -> None:
        self.batches: list[Any] = []
        self.shut_down = False

    def publish(self, batch: Any) -> None:
        self.batches.append(batch)

    def shutdown(self) -> None:
        self.shut_down = True

    def events(self) -> list[Any]:
        return [event for batch in self.batches for event in batch.events]


class _FakeLMCacheEngine:
    """INJECTED stand-in for LMCache's worker-side ``LMCacheEngine`` (none exists on CPU).

    ``retrieve`` reports the chunks of the requested range as loaded except chunk
    ``fail_chunk`` of the request named ``fail_request`` (once); ``store`` records one
    ``CacheStoreEvent`` per stored chunk; ``get_kv_events`` hands them over and forgets them,
    like ``LMCacheEngine.get_kv_events`` does.
    """

    def __init__(self, chunk: int, fail_request: str, fail_chunk: int) -> None:
        from lmcache.utils import CacheStoreEvent

        self._event_cls = CacheStoreEvent
        self.chunk = chunk
        self.fail_request: str | None = fail_request
        self.fail_chunk = fail_chunk
        self.retrieves: list[dict[str, Any]] = []
        self.stores: list[dict[str, Any]] = []
        self.unpins: list[str] = []
        self.kv_events: list[Any] = []
        self.stored_hashes: list[bytes] = []

    def retrieve(self, tokens: Any, mask: Any = None, **kwargs: Any) -> Any:
        import torch

        n = len(tokens)
        ret = torch.ones(n, dtype=torch.bool) if mask is None else mask.clone().to(torch.bool)
        req_id = kwargs.get("req_id")
        failed: list[int] = []
        if req_id == self.fail_request:
            lo, hi = self.fail_chunk * self.chunk, min((self.fail_chunk + 1) * self.chunk, n)
            ret[lo:hi] = False
            failed = [lo, hi]
            self.fail_request = None
        self.retrieves.append(
            {"req_id": req_id, "tokens": n, "returned": int(ret.sum().item()), "failed": failed}
        )
        return ret

    def lookup_unpin(self, req_id: Any) -> None:
        self.unpins.append(str(req_id))

    def store(self, tokens: Any, mask: Any = None, **kwargs: Any) -> None:
        token_list = [int(t) for t in tokens]
        keep = [bool(m) for m in mask] if mask is not None else [True] * len(token_list)
        prev: bytes | None = None
        stored = 0
        for start in range(0, len(token_list), self.chunk):
            piece = token_list[start : start + self.chunk]
            digest = hashlib.blake2b(
                (prev or b"") + json.dumps(piece).encode(), digest_size=8
            ).digest()
            if all(keep[start : start + len(piece)]):
                self.kv_events.append(
                    self._event_cls(
                        block_hashes=[digest],
                        parent_block_hash=prev,
                        token_ids=piece,
                        block_size=len(piece),
                        lora_id=None,
                        medium="cpu",
                        lora_name=None,
                    )
                )
                self.stored_hashes.append(digest)
                stored += len(piece)
            prev = digest
        self.stores.append({"req_id": kwargs.get("req_id"), "tokens": stored})

    def get_kv_events(self) -> list[Any]:
        events, self.kv_events = self.kv_events, []
        return events


def _status(request: Any) -> str:
    return str(request.status.name)


def _describe_event(event: Any) -> dict[str, Any]:
    fields = {
        name: getattr(event, name)
        for name in ("block_hashes", "parent_block_hash", "medium", "lora_name", "block_size")
        if hasattr(event, name)
    }
    return {
        "type": type(event).__name__,
        "hash_types": sorted({type(x).__name__ for x in fields.get("block_hashes", [])}),
        "block_hashes": [x.hex() if isinstance(x, bytes) else x for x in fields["block_hashes"]],
        "medium": fields.get("medium"),
        "lora_name": fields.get("lora_name"),
        "block_size": fields.get("block_size"),
    }


def _init_worker_process(config: Any, tmp: Path) -> None:
    config.cache_config.kv_cache_layout = "NHD"
    h.init_worker_process(config, tmp)


def record_short_retrieve(impl: Any, external_block_ids: list[int]) -> set[int]:
    """What the release's ``start_load_kv`` does after a short ``retrieve`` (chunk
    ``FAILED_CHUNK`` of the 48 expected tokens missing): its real ``record_failed_blocks`` over
    the slot mapping the scheduler's blocks imply, then ``_invalid_block_ids.update``."""
    import torch

    expected = torch.ones(STORED_TOKENS, dtype=torch.bool)
    returned = expected.clone()
    lo = FAILED_CHUNK * h.BLOCK_SIZE
    returned[lo : lo + h.BLOCK_SIZE] = False
    slots = torch.tensor(
        [b * h.BLOCK_SIZE + i for b in external_block_ids for i in range(h.BLOCK_SIZE)],
        dtype=torch.long,
    )
    missing: set[int] = impl.record_failed_blocks("hit", expected, returned, slots)
    impl._invalid_block_ids.update(missing)
    return missing


def _worker_step(config: Any, scheduler_output: Any) -> Any:
    """vLLM's own worker-side connector step for ``scheduler_output`` (no model runs): the
    metadata crosses a process boundary in vLLM, so it is pickled here too."""
    from vllm.forward_context import set_forward_context
    from vllm.v1.worker.kv_connector_model_runner_mixin import KVConnectorModelRunnerMixin

    scheduler_output.kv_connector_metadata = pickle.loads(
        pickle.dumps(scheduler_output.kv_connector_metadata)
    )
    layers = [f"model.layers.{i}.self_attn.attn" for i in range(2)]
    attn_metadata = dict.fromkeys(layers, object())  # any non-None metadata: a forward ran
    with (
        set_forward_context(attn_metadata, config),
        KVConnectorModelRunnerMixin._get_kv_connector_output(scheduler_output) as kv_output,
    ):
        pass  # the model's forward pass would run here
    return kv_output


def _feed(scheduler: Any, scheduler_output: Any, kv_output: Any) -> dict[int, Any]:
    """The worker's ``ModelRunnerOutput``: sampled tokens from the harness, the connector part
    exactly as vLLM's worker step filled it."""
    output = h.make_model_runner_output(scheduler, scheduler_output)
    output.kv_connector_output = kv_output
    result: dict[int, Any] = scheduler.update_from_output(scheduler_output, output)
    return result


def lmcache_impl_class() -> type:
    """The release's ``LMCacheConnectorV1Impl``, wherever it defines it (0.5.7rc2 moved it
    under ``lmcache.inprocess``): found with ``lmcache_compat.upstream.resolve``, never by path."""
    from lmcache_compat.upstream import locations as loc
    from lmcache_compat.upstream.resolve import find

    cls: type = find(loc.CONNECTOR_IMPL)
    return cls


def lmcache_loggers() -> tuple[str, str]:
    """The loggers of the release's impl and of its ``LMCacheManager`` (LMCache names its
    loggers after their modules, which 0.5.7rc2 moved)."""
    import sys

    impl_module = lmcache_impl_class().__module__
    manager = getattr(sys.modules[impl_module], "LMCacheManager", None)
    manager_module = manager.__module__ if manager is not None else "lmcache.v1.manager"
    return impl_module, manager_module


def _capture_lmcache_shutdown() -> Any:
    from contextlib import ExitStack

    adapter_logger, manager_logger = lmcache_loggers()
    stack = ExitStack()
    adapter = stack.enter_context(h.capture_logs(adapter_logger))
    manager = stack.enter_context(h.capture_logs(manager_logger))
    return stack, adapter, manager


def _shutdown_logs(adapter_logs: Any, manager_logs: Any) -> dict[str, int]:
    return {
        "connector_shutdown": len(adapter_logs.matching("Starting LMCacheConnector shutdown")),
        "manager_stopping": len(manager_logs.matching("Stopping LMCacheManager services")),
    }


# --- full: LMCache 0.5.6 -------------------------------------------------------------------------


def run_policy(
    tmp: Path, policy: str | None, worker_config: Any, engine: Any, *, merge: bool = False
) -> dict[str, Any]:
    from vllm.distributed.kv_transfer import get_kv_transfer_group

    timings: dict[str, float] = {}
    result: dict[str, Any] = {"requested_policy": policy, "timings": timings}
    config = h.make_vllm_config(
        tmp / (policy or "default"),
        OURS,
        OURS_MODULE,
        kv_load_failure_policy=policy,
        extra_config=EXTRA,
    )
    result["effective_policy"] = config.kv_transfer_config.kv_load_failure_policy
    with (
        h.capture_logs(COMPAT_LOGGER) as compat_logs,
        h.capture_logs(CONFIG_LOGGER) as config_logs,
        h.timed(timings, "scheduler"),
    ):
        scheduler = h.make_scheduler(config, num_blocks=64)
    connector = scheduler.connector
    result["scheduler_role"] = {
        "connector": f"{type(connector).__module__}.{type(connector).__qualname__}",
        "impl": f"{type(h.lmcache_impl(scheduler)).__module__}."
        f"{type(h.lmcache_impl(scheduler)).__qualname__}",
        "compat_warnings": list(compat_logs.messages),
        "config_check": list(config_logs.messages),
    }
    publisher = _Publisher()
    scheduler.kv_event_publisher = publisher  # INJECTED observation point (see module doc)
    # INJECTED: LMCache "holds" the first 48 tokens of "hit" and nothing of "miss".
    result["injection_point"] = h.inject_lmcache_lookup_hits(scheduler, {"hit": STORED_TOKENS})
    engine.fail_request = "hit"

    hit = h.make_request("hit", PROMPT_TOKENS)
    miss = h.make_request("miss", PROMPT_TOKENS)
    scheduler.add_request(hit)
    scheduler.add_request(miss)
    out1 = scheduler.schedule()
    hit_blocks = h.request_block_ids(scheduler, "hit")
    external = hit_blocks[: STORED_TOKENS // h.BLOCK_SIZE]
    result["step1"] = {
        "num_scheduled_tokens": dict(out1.num_scheduled_tokens),
        "hit_block_ids": hit_blocks,
        "external_block_ids": external,
        "connector_metadata": type(out1.kv_connector_metadata).__qualname__,
    }
    worker = get_kv_transfer_group()
    retrieves_before = len(engine.retrieves)
    with h.timed(timings, "worker_step_1"):
        kv_output = _worker_step(worker_config, out1)
    result["worker_step1"] = {
        "worker_connector": type(worker).__qualname__,
        "retrieves": engine.retrieves[retrieves_before:],
        "invalid_block_ids": sorted(kv_output.invalid_block_ids),
        "kv_cache_events": type(kv_output.kv_cache_events).__name__,
        "finished_sending": kv_output.finished_sending,
        "finished_recving": kv_output.finished_recving,
    }
    with h.capture_logs() as logs:
        outputs = _feed(scheduler, out1, kv_output)
    result["after_failure"] = {
        "hit_status": _status(hit),
        "hit_num_computed_tokens": hit.num_computed_tokens,
        "hit_in_running": any(r.request_id == "hit" for r in scheduler.running),
        "finish_reasons": h.finish_reasons(outputs),
        "recovered_logs": logs.matching("Recovered from KV load failure"),
        "failing_logs": logs.matching("due to KV load failure"),
        "published": [_describe_event(e) for e in publisher.events()],
    }
    steps: list[dict[str, int]] = []
    for _ in range(MAX_STEPS):
        if not scheduler.requests:
            break
        out = scheduler.schedule()
        steps.append(dict(out.num_scheduled_tokens))
        _feed(scheduler, out, _worker_step(worker_config, out))
    result["later_steps"] = steps
    result["final"] = {"hit": _status(hit), "miss": _status(miss)}
    result["hit_output_tokens"] = list(hit.output_token_ids)
    events = publisher.events()
    result["published_total"] = len(events)
    result["published_types"] = sorted({type(e).__name__ for e in events})
    result["published_hashes"] = sorted(
        h_.hex() for e in events for h_ in e.block_hashes if isinstance(h_, bytes)
    )
    if merge:
        with h.timed(timings, "two_worker_merge"):
            result["two_worker_merge"] = two_worker_merge(scheduler, engine)

    # (c) shutdown reaches the engine, through vLLM's own Scheduler.shutdown(); a second call
    # does nothing. Done before the next scheduler exists: LMCache 0.5.6's lookup client
    # terminates the process-wide zmq.Context.instance() on close, which blocks while another
    # scheduler's lookup socket is open (one scheduler per process in a real deployment).
    stack, adapter_logs, manager_logs = _capture_lmcache_shutdown()
    with stack, h.timed(timings, "shutdown_twice"):
        scheduler.shutdown()
        scheduler.shutdown()
    result["shutdown"] = _shutdown_logs(adapter_logs, manager_logs)
    result["publisher_shut_down"] = publisher.shut_down
    return result


def _encode_roundtrip(events: list[Any]) -> dict[str, Any]:
    """Serialise a batch the way vLLM's ZMQ publisher does (msgspec msgpack) and read it back."""
    import importlib

    from vllm.distributed.kv_events import KVEventBatch

    msgpack: Any = importlib.import_module("msgspec.msgpack")  # vLLM's serialiser (untyped here)

    batch = KVEventBatch(ts=0.0, events=events)
    decoded = msgpack.decode(msgpack.encode(batch), type=KVEventBatch)
    return {"encoded_events": len(decoded.events), "equal": decoded.events == events}


def two_worker_merge(scheduler: Any, engine: Any) -> dict[str, Any]:
    """Two workers' event containers merged by vLLM's ``KVOutputAggregator``, then collected by
    our scheduler-side connector: only events both workers reported are published."""
    from lmcache.utils import CacheRemoveEvent, CacheStoreEvent
    from vllm.distributed.kv_transfer import get_kv_transfer_group
    from vllm.distributed.kv_transfer.kv_connector.utils import KVOutputAggregator
    from vllm.v1.outputs import KVConnectorOutput, ModelRunnerOutput

    worker = get_kv_transfer_group()
    common = CacheStoreEvent(
        block_hashes=[b"\x01" * 8],
        parent_block_hash=None,
        token_ids=list(range(16)),
        block_size=16,
        lora_id=None,
        medium="cpu",
        lora_name=None,
    )
    removed = CacheRemoveEvent(block_hashes=[b"\x02" * 8], medium="cpu")  # INJECTED (doc)
    only_rank0 = CacheStoreEvent(
        block_hashes=[7],
        parent_block_hash=None,
        token_ids=list(range(16, 32)),
        block_size=16,
        lora_id=None,
        medium="cpu",
        lora_name=None,
    )
    outputs = []
    for rank_events in ([common, removed, only_rank0], [common, removed]):
        engine.kv_events = list(rank_events)
        events = worker.get_kv_connector_kv_cache_events()
        outputs.append(
            ModelRunnerOutput.with_kv_conn_output_only(KVConnectorOutput(kv_cache_events=events))
        )
    merged = KVOutputAggregator(expected_finished_count=2).aggregate(outputs)
    merged_events = merged.kv_connector_output.kv_cache_events
    result: dict[str, Any] = {
        "container": type(merged_events).__name__,
        "merged_workers": merged_events.get_number_of_workers(),
        "merged_events": len(merged_events.get_all_events()),
    }
    scheduler.connector.update_connector_output(merged.kv_connector_output)
    taken = list(scheduler.connector.take_events())
    result["published"] = [_describe_event(e) for e in taken]
    result["taken_again"] = len(list(scheduler.connector.take_events()))
    result["roundtrip"] = _encode_roundtrip(taken)
    return result


def vllm_connector_shutdown(tmp: Path) -> dict[str, Any]:
    """Contrast: vLLM's in-tree connector's shutdown never reaches LMCache (where it can be
    built at all: it imports LMCache's adapter by its pre-0.5.7rc2 path)."""
    config = h.make_vllm_config(tmp / "vllm-own", VLLMS, extra_config=EXTRA)
    try:
        scheduler = h.make_scheduler(config, num_blocks=64)
    except Exception as exc:
        return {"connector": None, "error": f"{type(exc).__name__}: {exc}"}
    stack, adapter_logs, manager_logs = _capture_lmcache_shutdown()
    with stack:
        scheduler.shutdown()
    return {"connector": type(scheduler.connector).__qualname__} | _shutdown_logs(
        adapter_logs, manager_logs
    )


def run_full(tmp: Path, report: dict[str, Any]) -> None:
    from vllm.config import set_current_vllm_config
    from vllm.distributed.kv_transfer import (
        ensure_kv_transfer_initialized,
        ensure_kv_transfer_shutdown,
        get_kv_transfer_group,
    )
    from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory

    from lmcache_compat.vllm import CONNECTOR_NAME, register
    from lmcache_compat.vllm.facts import vllm_facts

    timings: dict[str, float] = report["timings"]
    register()
    register()  # idempotent: vLLM may load general plugins more than once
    registered = KVConnectorFactory.get_connector_class_by_name(CONNECTOR_NAME)
    report["registered"] = f"{registered.__module__}.{registered.__qualname__}"
    report["vllm_facts"] = {
        k: v for k, v in dataclasses.asdict(vllm_facts()).items() if not isinstance(v, type)
    }
    with h.timed(timings, "worker_connector"):
        worker_config = h.make_vllm_config(tmp / "worker", OURS, OURS_MODULE, extra_config=EXTRA)
        _init_worker_process(worker_config, tmp)
        kv_cache_config = h.make_kv_cache_config(worker_config, num_blocks=64)
        with (
            set_current_vllm_config(worker_config),
            h.capture_logs(COMPAT_LOGGER) as compat_logs,
            h.capture_logs(CONFIG_LOGGER) as config_logs,
        ):
            ensure_kv_transfer_initialized(worker_config, kv_cache_config)
        worker = get_kv_transfer_group()
        impl = worker._lmcache_engine
        report["worker_role"] = {
            "connector": f"{type(worker).__module__}.{type(worker).__qualname__}",
            "impl": f"{type(impl).__module__}.{type(impl).__qualname__}",
            "real_engine_is_none": impl.lmcache_engine is None,  # degraded mode on CPU
            "compat_warnings": list(compat_logs.messages),
            "config_check": list(config_logs.messages),
            "capabilities": [c.value for c in worker.compat_adapter.capabilities],
            "bind_target": _callable_name(worker._plan.bind_engine),
        }
        import torch

        shape = (2, 64, h.BLOCK_SIZE, 2, 16)  # (K/V, blocks, block size, kv heads, head size)
        worker.register_kv_caches(
            {
                f"model.layers.{i}.self_attn.attn": torch.zeros(shape, dtype=torch.float16)
                for i in range(2)
            }
        )
        report["worker_role"]["kv_caches_registered"] = len(impl.kv_caches)
        # INJECTED: the worker's LMCacheEngine (see module doc), after the KV caches were
        # registered (LMCache's post_init skips a manager whose engine failed to build).
        engine = _FakeLMCacheEngine(h.BLOCK_SIZE, "hit", FAILED_CHUNK)
        impl._manager._lmcache_engine = engine

    policies = ("recompute", "fail", None)
    report["runs"] = [run_policy(tmp, p, worker_config, engine, merge=p is None) for p in policies]
    report["engine"] = {"stores": engine.stores, "unpins": sorted(set(engine.unpins))}

    # (c) the worker role's shutdown, through vLLM's own ensure_kv_transfer_shutdown().
    worker = get_kv_transfer_group()
    stack, adapter_logs, manager_logs = _capture_lmcache_shutdown()
    with stack:
        ensure_kv_transfer_shutdown()
        worker.shutdown()  # a second call does nothing
    report["worker_shutdown"] = _shutdown_logs(adapter_logs, manager_logs)
    report["vllm_connector_shutdown"] = vllm_connector_shutdown(tmp)


# --- lacking: LMCache 0.3.9 ----------------------------------------------------------------------


def drive_lacking(tmp: Path, name: str, module: str | None) -> dict[str, Any]:
    """Scheduler-side flow with hits, calling the worker-side per-step methods each step."""
    config = h.make_vllm_config(tmp / name, name, module, extra_config=EXTRA)
    with h.capture_logs(COMPAT_LOGGER) as compat_logs:
        scheduler = h.make_scheduler(config, num_blocks=64)
    connector = scheduler.connector
    publisher = _Publisher()
    scheduler.kv_event_publisher = publisher  # INJECTED observation point
    result: dict[str, Any] = {
        "connector": f"{type(connector).__module__}.{type(connector).__qualname__}",
        "compat_warnings": list(compat_logs.messages),
        "injection_point": h.inject_lmcache_lookup_hits(scheduler, {"hit": STORED_TOKENS}),
    }
    from vllm.v1.outputs import KVConnectorOutput

    scheduler.add_request(h.make_request("hit", PROMPT_TOKENS))
    scheduler.add_request(h.make_request("miss", PROMPT_TOKENS))
    steps: list[dict[str, Any]] = []
    for _ in range(MAX_STEPS):
        if not scheduler.requests:
            break
        out = scheduler.schedule()
        step: dict[str, Any] = {"scheduled": dict(out.num_scheduled_tokens)}
        invalid = connector.get_block_ids_with_load_errors()
        step["invalid_block_ids"] = {"type": type(invalid).__name__, "value": sorted(invalid)}
        try:
            events = connector.get_kv_connector_kv_cache_events()
            step["kv_cache_events"] = repr(events)
        except Exception as exc:  # vLLM's own connector: AttributeError every step
            events = None
            step["kv_cache_events_error"] = f"{type(exc).__name__}: {exc}"
        step["get_finished"] = repr(connector.get_finished(set()))
        output = h.make_model_runner_output(scheduler, out, invalid)
        output.kv_connector_output = KVConnectorOutput(
            invalid_block_ids=invalid, kv_cache_events=events
        )
        scheduler.update_from_output(out, output)
        steps.append(step)
    result["steps"] = steps
    result["published"] = len(publisher.events())
    try:
        connector.shutdown()
        result["shutdown"] = "ok"
    except Exception as exc:
        result["shutdown"] = f"{type(exc).__name__}: {exc}"
    result["taken_events"] = repr(list(connector.take_events()))
    scheduler.shutdown()
    return result


def _callable_name(fn: Any) -> str:
    return str(getattr(fn, "__qualname__", type(fn).__qualname__))


def drive_native(tmp: Path) -> dict[str, Any]:
    """``use_native=True``: our connector over vLLM's vendored copy of LMCache's adapter
    (imports with LMCache 0.3.9 ... 0.3.12). Scheduler role; one empty step provides connector
    metadata to bind (no request: without a lookup server each lookup waits out its timeout)."""
    config = h.make_vllm_config(
        tmp / "native", OURS, OURS_MODULE, extra_config={**EXTRA, "use_native": True}
    )
    with h.capture_logs(COMPAT_LOGGER) as compat_logs:
        scheduler = h.make_scheduler(config, num_blocks=64)
    connector = scheduler.connector
    impl = h.lmcache_impl(scheduler)
    result: dict[str, Any] = {
        "connector": f"{type(connector).__module__}.{type(connector).__qualname__}",
        "impl": f"{type(impl).__module__}.{type(impl).__qualname__}",
        "compat_warnings": list(compat_logs.messages),
        "capabilities": [c.value for c in connector.compat_adapter.capabilities],
        "bind_target": _callable_name(connector._plan.bind_engine),
    }
    out = scheduler.schedule()
    result["metadata"] = type(out.kv_connector_metadata).__qualname__
    # bind_connector_metadata reaches the vendored impl's own hook, which resets its layerwise
    # state (set to stale values here first).
    impl.current_layer, impl.layerwise_storers = 7, ["stale"]
    connector.bind_connector_metadata(out.kv_connector_metadata)
    result["after_bind"] = {
        "current_layer": impl.current_layer,
        "layerwise_storers": impl.layerwise_storers,
    }
    result["invalid_block_ids"] = sorted(connector.get_block_ids_with_load_errors())
    result["kv_cache_events"] = repr(connector.get_kv_connector_kv_cache_events())
    scheduler.shutdown()
    return result


def run_lacking(tmp: Path, report: dict[str, Any]) -> None:
    from vllm.config import set_current_vllm_config
    from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory
    from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorRole

    report["ours"] = drive_lacking(tmp, OURS, OURS_MODULE)
    report["vllm_own"] = drive_lacking(tmp, VLLMS, None)
    report["native"] = drive_native(tmp)
    ours = report["ours"]
    worker_config = h.make_vllm_config(tmp / "worker", OURS, OURS_MODULE, extra_config=EXTRA)
    _init_worker_process(worker_config, tmp)
    with set_current_vllm_config(worker_config):
        try:
            KVConnectorFactory.create_connector(
                worker_config,
                KVConnectorRole.WORKER,
                h.make_kv_cache_config(worker_config, num_blocks=64),
            )
            ours["worker_role"] = "constructed"
        except Exception as exc:  # no GPU: 0.3.9's engine init divides by the GPU count
            ours["worker_role"] = f"{type(exc).__name__}: {exc}"


def run_driver(
    argv: list[str],
    runs: Mapping[str, Callable[[Path, dict[str, Any]], None]],
    describe: Callable[[dict[str, Any]], None] | None = None,
) -> int:
    """The child-process entry point both vLLM tiers share: ``MODE TMP RESULT_JSON``. Records
    what is imported and from where, runs ``runs[MODE]``, writes the JSON report."""
    mode, tmp, result_path = argv[0], Path(argv[1]), Path(argv[2])
    if mode not in runs:
        raise SystemExit(f"unknown mode {mode!r}")
    timings: dict[str, float] = {}
    report: dict[str, Any] = {"mode": mode, "timings": timings}
    import lmcache_compat

    report["import_lmcache_compat_imports_vllm"] = "vllm" in sys.modules
    with h.timed(timings, "import_vllm_and_lmcache"):
        from importlib.metadata import version

        import lmcache
        import vllm  # noqa: F401

        import lmcache_compat.vllm.connector

        impl_cls = lmcache_impl_class()

    report["vllm"] = version("vllm")
    report["torch"] = version("torch")
    report["lmcache"] = version("lmcache")
    report["lmcache_file"] = lmcache.__file__
    report["impl"] = f"{impl_cls.__module__}.{impl_cls.__qualname__}"
    report["lmcache_loggers"] = list(lmcache_loggers())
    report["compat_file"] = lmcache_compat.vllm.connector.__file__
    if describe is not None:
        describe(report)
    with h.timed(timings, "run"):
        runs[mode](tmp, report)
    timings["total_in_process"] = round(time.perf_counter() - START, 3)
    result_path.write_text(json.dumps(report, indent=2, sort_keys=True, default=repr))
    return 0


def main(argv: list[str]) -> int:
    # "full" runs with LMCache 0.5.6 and with 0.5.7rc2 (the tests name the modes after them)
    runs = {"full-0.5.6": run_full, "full-0.5.7rc2": run_full, "lacking": run_lacking}
    return run_driver(argv, runs)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
