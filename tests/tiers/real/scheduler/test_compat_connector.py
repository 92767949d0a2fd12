"""``lmcache_compat.vllm.LMCacheCompatConnector`` configured in a real vLLM (0.32.0 and 0.33.0:
the ``grid-vllm0.32.0`` / ``grid-vllm0.33.0`` tiers) with real LMCache releases, one child process
per release (``compat_driver.py``, whose docstring lists exactly what is real and what is
injected):

* LMCache 0.5.6 and 0.5.7rc2 (``full-<release>``; 0.5.7rc2 moved the impl under
  ``lmcache.inprocess``, where the driver finds it through ``lmcache_compat.upstream.resolve``):
  vLLM
  builds our connector in both roles; the scheduler schedules a request whose first 48 tokens
  LMCache holds (injected lookup reply); vLLM's own worker step drives our worker-role connector
  over LMCache's real ``LMCacheConnectorV1Impl``, whose ``start_load_kv`` finds one 16-token
  chunk missing (the injected stand-in for the CPU-less ``LMCacheEngine`` returns it so) and
  records the failed block with its real ``record_failed_blocks``; the ``KVConnectorOutput``
  vLLM's worker step fills from OUR ``get_block_ids_with_load_errors()`` goes back to the
  scheduler, which applies its ``kv_load_failure_policy``. KV events flow the same way to the
  scheduler's publisher.
* LMCache 0.3.9 (``lacking``: no ``get_block_ids_with_load_errors``, ``shutdown`` or
  ``get_kv_events``): our connector warns once and keeps working; vLLM's own connector raises
  ``AttributeError`` from ``get_kv_connector_kv_cache_events`` every step. Also there:
  ``use_native=True`` over vLLM's vendored copy of the LMCache adapter.

The three children run at the same time (about 20-30 s of wall time on 2 cores, most of it
importing vLLM and the first ``ModelConfig``).
"""

from __future__ import annotations

import os
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

from tests.tiers.real.sweep import ROOT, run_drivers

pytestmark = pytest.mark.real

VLLMS = ("0.32.0", "0.33.0")  # the tiers that run tests/tiers/real
RELEASES = {"full-0.5.6": "0.5.6", "full-0.5.7rc2": "0.5.7rc2", "lacking": "0.3.9"}
FULL = ["full-0.5.6", "full-0.5.7rc2"]
BLOCK = 16
OURS = "lmcache_compat.vllm.LMCacheCompatConnector"
#: Where each release defines its impl (found by the drivers through
#: lmcache_compat.upstream.resolve).
IMPLS = {
    "0.5.6": "lmcache.integration.vllm.vllm_v1_adapter.LMCacheConnectorV1Impl",
    "0.5.7rc2": "lmcache.inprocess.integration.vllm.vllm_v1_adapter.LMCacheConnectorV1Impl",
    "0.3.9": "lmcache.integration.vllm.vllm_v1_adapter.LMCacheConnectorV1Impl",
}
RECOVERED = "Recovered from KV load failure: 1 request(s) rescheduled (32 tokens affected)."
LOAD_ERRORS_WARNING = (
    "KV load failures cannot be detected: requests may compute on missing KV "
    "(LMCache 0.3.9 lacks get_block_ids_with_load_errors; first release with it: 0.3.9.post1)"
)


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    assert metadata.version("vllm") in VLLMS  # PackageNotFoundError: not a real tier's env
    work = tmp_path_factory.mktemp("compat")
    return run_drivers("tests.tiers.real.scheduler.compat_driver", RELEASES, work)


@pytest.fixture(scope="module", params=FULL)
def full(reports: dict[str, dict[str, Any]], request: pytest.FixtureRequest) -> dict[str, Any]:
    mode: str = request.param
    return reports[mode]


