"""Drive ``lmcache_compat.vllm.LMCacheCompatConnector`` inside real vLLM 0.11.0 with one real
LMCache release, in a fresh process (``test_vllm011_connector.py`` runs one per release)::

    python -m tests.tiers.real_vllm011.driver {full|post1|lacking} TMP_DIR RESULT_JSON

vLLM 0.11.0 is the oldest vLLM the connector supports and takes branches vLLM 0.32.0 never
does: ``KVConnectorBase_V1.__init__(vllm_config, role)`` (no ``kv_cache_config``), no connector
KV-event path (``get_kv_connector_kv_cache_events`` came in 0.13.0), ``BlockStored`` without
``lora_name``, and no KV-load-failure handling at all (``KVConnectorOutput.invalid_block_ids``
and the scheduler's recovery came in 0.11.2). Every mode first records those facts about the
installed vLLM (``vllm_side``) and the connector's own reading of them (``vllm_facts``).

``full`` (LMCache 0.5.6). Real: vLLM 0.11.0's ``Scheduler``, KV cache manager,
``KVConnectorFactory`` (which builds OUR connector in both roles, with two arguments) and its
worker-side connector step (``KVConnectorModelRunnerMixin._get_kv_connector_output``); LMCache
0.5.6's ``LMCacheConnectorV1Impl`` behind our connector, with its lookup client,
``start_load_kv`` / ``record_failed_blocks`` / ``get_block_ids_with_load_errors`` / ``shutdown``;
LMCache 0.5.6's ``CacheStoreEvent`` / ``CacheRemoveEvent`` classes. Injected:

* the lookup server's reply (``harness.inject_lmcache_lookup_hits``): LMCache "holds" the first
  48 tokens of request ``hit``;
* the worker's ``LMCacheEngine`` (``compat_driver._FakeLMCacheEngine``, none exists on CPU): its
  ``retrieve`` misses the second 16-token chunk of ``hit``, so LMCache's real ``start_load_kv``
  and ``record_failed_blocks`` record the second external block as failed; its ``store`` keeps
  ``CacheStoreEvent`` objects the way ``LMCacheEngine`` does with ``enable_kv_events``;
* the model's sampled tokens (``harness.make_model_runner_output``);
* the events handed to ``_EventConverter`` (called directly: on vLLM 0.11.0 the connector never
  builds one, so this is the only way the ``lora_name``-less ``BlockStored`` target is reached).

``post1`` (LMCache 0.3.9.post1, the first release with ``get_block_ids_with_load_errors``).
Scheduler role only (0.3.9.x's worker role needs a GPU; the driver records the error). Real as
above, except that no worker step runs: the two lines of 0.3.9.post1's ``start_load_kv`` that
record a short retrieve (``record_failed_blocks`` on the slot mapping, then
``_invalid_block_ids.update``) are run by hand with the real method on the scheduler-role impl,
so the failed block id again comes from OUR connector's ``get_block_ids_with_load_errors()``.

``lacking`` (LMCache 0.3.9: no ``get_block_ids_with_load_errors``, ``shutdown`` or
``get_kv_events``). Scheduler role of our connector and, as the contrast, of vLLM's own
``LMCacheConnectorV1``, stepped to completion with our worker-side per-step methods called on
the scheduler-role instance (the adapter decides them from the impl's class, the same in both
roles). Last, ``use_native=True``, which needs a vendored copy vLLM 0.11.0 does not ship.

Results go to RESULT_JSON; vLLM and LMCache log to stdout/stderr.
"""

from __future__ import annotations

import dataclasses
import inspect
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from tests.tiers.grid.scenario import LAYERS, worker_step
from tests.tiers.real.scheduler import harness as h

# the scenario's constants are shared with the vLLM 0.32.0 driver
from tests.tiers.real.scheduler.compat_driver import (
    COMPAT_LOGGER,
    EXTRA,
    FAILED_CHUNK,
    MAX_STEPS,
    OURS,
    OURS_MODULE,
    PROMPT_TOKENS,
    STORED_TOKENS,
    VLLMS,
    lmcache_loggers,
    record_short_retrieve,
    run_driver,
)
from tests.tiers.real_vllm011 import helpers as v11

START = time.perf_counter()


def _qualname(obj: Any) -> str:
    cls = obj if isinstance(obj, type) else type(obj)
    return f"{cls.__module__}.{cls.__qualname__}"


def _status(request: Any) -> str:
    return str(request.status.name)


# --- facts about the installed vLLM -----------------------------------------------------------


