"""Scheduler-side KV-load-failure flow with vLLM's own ``LMCacheConnectorV1`` and real LMCache.

Run in a fresh process (``test_harness_smoke.py`` does, with the LMCache release first on
``PYTHONPATH`` and the cache environment of ``tools.lmcache_targets.quiet_env``)::

    python -m tests.tiers.real.scheduler.lmcache_smoke TMP_DIR RESULT_JSON

For each ``kv_load_failure_policy`` ("recompute", "fail" and vLLM's default) it builds a real
``Scheduler`` whose scheduler-role connector is vLLM 0.32.0's in-tree ``LMCacheConnectorV1``
wrapping the installed LMCache's ``LMCacheConnectorV1Impl``, schedules two 64-token requests of
which LMCache is made to hold the first 48 tokens of one (``hit``: see
``harness.inject_lmcache_lookup_hits`` for exactly what is injected), then reports the second
of the three blocks that were to be loaded for ``hit`` as failed through
``KVConnectorOutput.invalid_block_ids`` and records what the scheduler did. Results (and
seconds per step) go to RESULT_JSON; vLLM logs to stdout, so stdout is not the channel.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from tests.tiers.real.scheduler import harness as h

CONNECTOR = "LMCacheConnectorV1"
PROMPT_TOKENS = 64
STORED_TOKENS = 48  # three 16-token blocks (and LMCache chunks) held "externally"
FAILED_BLOCK_INDEX = 1  # the second externally loaded block fails to load
MAX_STEPS = 12


def _status(request: Any) -> str:
    return str(request.status.name)


def run_policy(tmp: Path, policy: str | None) -> dict[str, Any]:
    """One scheduler, one failure, the scheduler's reaction (and recovery for "recompute")."""
    timings: dict[str, float] = {}
    result: dict[str, Any] = {"requested_policy": policy, "timings": timings}
    with h.timed(timings, "vllm_config"):
        config = h.make_vllm_config(
            tmp / (policy or "default"),
            CONNECTOR,
            kv_load_failure_policy=policy,
            # 16-token LMCache chunks, so one chunk per vLLM block.
            extra_config={"lmcache.chunk_size": h.BLOCK_SIZE},
        )
    result["effective_policy"] = config.kv_transfer_config.kv_load_failure_policy
    with h.timed(timings, "scheduler_with_connector"):
        scheduler = h.make_scheduler(config, num_blocks=64)
    impl = h.lmcache_impl(scheduler)
    result["scheduler_role"] = {
        "connector": type(scheduler.connector).__qualname__,
        "connector_module": type(scheduler.connector).__module__,
        "impl": f"{type(impl).__module__}.{type(impl).__qualname__}",
        "lookup_client": type(getattr(impl, "lookup_client", None)).__qualname__,
        "lmcache_engine_is_none": getattr(impl, "lmcache_engine", None) is None,
        "recompute_kv_load_failures": scheduler.recompute_kv_load_failures,
    }
    # INJECTED: LMCache "holds" the first 48 tokens of "hit" and nothing of "miss".
    result["injection_point"] = h.inject_lmcache_lookup_hits(scheduler, {"hit": STORED_TOKENS})

    hit = h.make_request("hit", PROMPT_TOKENS)
    miss = h.make_request("miss", PROMPT_TOKENS)
    scheduler.add_request(hit)
    scheduler.add_request(miss)
    with h.timed(timings, "schedule_1"):
        out1 = scheduler.schedule()
    hit_blocks = h.request_block_ids(scheduler, "hit")
    external = hit_blocks[: STORED_TOKENS // h.BLOCK_SIZE]
    result["step1"] = {
        "num_scheduled_tokens": dict(out1.num_scheduled_tokens),
        "hit_num_computed_tokens": hit.num_computed_tokens,
        "hit_block_ids": hit_blocks,
        "external_block_ids": external,
        "connector_metadata": type(out1.kv_connector_metadata).__qualname__,
    }

    invalid = {external[FAILED_BLOCK_INDEX]}
    with h.capture_logs() as logs, h.timed(timings, "update_from_output_with_invalid_blocks"):
        outputs = h.feed_output(scheduler, out1, invalid_block_ids=invalid)
    result["after_failure"] = {
        "invalid_block_ids": sorted(invalid),
        "hit_status": _status(hit),
        "hit_num_computed_tokens": hit.num_computed_tokens,
        "hit_in_running": any(r.request_id == "hit" for r in scheduler.running),
        "miss_status": _status(miss),
        "finish_reasons": h.finish_reasons(outputs),
        "recovered_logs": logs.matching("Recovered from KV load failure"),
        "failing_logs": logs.matching("due to KV load failure"),
    }

    steps: list[dict[str, int]] = []
    with h.timed(timings, "run_to_completion"):
        for _ in range(MAX_STEPS):
            if not scheduler.requests:
                break
            out = scheduler.schedule()
            steps.append(dict(out.num_scheduled_tokens))
            h.feed_output(scheduler, out)
    result["later_steps"] = steps
    result["final"] = {"hit": _status(hit), "miss": _status(miss)}
    result["hit_output_tokens"] = list(hit.output_token_ids)
    with h.timed(timings, "shutdown"):
        if callable(getattr(impl, "shutdown", None)):
            impl.shutdown()
        scheduler.shutdown()
    return result


def main(argv: list[str]) -> int:
    tmp, result_path = Path(argv[0]), Path(argv[1])
    timings: dict[str, float] = {}
    report: dict[str, Any] = {"timings": timings, "runs": []}
    with h.timed(timings, "import_vllm_and_lmcache"):
        from importlib.metadata import version

        import lmcache.integration.vllm.vllm_v1_adapter
        import vllm  # noqa: F401

    report["vllm"] = version("vllm")
    import lmcache

    report["lmcache_file"] = lmcache.__file__
    for policy in ("recompute", "fail", None):
        report["runs"].append(run_policy(tmp, policy))
    timings["total_in_process"] = round(time.perf_counter() - START, 3)
    result_path.write_text(json.dumps(report, indent=2, sort_keys=True))
    return 0


START = time.perf_counter()

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