@pytest.fixture(scope="module")
def lacking(reports: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return reports["lacking"]


def _run(full: dict[str, Any], policy: str | None) -> dict[str, Any]:
    runs: list[dict[str, Any]] = full["runs"]
    (run,) = [r for r in runs if r["requested_policy"] == policy]
    return run


# --- LMCache 0.5.6 -------------------------------------------------------------------------------


def test_the_children_ran_the_releases_and_this_checkout(reports: dict[str, Any]) -> None:
    for mode, report in reports.items():
        assert report["vllm"] == metadata.version("vllm")
        assert report["lmcache"] == RELEASES[mode]
        assert report["impl"] == IMPLS[RELEASES[mode]]
        assert report["lmcache_loggers"][0] == IMPLS[RELEASES[mode]].rsplit(".", 1)[0]
        assert report["lmcache_file"].startswith(report["lmcache_target"])
        assert Path(report["compat_file"]) == ROOT / "lmcache_compat" / "vllm" / "connector.py"
        assert report["import_lmcache_compat_imports_vllm"] is False


def test_register_is_an_idempotent_lazy_registration(full: dict[str, Any]) -> None:
    assert full["registered"] == OURS
    facts = full["vllm_facts"]
    assert facts["base_takes_kv_cache_config"] is True  # required from vLLM 0.21.0
    assert facts["accepts_none_matched"] is True  # vLLM >= 0.10.2
    assert facts["connector_events"] is True
    assert facts["hashes_accept_bytes"] is True
    stored = dict(facts["block_stored_fields"])
    assert stored["lora_name"] is True and stored["medium"] is True  # required in 0.32.0
    assert stored["extra_keys"] is False
    assert dict(facts["block_removed_fields"]) == {
        "block_hashes": True,
        "medium": True,
        "group_idx": False,
        "locality": False,
        "ownership": False,
    }


def test_vllm_builds_our_connector_in_both_roles(full: dict[str, Any]) -> None:
    worker = full["worker_role"]
    assert worker["connector"] == OURS
    assert worker["impl"] == IMPLS[full["lmcache"]]
    assert worker["real_engine_is_none"]  # LMCache on CPU: degraded mode, hence the stand-in
    assert worker["kv_caches_registered"] == 2  # register_kv_caches reached the impl
    assert worker["compat_warnings"] == []  # 0.5.6 has every capability
    # 0.5.6's impl has no bind hook: bind_connector_metadata resets its layerwise state instead
    assert worker["bind_target"].endswith("reset_layerwise_state")
    assert len(worker["capabilities"]) == 8
    for run in full["runs"]:
        role = run["scheduler_role"]
        assert role["connector"] == OURS
        assert role["impl"] == IMPLS[full["lmcache"]]
        assert role["compat_warnings"] == []
        assert run["injection_point"] == "transport"


def test_the_configuration_is_checked_once_from_the_scheduler_side(full: dict[str, Any]) -> None:
    """The configuration check when the connector is built: one record per process, from the
    scheduler side (the worker makes none), naming exactly the LMCACHE_* variables of this
    environment that no part of the installed LMCache reads, and never the harness's own
    (LMCACHE_COMPAT_*: lmcache-compat's namespace, which tox sets)."""
    from lmcache_compat.config.schema import load_schemas

    records = [m for run in full["runs"] for m in run["scheduler_role"]["config_check"]]
    assert full["worker_role"]["config_check"] == []
    (record,) = records
    head, *lines = record.splitlines()
    schema = load_schemas().row(full["lmcache"])
    named = {line.split()[1].rstrip(":") for line in lines if line.startswith("  env ")}
    harness = {
        k
        for k in os.environ
        if k.startswith("LMCACHE_") and k not in schema.env_names and k != "LMCACHE_CONFIG_FILE"
    }
    foreign = {k for k in harness if not k.startswith("LMCACHE_COMPAT_")}
    assert any(k.startswith("LMCACHE_COMPAT_") for k in harness)  # the tier sets its own
    assert named == foreign, (record, harness)
    assert head.startswith(f"LMCacheCompatConnector: LMCache {full['lmcache']} "), head
    assert ("would ignore" in head) if foreign else head.endswith(" as written"), head


@pytest.mark.parametrize("policy", ["recompute", "fail", None])
def test_failed_block_ids_come_from_our_worker_connector(
    full: dict[str, Any], policy: str | None
) -> None:
    run = _run(full, policy)
    step1, worker = run["step1"], run["worker_step1"]
    assert step1["num_scheduled_tokens"] == {"hit": 64 - 48, "miss": 64}
    assert step1["connector_metadata"] == "LMCacheConnectorMetadata"
    assert len(step1["external_block_ids"]) == 48 // BLOCK
    assert worker["worker_connector"] == "LMCacheCompatConnector"
    # LMCache's real start_load_kv asked for the 48 held tokens; the stand-in engine returned
    # all but the second chunk; LMCache's real record_failed_blocks mapped those 16 tokens
    # through the scheduler's slot mapping to exactly the second external block.
    assert worker["retrieves"] == [
        {"req_id": "hit", "tokens": 48, "returned": 32, "failed": [16, 32]}
    ]
    assert worker["invalid_block_ids"] == [step1["external_block_ids"][1]]
    assert worker["kv_cache_events"] == "CompatKVEvents"


def test_recompute_reschedules_from_the_failed_block(full: dict[str, Any]) -> None:
    run = _run(full, "recompute")
    after = run["after_failure"]
    assert run["effective_policy"] == "recompute"
    assert after["recovered_logs"] == [RECOVERED]
    assert after["failing_logs"] == []
    assert after["hit_status"] == "RUNNING" and after["hit_in_running"]
    assert after["hit_num_computed_tokens"] == 1 * BLOCK  # truncated at the failed block
    assert "hit" not in after["finish_reasons"]
    assert run["later_steps"][0]["hit"] == 64 - BLOCK  # recomputes blocks 1..3
    assert run["final"] == {"hit": "FINISHED_LENGTH_CAPPED", "miss": "FINISHED_LENGTH_CAPPED"}
    assert len(run["hit_output_tokens"]) == 4


@pytest.mark.parametrize("policy", ["fail", None])
def test_fail_finishes_the_request_with_an_error(full: dict[str, Any], policy: str | None) -> None:
    run = _run(full, policy)
    after = run["after_failure"]
    assert run["effective_policy"] == "fail"  # vLLM 0.32.0's default is "fail"
    assert after["hit_status"] == "FINISHED_ERROR"
    assert after["finish_reasons"]["hit"] == "error"
    assert after["recovered_logs"] == []
    assert len(after["failing_logs"]) == 1
    assert "failure_policy=fail, 32 tokens affected" in after["failing_logs"][0]
    assert all("hit" not in step for step in run["later_steps"])
    assert run["final"] == {"hit": "FINISHED_ERROR", "miss": "FINISHED_LENGTH_CAPPED"}


@pytest.mark.parametrize("policy", ["recompute", "fail", None])
def test_kv_events_reach_the_scheduler_publisher(full: dict[str, Any], policy: str | None) -> None:
    run = _run(full, policy)
    published = run["after_failure"]["published"]
    # step 1 stored 16 tokens of "hit" (past the 48 LMCache held) and all 64 of "miss": one
    # BlockStored per 16-token chunk, LMCache's byte hashes passed through unchanged.
    assert len(published) == (16 + 64) // BLOCK
    for event in published:
        assert event["type"] == "BlockStored"
        assert event["hash_types"] == ["bytes"]
        assert event["medium"] == "cpu"
        assert event["lora_name"] is None
        assert event["block_size"] == BLOCK
    assert run["published_types"] == ["BlockStored"]


def test_events_are_merged_across_workers_like_vllm_does(full: dict[str, Any]) -> None:
    merge = _run(full, None)["two_worker_merge"]
    assert merge["container"] == "CompatKVEvents"
    assert merge["merged_workers"] == 2
    assert merge["merged_events"] == 5  # 3 from rank 0, 2 from rank 1
    # only what both ranks reported is published, once: rank 0's extra store is dropped
    assert [(e["type"], e["block_hashes"]) for e in merge["published"]] == [
        ("BlockStored", ["01" * 8]),
        ("BlockRemoved", ["02" * 8]),
    ]
    assert merge["taken_again"] == 0
    assert merge["roundtrip"] == {"encoded_events": 2, "equal": True}  # msgspec, as vLLM's ZMQ


# --- (c) shutdown --------------------------------------------------------------------------------


def test_shutdown_reaches_lmcache_once(full: dict[str, Any]) -> None:
    once = {"connector_shutdown": 1, "manager_stopping": 1}
    for run in full["runs"]:
        assert run["shutdown"] == once  # Scheduler.shutdown() called twice
        assert run["publisher_shut_down"]
    assert full["worker_shutdown"] == once  # ensure_kv_transfer_shutdown() + a second call
    # contrast: vLLM's in-tree connector never forwards shutdown to LMCache (and cannot be
    # built at all over 0.5.7rc2: it imports LMCache's adapter by its old path)
    if full["lmcache"] == "0.5.7rc2":
        assert full["vllm_connector_shutdown"] == {
            "connector": None,
            "error": (
                "ModuleNotFoundError: No module named 'lmcache.integration.vllm.vllm_v1_adapter'"
            ),
        }
    else:
        assert full["vllm_connector_shutdown"] == {
            "connector": "LMCacheConnectorV1",
            "connector_shutdown": 0,
            "manager_stopping": 0,
        }


# --- LMCache 0.3.9 -------------------------------------------------------------------------------


def test_lacking_release_warns_once_at_start_up(lacking: dict[str, Any]) -> None:
    ours = lacking["ours"]
    assert ours["connector"] == OURS
    (warning,) = ours["compat_warnings"]
    assert warning.startswith("LMCacheCompatConnector over LMCache 0.3.9: ")
    assert LOAD_ERRORS_WARNING in warning
    assert "(LMCache 0.3.9 lacks shutdown; first release with it: 0.3.10)" in warning
    assert "(LMCache 0.3.9 lacks get_kv_events; first release with it: 0.3.10.post2)" in warning
    assert "\n" not in warning
    assert lacking["vllm_own"]["compat_warnings"] == []


def test_lacking_release_reports_no_errors_and_no_events(lacking: dict[str, Any]) -> None:
    ours = lacking["ours"]
    assert ours["injection_point"] == "lookup_client"
    assert len(ours["steps"]) >= 3
    assert ours["steps"][0]["scheduled"] == {"hit": 64 - 48, "miss": 64}
    for step in ours["steps"]:
        assert step["invalid_block_ids"] == {"type": "set", "value": []}
        assert step["kv_cache_events"] == "None"
        assert "kv_cache_events_error" not in step
        assert step["get_finished"] == "(None, None)"
    assert ours["published"] == 0
    assert ours["taken_events"] == "[]"
    assert ours["shutdown"] == "ok"  # a no-op: 0.3.9 has no shutdown
    # the worker role of 0.3.9 needs a GPU (its engine init divides by the GPU count)
    assert ours["worker_role"].startswith("ZeroDivisionError")


def test_vllms_own_connector_raises_every_step_on_the_lacking_release(
    lacking: dict[str, Any],
) -> None:
    own, ours = lacking["vllm_own"], lacking["ours"]
    assert own["connector"].endswith(".lmcache_connector.LMCacheConnectorV1")
    assert [s["scheduled"] for s in own["steps"]] == [s["scheduled"] for s in ours["steps"]]
    for step in own["steps"]:
        assert step["kv_cache_events_error"] == (
            "AttributeError: 'LMCacheConnectorV1Impl' object has no attribute 'get_kv_events'"
        )
        assert step["invalid_block_ids"] == {"type": "set", "value": []}


def test_use_native_wraps_vllms_vendored_copy(lacking: dict[str, Any]) -> None:
    native = lacking["native"]
    assert native["connector"] == OURS
    assert native["impl"] == (
        "vllm.distributed.kv_transfer.kv_connector.v1.lmcache_integration.vllm_v1_adapter."
        "LMCacheConnectorV1Impl"
    )
    (warning,) = native["compat_warnings"]
    assert warning.startswith("LMCacheCompatConnector over vLLM's vendored LMCache adapter: ")
    assert (
        "(vLLM's vendored LMCache adapter lacks get_block_ids_with_load_errors; LMCache's own "
        "adapter has it from 0.3.9.post1: drop use_native)" in warning
    )
    assert "register_kv_caches" in native["capabilities"]
    # the vendored impl has a bind hook: our bind_connector_metadata reaches it (decided once)
    assert native["bind_target"] == "LMCacheConnectorV1Impl.bind_connector_metadata"
    assert native["metadata"] == "LMCacheConnectorMetadata"
    assert native["after_bind"] == {"current_layer": 0, "layerwise_storers": []}
    assert native["invalid_block_ids"] == []
    assert native["kv_cache_events"] == "None"