def vllm_side() -> dict[str, Any]:
    """What vLLM 0.11.0 offers a KV connector, read from the real package."""
    import importlib

    from vllm.config import KVTransferConfig
    from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory
    from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1
    from vllm.distributed.kv_transfer.kv_connector.v1.lmcache_connector import (
        LMCacheConnectorV1,
    )
    from vllm.v1.core.sched import scheduler as scheduler_module
    from vllm.v1.worker import kv_connector_model_runner_mixin as mixin_module

    kv_events: Any = importlib.import_module("vllm.distributed.kv_events")
    base_methods = (
        "get_block_ids_with_load_errors",
        "get_kv_connector_kv_cache_events",
        "take_events",
        "update_connector_output",
        "shutdown",
    )
    return {
        "base_init_params": list(inspect.signature(KVConnectorBase_V1.__init__).parameters),
        "base_has": {name: hasattr(KVConnectorBase_V1, name) for name in base_methods},
        "factory_create_params": list(
            inspect.signature(KVConnectorFactory.create_connector).parameters
        ),
        "connector_output_fields": list(v11.connector_output_fields()),
        "transfer_config_has_failure_policy": "kv_load_failure_policy"
        in inspect.signature(KVTransferConfig).parameters,
        "scheduler_mentions_invalid_block_ids": v11.source_mentions(
            scheduler_module, "invalid_block_ids"
        ),
        "scheduler_has_handle_invalid_blocks": hasattr(
            scheduler_module.Scheduler, "_handle_invalid_blocks"
        ),
        "worker_step_asks_for_load_errors": v11.source_mentions(
            mixin_module, "get_block_ids_with_load_errors"
        ),
        "vllm_lmcache_connector_has": {
            name: hasattr(LMCacheConnectorV1, name)
            for name in ("get_block_ids_with_load_errors", "get_kv_connector_kv_cache_events")
        },
        "kv_events_has": {
            name: hasattr(kv_events, name)
            for name in ("KVConnectorKVEvents", "KVEventAggregator", "BlockStored")
        },
    }


def compat_facts() -> dict[str, Any]:
    from lmcache_compat.vllm.facts import vllm_facts

    return {k: v for k, v in dataclasses.asdict(vllm_facts()).items() if not isinstance(v, type)}


# --- shared pieces ------------------------------------------------------------------------------


def _build_scheduler(tmp: Path, name: str, module: str | None) -> tuple[Any, list[str]]:
    config = h.make_vllm_config(tmp / name, name, module, extra_config=EXTRA)
    with h.capture_logs(COMPAT_LOGGER) as compat_logs:
        scheduler = h.make_scheduler(config, num_blocks=64)
    return scheduler, list(compat_logs.messages)


def _capture_lmcache_shutdown() -> tuple[ExitStack, h.LogCapture, h.LogCapture]:
    adapter_logger, manager_logger = lmcache_loggers()
    stack = ExitStack()
    adapter = stack.enter_context(h.capture_logs(adapter_logger))
    manager = stack.enter_context(h.capture_logs(manager_logger))
    return stack, adapter, manager


def _shutdown_logs(adapter_logs: h.LogCapture, manager_logs: h.LogCapture) -> dict[str, int]:
    return {
        "connector_shutdown": len(adapter_logs.matching("Starting LMCacheConnector shutdown")),
        "manager_stopping": len(manager_logs.matching("Stopping LMCacheManager services")),
    }


