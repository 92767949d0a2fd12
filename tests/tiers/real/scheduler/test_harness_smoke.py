"""Smoke test of the scheduler harness: real vLLM 0.32.0 ``Scheduler`` + vLLM's in-tree
``LMCacheConnectorV1`` + real LMCache 0.5.6, KV load failure under each failure policy.

What is real: vLLM's ``Scheduler``, KV cache manager, ``KVConnectorFactory``, the in-tree
``LMCacheConnectorV1`` (scheduler role) and LMCache 0.5.6's ``LMCacheConnectorV1Impl`` with its
``LMCacheLookupClient`` (``lmcache.chunk_size`` set to 16 through ``kv_connector_extra_config``).
What is injected: the worker-side lookup server's reply (LMCache "holds" the first 48 tokens of
request ``hit``; see ``harness.inject_lmcache_lookup_hits``) and the worker's
``ModelRunnerOutput`` (built by ``harness.make_model_runner_output``), whose
``kv_connector_output.invalid_block_ids`` names the second of the three blocks that were to be
loaded for ``hit``. No model runs: every sampled token is a constant.

Everything vLLM/LMCache runs in one child process (``lmcache_smoke.py``), with LMCache 0.5.6
installed ``--no-deps --target`` and first on ``PYTHONPATH``, and caches kept in a temp dir.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from importlib import metadata
from typing import Any

import pytest

from tests.tiers.real.sweep import ROOT
from tools.lmcache_targets import install, quiet_env

pytestmark = pytest.mark.real

VLLMS = ("0.32.0", "0.33.0")  # the tiers that run tests/tiers/real
LMCACHE = "0.5.6"
BLOCK = 16
RECOVERED = "Recovered from KV load failure: 1 request(s) rescheduled (32 tokens affected)."


@pytest.fixture(scope="module")
def smoke(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    assert metadata.version("vllm") in VLLMS  # PackageNotFoundError: not a real tier's env
    work = tmp_path_factory.mktemp("sched")
    timings: dict[str, float] = {}
    start = time.perf_counter()
    target = install(LMCACHE, work / "releases")
    timings["install_lmcache"] = round(time.perf_counter() - start, 3)
    tmp = work / "run"
    env = quiet_env(tmp)
    env["PYTHONPATH"] = os.pathsep.join([str(target), str(ROOT)])
    env["PYTHONHASHSEED"] = "0"  # LMCache's builtin chunk hash otherwise varies per process
    result = tmp / "result.json"
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "tests.tiers.real.scheduler.lmcache_smoke", str(tmp), str(result)],
        capture_output=True,
        text=True,
        env=env,
        cwd=str(tmp),
        timeout=300,
    )
    timings["child_process"] = round(time.perf_counter() - start, 3)
    if proc.returncode != 0 or not result.exists():
        raise AssertionError(
            f"lmcache_smoke failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n"
            f"{proc.stderr[-5000:]}"
        )
    report: dict[str, Any] = json.loads(result.read_text())
    report["timings"].update(timings)
    report["lmcache_target"] = str(target)
    print("scheduler smoke timings (s):", json.dumps(report["timings"], sort_keys=True))
    for run in report["runs"]:
        print(f"  policy={run['requested_policy']}:", json.dumps(run["timings"], sort_keys=True))
    return report


def _run(report: dict[str, Any], policy: str | None) -> dict[str, Any]:
    runs: list[dict[str, Any]] = report["runs"]
    (run,) = [r for r in runs if r["requested_policy"] == policy]
    return run


def test_real_lmcache_scheduler_role_constructs_on_cpu(smoke: dict[str, Any]) -> None:
    assert smoke["vllm"] == metadata.version("vllm")
    assert smoke["lmcache_file"].startswith(smoke["lmcache_target"])
    for run in smoke["runs"]:
        role = run["scheduler_role"]
        assert role["connector"] == "LMCacheConnectorV1"
        assert role["connector_module"].startswith("vllm.distributed.kv_transfer.")
        assert role["impl"] == "lmcache.integration.vllm.vllm_v1_adapter.LMCacheConnectorV1Impl"
        assert role["lookup_client"] == "LMCacheLookupClient"
        assert role["lmcache_engine_is_none"]  # the scheduler role has no engine, by design
        assert run["injection_point"] == "transport"


@pytest.mark.parametrize("policy", ["recompute", "fail", None])
def test_blocks_are_allocated_for_the_external_load(
    smoke: dict[str, Any], policy: str | None
) -> None:
    step1 = _run(smoke, policy)["step1"]
    # 48 of 64 tokens come from LMCache: only the last 16 are computed, in 4 blocks.
    assert step1["num_scheduled_tokens"] == {"hit": 64 - 48, "miss": 64}
    assert step1["hit_num_computed_tokens"] == 64
    assert len(step1["hit_block_ids"]) == 4
    assert len(step1["external_block_ids"]) == 48 // BLOCK
    assert step1["connector_metadata"] == "LMCacheConnectorMetadata"


def test_recompute_reschedules_from_the_failed_block(smoke: dict[str, Any]) -> None:
    run = _run(smoke, "recompute")
    after = run["after_failure"]
    assert run["effective_policy"] == "recompute"
    assert after["invalid_block_ids"] == [run["step1"]["external_block_ids"][1]]
    assert after["recovered_logs"] == [RECOVERED]
    assert after["failing_logs"] == []
    assert after["hit_status"] == "RUNNING" and after["hit_in_running"]
    assert after["hit_num_computed_tokens"] == 1 * BLOCK  # truncated at the failed block
    assert "hit" not in after["finish_reasons"]
    assert run["later_steps"][0]["hit"] == 64 - BLOCK  # recomputes blocks 1..3
    assert run["final"] == {"hit": "FINISHED_LENGTH_CAPPED", "miss": "FINISHED_LENGTH_CAPPED"}
    assert len(run["hit_output_tokens"]) == 4


@pytest.mark.parametrize("policy", ["fail", None])
def test_fail_finishes_the_request_with_an_error(smoke: dict[str, Any], policy: str | None) -> None:
    run = _run(smoke, policy)
    after = run["after_failure"]
    # vLLM 0.32.0's default (vllm/config/kv_transfer.py) is "fail".
    assert run["effective_policy"] == "fail"
    assert after["hit_status"] == "FINISHED_ERROR"
    assert after["finish_reasons"]["hit"] == "error"
    assert after["recovered_logs"] == []
    assert len(after["failing_logs"]) == 1
    assert "failure_policy=fail, 32 tokens affected" in after["failing_logs"][0]
    assert all("hit" not in step for step in run["later_steps"])
    assert run["final"] == {"hit": "FINISHED_ERROR", "miss": "FINISHED_LENGTH_CAPPED"}