def _schedule_hit_and_miss(scheduler: Any) -> tuple[Any, dict[str, Any]]:
    """Add ``hit`` (LMCache holds its first 48 tokens) and ``miss``; schedule one step."""
    injection = h.inject_lmcache_lookup_hits(scheduler, {"hit": STORED_TOKENS})
    scheduler.add_request(v11.make_request("hit", PROMPT_TOKENS))
    scheduler.add_request(v11.make_request("miss", PROMPT_TOKENS))
    out = scheduler.schedule()
    blocks = h.request_block_ids(scheduler, "hit")
    return out, {
        "injection_point": injection,
        "num_scheduled_tokens": dict(out.num_scheduled_tokens),
        "hit_block_ids": blocks,
        "external_block_ids": blocks[: STORED_TOKENS // h.BLOCK_SIZE],
        "hit_num_computed_tokens": scheduler.requests["hit"].num_computed_tokens,
        "connector_metadata": type(out.kv_connector_metadata).__qualname__,
    }


def _offer_invalid_block_ids(failed: set[int]) -> dict[str, Any]:
    """Try to put ``failed`` into vLLM's ``KVConnectorOutput`` the way vLLM >= 0.11.2's worker
    step does; on 0.11.0 the dataclass has no such field."""
    from vllm.v1.outputs import KVConnectorOutput

    try:
        KVConnectorOutput(invalid_block_ids=failed)
    except TypeError as exc:
        return {"accepted": False, "error": f"TypeError: {exc}"}
    return {"accepted": True, "error": None}


def _feed_and_finish(
    scheduler: Any, first_output: Any, failed: set[int], kv_output: Any = None
) -> dict[str, Any]:
    """Feed the first step's output (carrying ``failed`` where this vLLM can), then step the
    scheduler until both requests finish; record what the scheduler did with the failure."""
    output = h.make_model_runner_output(scheduler, first_output, failed)
    if kv_output is not None:
        output.kv_connector_output = kv_output  # exactly what vLLM's worker step filled
    hit = scheduler.requests["hit"]
    miss = scheduler.requests["miss"]
    with h.capture_logs() as logs:
        outputs = scheduler.update_from_output(first_output, output)
    result: dict[str, Any] = {
        "connector_output": {
            name: repr(getattr(output.kv_connector_output, name))
            for name in v11.connector_output_fields()
        },
        "hit_status": _status(hit),
        "hit_num_computed_tokens": hit.num_computed_tokens,
        "hit_in_running": any(r.request_id == "hit" for r in scheduler.running),
        "finish_reasons": h.finish_reasons(outputs),
        "recovered_logs": logs.matching("Recovered from KV load failure"),
        "failing_logs": logs.matching("due to KV load failure"),
    }
    steps: list[dict[str, int]] = []
    take_events: list[str] = []
    for _ in range(MAX_STEPS):
        if not scheduler.requests:
            break
        out = scheduler.schedule()  # calls our take_events() every step
        steps.append(dict(out.num_scheduled_tokens))
        take_events.append(repr(scheduler.connector.take_events()))
        h.feed_output(scheduler, out)  # calls our update_connector_output() every step
    result["later_steps"] = steps
    result["take_events"] = sorted(set(take_events))
    result["final"] = {"hit": _status(hit), "miss": _status(miss)}
    result["hit_output_tokens"] = list(hit.output_token_ids)
    return result


# --- full: LMCache 0.5.6 --------------------------------------------------------------------------


def convert_events_directly() -> dict[str, Any]:
    """``_EventConverter`` over vLLM 0.11.0's ``BlockStored`` (no ``lora_name``) with LMCache
    0.5.6's event classes (which have ``lora_name``): called directly, see the module doc."""
    import importlib

    from lmcache.utils import CacheRemoveEvent, CacheStoreEvent
    from vllm.distributed.kv_events import KVEventBatch

    from lmcache_compat.vllm.events import EventConverter as _EventConverter
    from lmcache_compat.vllm.facts import vllm_facts

    msgpack: Any = importlib.import_module("msgspec.msgpack")
    structs: Any = importlib.import_module("msgspec.structs")
    converter = _EventConverter(vllm_facts())
    stored = CacheStoreEvent(
        block_hashes=[b"\x01" * 8],
        parent_block_hash=None,
        token_ids=list(range(16)),
        block_size=16,
        lora_id=None,
        medium="cpu",
        lora_name="adapter-a",
    )
    removed = CacheRemoveEvent(block_hashes=[b"\x02" * 8], medium="cpu")
    converted = converter([stored, removed])
    batch = KVEventBatch(ts=0.0, events=converted)
    decoded = msgpack.decode(msgpack.encode(batch), type=KVEventBatch)
    plans = {cls.__name__: plan for cls, plan in converter._plans.items()}
    return {
        "types": [type(e).__name__ for e in converted],
        "fields": [
            {
                k: (v.hex() if isinstance(v, bytes) else v)
                for k, v in structs.asdict(e).items()
                if k != "block_hashes"
            }
            | {"block_hashes": [x.hex() for x in e.block_hashes]}
            for e in converted
        ],
        "positional_plan": {
            name: plan is not None and plan[2] is None for name, plan in plans.items()
        },
        "roundtrip_equal": decoded.events == converted,
    }


def run_full(tmp: Path, report: dict[str, Any]) -> None:
    from vllm.config import KVTransferConfig, set_current_vllm_config
    from vllm.distributed.kv_transfer import (
        ensure_kv_transfer_initialized,
        ensure_kv_transfer_shutdown,
        get_kv_transfer_group,
    )
    from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory

    from lmcache_compat.vllm import CONNECTOR_NAME, register
    from tests.tiers.real.scheduler.compat_driver import _FakeLMCacheEngine

    timings: dict[str, float] = report["timings"]
    register()
    register()  # idempotent; vLLM 0.11.0's register_connector raises on a duplicate name
    by_name = KVConnectorFactory.get_connector_class(
        KVTransferConfig(kv_connector=CONNECTOR_NAME, kv_role="kv_both")
    )
    report["registered"] = _qualname(by_name)

    # Worker role, built by vLLM's ensure_kv_transfer_initialized (one argument in 0.11.0).
    with h.timed(timings, "worker_connector"):
        worker_config = h.make_vllm_config(tmp / "worker", OURS, OURS_MODULE, extra_config=EXTRA)
        h.init_worker_process(worker_config, tmp)
        with (
            set_current_vllm_config(worker_config),
            h.capture_logs(COMPAT_LOGGER) as worker_logs,
        ):
            ensure_kv_transfer_initialized(worker_config)
        worker = get_kv_transfer_group()
        impl = worker._lmcache_engine
        report["worker_role"] = {
            "connector": _qualname(worker),
            "impl": _qualname(impl),
            "real_engine_is_none": impl.lmcache_engine is None,  # degraded mode on CPU
            "compat_warnings": list(worker_logs.messages),
            "capabilities": sorted(c.value for c in worker.compat_adapter.capabilities),
        }
        import torch

        shape = (2, 64, h.BLOCK_SIZE, 2, 16)  # (K/V, blocks, block size, kv heads, head size)
        worker.register_kv_caches(
            {name: torch.zeros(shape, dtype=torch.float16) for name in LAYERS}
        )
        report["worker_role"]["kv_caches_registered"] = len(impl.kv_caches)
        engine = _FakeLMCacheEngine(h.BLOCK_SIZE, "hit", FAILED_CHUNK)  # INJECTED (module doc)
        impl._manager._lmcache_engine = engine

    # Scheduler role, built by vLLM 0.11.0's Scheduler (two-argument factory call).
    with h.timed(timings, "scheduler"):
        scheduler, warnings = _build_scheduler(tmp, OURS, OURS_MODULE)
    connector = scheduler.connector
    report["scheduler_role"] = {
        "connector": _qualname(connector),
        "impl": _qualname(connector._lmcache_engine),
        "compat_warnings": warnings,
        "kv_events_bound_to": getattr(
            connector._plan.calls["get_kv_connector_kv_cache_events"], "__name__", "?"
        ),
    }
    first, report["step1"] = _schedule_hit_and_miss(scheduler)

    with h.timed(timings, "worker_step_1"):
        kv_output = worker_step(worker_config, first)
    failed = worker.get_block_ids_with_load_errors()  # what vLLM >= 0.11.2's step would ask
    report["worker_step1"] = {
        "retrieves": list(engine.retrieves),
        "kv_output_fields": sorted(f.name for f in dataclasses.fields(kv_output)),
        "failed_from_our_connector": sorted(failed),
        "failed_type": type(failed).__name__,
        "asked_again": sorted(worker.get_block_ids_with_load_errors()),
        "kv_events_from_our_connector": repr(worker.get_kv_connector_kv_cache_events()),
        "engine_events_left_undrained": len(engine.kv_events),
    }
    report["offer_invalid_block_ids"] = _offer_invalid_block_ids(failed)
    report["after_failure"] = _feed_and_finish(scheduler, first, failed, kv_output)
    report["engine_events_left_undrained"] = len(engine.kv_events)
    report["update_connector_output"] = repr(
        connector.update_connector_output(kv_output)  # a no-op here: no events path
    )
    report["converter"] = convert_events_directly()

    stack, adapter_logs, manager_logs = _capture_lmcache_shutdown()
    with stack:
        scheduler.shutdown()
        scheduler.shutdown()  # a second call does nothing
    report["scheduler_shutdown"] = _shutdown_logs(adapter_logs, manager_logs)
    stack, adapter_logs, manager_logs = _capture_lmcache_shutdown()
    with stack:
        ensure_kv_transfer_shutdown()
        worker.shutdown()
    report["worker_shutdown"] = _shutdown_logs(adapter_logs, manager_logs)


# --- post1: LMCache 0.3.9.post1 -------------------------------------------------------------------


def _try_worker_role(tmp: Path) -> str:
    from vllm.config import set_current_vllm_config
    from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory
    from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorRole

    config = h.make_vllm_config(tmp / "worker", OURS, OURS_MODULE, extra_config=EXTRA)
    h.init_worker_process(config, tmp)
    with set_current_vllm_config(config):
        try:
            KVConnectorFactory.create_connector(config, KVConnectorRole.WORKER)
        except Exception as exc:  # no GPU: 0.3.9.x's engine init divides by the GPU count
            return f"{type(exc).__name__}: {exc}"
    return "constructed"


def run_post1(tmp: Path, report: dict[str, Any]) -> None:
    scheduler, warnings = _build_scheduler(tmp, OURS, OURS_MODULE)
    connector = scheduler.connector
    report["scheduler_role"] = {
        "connector": _qualname(connector),
        "impl": _qualname(connector._lmcache_engine),
        "compat_warnings": warnings,
        "capabilities": sorted(c.value for c in connector.compat_adapter.capabilities),
    }
    first, report["step1"] = _schedule_hit_and_miss(scheduler)
    report["before_failure"] = sorted(connector.get_block_ids_with_load_errors())
    external: list[int] = report["step1"]["external_block_ids"]
    recorded = record_short_retrieve(connector._lmcache_engine, external)
    failed = connector.get_block_ids_with_load_errors()
    report["failure"] = {
        "recorded_by_lmcache": sorted(recorded),
        "failed_from_our_connector": sorted(failed),
        "failed_type": type(failed).__name__,
        "asked_again": sorted(connector.get_block_ids_with_load_errors()),
    }
    report["offer_invalid_block_ids"] = _offer_invalid_block_ids(failed)
    report["after_failure"] = _feed_and_finish(scheduler, first, failed)
    scheduler.shutdown()
    report["worker_role"] = _try_worker_role(tmp)


# --- lacking: LMCache 0.3.9 -----------------------------------------------------------------------


def drive_lacking(tmp: Path, name: str, module: str | None) -> dict[str, Any]:
    """Scheduler-side flow with hits to completion, calling the worker-side per-step methods
    (where the connector has them) each step, as vLLM >= 0.13.0's worker step would."""
    scheduler, warnings = _build_scheduler(tmp, name, module)
    connector = scheduler.connector
    result: dict[str, Any] = {
        "connector": _qualname(connector),
        "compat_warnings": warnings,
        "has": {
            m: hasattr(connector, m)
            for m in ("get_block_ids_with_load_errors", "get_kv_connector_kv_cache_events")
        },
    }
    first, result["step1"] = _schedule_hit_and_miss(scheduler)
    steps: list[dict[str, Any]] = []
    out = first
    for _ in range(MAX_STEPS):
        step: dict[str, Any] = {"scheduled": dict(out.num_scheduled_tokens)}
        for method in ("get_block_ids_with_load_errors", "get_kv_connector_kv_cache_events"):
            if not hasattr(connector, method):
                continue
            try:
                step[method] = repr(getattr(connector, method)())
            except Exception as exc:
                step[method] = f"{type(exc).__name__}: {exc}"
        step["get_finished"] = repr(connector.get_finished(set()))
        step["take_events"] = repr(connector.take_events())
        h.feed_output(scheduler, out)
        steps.append(step)
        if not scheduler.requests:
            break
        out = scheduler.schedule()
    result["steps"] = steps
    result["final_requests"] = len(scheduler.requests)
    try:
        scheduler.shutdown()
        result["shutdown"] = "ok"
    except Exception as exc:
        result["shutdown"] = f"{type(exc).__name__}: {exc}"
    return result


def try_use_native(tmp: Path) -> str:
    """``use_native=True`` asks for vLLM's vendored copy of LMCache's adapter, which vLLM 0.11.0
    does not ship: what the user sees when the scheduler builds our connector."""
    config = h.make_vllm_config(
        tmp / "native", OURS, OURS_MODULE, extra_config={**EXTRA, "use_native": True}
    )
    try:
        h.make_scheduler(config, num_blocks=64)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return "constructed"


def run_lacking(tmp: Path, report: dict[str, Any]) -> None:
    report["ours"] = drive_lacking(tmp, OURS, OURS_MODULE)
    report["vllm_own"] = drive_lacking(tmp, VLLMS, None)
    report["use_native"] = try_use_native(tmp)


# --- entry point ----------------------------------------------------------------------------------


def _describe(report: dict[str, Any]) -> None:
    report["vllm_side"] = vllm_side()
    report["vllm_facts"] = compat_facts()


def main(argv: list[str]) -> int:
    runs = {"full": run_full, "post1": run_post1, "lacking": run_lacking}
    return run_driver(argv, runs, _describe)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
