"""``lmcache_compat.vllm.LMCacheCompatConnector`` in a real vLLM 0.11.0 (the oldest vLLM it
supports) with real LMCache releases, one child process per release (``driver.py``, whose
docstring lists exactly what is real and what is injected).

vLLM 0.11.0 takes the connector branches vLLM 0.32.0 (the ``real`` tier) never takes:

* ``KVConnectorBase_V1.__init__(vllm_config, role)``: no ``kv_cache_config``; the factory calls
  ``connector_cls(config, role)``;
* no connector KV-event path (``get_kv_connector_kv_cache_events``, ``KVConnectorKVEvents`` and
  ``KVEventAggregator`` came in 0.13.0); ``KVConnectorOutput`` has no ``kv_cache_events``;
* ``BlockStored`` without ``lora_name``;
* no KV-load-failure handling at all: ``KVConnectorOutput`` has no ``invalid_block_ids`` (0.11.2),
  the worker step never calls ``get_block_ids_with_load_errors``, the scheduler has no
  ``_handle_invalid_blocks`` and ``KVTransferConfig`` no ``kv_load_failure_policy``. A block
  LMCache failed to load is therefore used as if it had loaded: the request is neither
  recomputed nor failed. The tests below pin that, with the failed block id taken from OUR
  connector's ``get_block_ids_with_load_errors()``.

Releases: LMCache 0.5.6 (``full``: both roles), 0.3.9.post1 (``post1``: the first release with
``get_block_ids_with_load_errors``) and 0.3.9 (``lacking``). The three children run at the same
time (about 20 s of wall time on 2 cores, most of it importing vLLM and the first
``ModelConfig``).
"""

from __future__ import annotations

from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

from tests.tiers.real.sweep import ROOT, run_drivers

pytestmark = pytest.mark.real

VLLM = "0.11.0"
RELEASES = {"full": "0.5.6", "post1": "0.3.9.post1", "lacking": "0.3.9"}
BLOCK = 16
OURS = "lmcache_compat.vllm.LMCacheCompatConnector"
IMPL = "lmcache.integration.vllm.vllm_v1_adapter.LMCacheConnectorV1Impl"
LOAD_ERRORS_WARNING = (
    "KV load failures cannot be detected: requests may compute on missing KV "
    "(LMCache 0.3.9 lacks get_block_ids_with_load_errors; first release with it: 0.3.9.post1)"
)
VLLM_LOAD_ERRORS_WARNING = (
    "KV load failures cannot be detected: requests may compute on missing KV (this vLLM's "
    "KVConnectorOutput has no invalid_block_ids, so it never asks the connector for failed "
    "loads; first vLLM with it: 0.11.2)"
)
NO_INVALID_BLOCK_IDS = (
    "TypeError: KVConnectorOutput.__init__() got an unexpected keyword argument 'invalid_block_ids'"
)


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    try:
        installed: str | None = metadata.version("vllm")
    except metadata.PackageNotFoundError:
        installed = None
    if installed != VLLM:  # e.g. `pytest -m real tests` in the vLLM 0.32.0 env
        pytest.skip(f"needs vLLM {VLLM} (tox -e grid-vllm0.11.0); installed: {installed}")
    work = tmp_path_factory.mktemp("compat011")
    return run_drivers("tests.tiers.real_vllm011.driver", RELEASES, work)


@pytest.fixture(scope="module")
def full(reports: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return reports["full"]


@pytest.fixture(scope="module")
def post1(reports: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return reports["post1"]


@pytest.fixture(scope="module")
def lacking(reports: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return reports["lacking"]


def test_the_children_ran_the_releases_and_this_checkout(reports: dict[str, Any]) -> None:
    assert set(reports) == set(RELEASES)
    for mode, report in reports.items():
        assert report["vllm"] == VLLM
        assert report["torch"].startswith("2.13.0")
        assert report["lmcache"] == RELEASES[mode]
        assert report["lmcache_file"].startswith(report["lmcache_target"])
        assert Path(report["compat_file"]) == ROOT / "lmcache_compat" / "vllm" / "connector.py"
        assert report["import_lmcache_compat_imports_vllm"] is False


# --- what vLLM 0.11.0 offers, and what the connector read from it ------------------------------


def test_vllm_0_11_0_has_no_load_failure_path_and_no_connector_events(
    reports: dict[str, Any],
) -> None:
    for report in reports.values():
        side = report["vllm_side"]
        assert side["base_init_params"] == ["self", "vllm_config", "role"]
        assert side["factory_create_params"] == ["config", "role"]
        assert side["base_has"] == {
            "get_block_ids_with_load_errors": False,  # 0.11.2
            "get_kv_connector_kv_cache_events": False,  # 0.13.0
            "take_events": True,
            "update_connector_output": True,
            "shutdown": True,
        }
        # KV load failures: no field to carry them, nobody asks for them, nothing handles them
        assert side["connector_output_fields"] == [
            "finished_sending",
            "finished_recving",
            "kv_connector_stats",
        ]
        assert side["worker_step_asks_for_load_errors"] is False
        assert side["scheduler_mentions_invalid_block_ids"] is False
        assert side["scheduler_has_handle_invalid_blocks"] is False
        assert side["transfer_config_has_failure_policy"] is False
        assert side["vllm_lmcache_connector_has"] == {
            "get_block_ids_with_load_errors": False,
            "get_kv_connector_kv_cache_events": False,
        }
        assert side["kv_events_has"] == {
            "BlockStored": True,
            "KVConnectorKVEvents": False,
            "KVEventAggregator": False,
        }


def test_connector_facts_read_from_vllm_0_11_0(reports: dict[str, Any]) -> None:
    for report in reports.values():
        facts = report["vllm_facts"]
        assert facts["base_takes_kv_cache_config"] is False
        assert facts["connector_events"] is False
        assert facts["accepts_none_matched"] is True  # tuple[Optional[int], bool] from 0.10.2
        assert facts["hashes_accept_bytes"] is True
        assert [tuple(f) for f in facts["block_stored_fields"]] == [
            ("block_hashes", True),
            ("parent_block_hash", True),
            ("token_ids", True),
            ("block_size", True),
            ("lora_id", True),
            ("medium", True),
        ]  # no lora_name before vLLM 0.14.1
        assert [tuple(f) for f in facts["block_removed_fields"]] == [
            ("block_hashes", True),
            ("medium", True),
        ]


# --- (a) the connector in vLLM 0.11.0's Scheduler (and worker step) ----------------------------


def test_register_resolves_by_name_on_vllm_0_11_0(full: dict[str, Any]) -> None:
    # register() twice: 0.11.0's register_connector raises ValueError on a duplicate name
    assert full["registered"] == OURS


def test_vllm_builds_our_connector_in_both_roles_with_two_arguments(full: dict[str, Any]) -> None:
    worker, sched = full["worker_role"], full["scheduler_role"]
    for role in (worker, sched):
        assert role["connector"] == OURS
        assert role["impl"] == IMPL
        # 0.5.6 lacks nothing; vLLM 0.11.0 lacks the load-failure path
        assert role["compat_warnings"] == [
            f"LMCacheCompatConnector over LMCache 0.5.6: {VLLM_LOAD_ERRORS_WARNING}"
        ]
    assert worker["real_engine_is_none"]  # LMCache on CPU: degraded mode, hence the stand-in
    assert worker["kv_caches_registered"] == 2
    assert len(worker["capabilities"]) == 8
    # kv_events is a capability of 0.5.6, but vLLM 0.11.0 has no path for the events
    assert "kv_events" in worker["capabilities"]
    assert sched["kv_events_bound_to"] == "no_events"  # lmcache_compat.vllm.decisions.no_events


@pytest.mark.parametrize("mode", ["full", "post1", "lacking"])
def test_requests_are_scheduled_with_injected_lookup_hits(
    reports: dict[str, Any], mode: str
) -> None:
    step1 = (reports[mode]["ours"] if mode == "lacking" else reports[mode])["step1"]
    assert step1["injection_point"] == ("transport" if mode == "full" else "lookup_client")
    assert step1["num_scheduled_tokens"] == {"hit": 64 - 48, "miss": 64}
    assert step1["external_block_ids"] == step1["hit_block_ids"][: 48 // BLOCK]
    assert step1["connector_metadata"] == "LMCacheConnectorMetadata"
    # vLLM 0.11.0 counts the 48 external tokens as computed at schedule time
    assert step1["hit_num_computed_tokens"] == 64


def test_failed_block_id_comes_from_our_worker_connector(full: dict[str, Any]) -> None:
    worker, external = full["worker_step1"], full["step1"]["external_block_ids"]
    # vLLM 0.11.0's worker step drove LMCache 0.5.6's real start_load_kv; the stand-in engine
    # missed the second chunk; LMCache's real record_failed_blocks mapped it to a block id.
    assert worker["retrieves"] == [
        {"req_id": "hit", "tokens": 48, "returned": 32, "failed": [16, 32]}
    ]
    assert worker["failed_from_our_connector"] == [external[1]]
    assert worker["failed_type"] == "set"
    assert worker["asked_again"] == []  # LMCache hands each failure over once
    # ... but vLLM 0.11.0's worker step neither asked for it nor has a field for it
    assert worker["kv_output_fields"] == [
        "finished_recving",
        "finished_sending",
        "kv_connector_stats",
    ]


def test_post1_failed_block_id_passes_through_our_connector(post1: dict[str, Any]) -> None:
    external = post1["step1"]["external_block_ids"]
    assert post1["before_failure"] == []
    failure = post1["failure"]
    assert failure["recorded_by_lmcache"] == [external[1]]
    assert failure["failed_from_our_connector"] == [external[1]]
    assert failure["failed_type"] == "set"
    assert failure["asked_again"] == []
    assert post1["worker_role"].startswith("ZeroDivisionError")  # 0.3.9.x's worker needs a GPU


@pytest.mark.parametrize("mode", ["full", "post1"])
def test_vllm_0_11_0_cannot_act_on_a_failed_block(reports: dict[str, Any], mode: str) -> None:
    """Documented gap: no recompute, no failure. vLLM >= 0.11.2 would truncate ``hit`` to 16
    computed tokens and recompute blocks 1..3 (see tests/tiers/real/scheduler); 0.11.0 keeps all 64
    as computed and decodes on the block that never loaded."""
    report = reports[mode]
    assert report["offer_invalid_block_ids"] == {"accepted": False, "error": NO_INVALID_BLOCK_IDS}
    after = report["after_failure"]
    assert "invalid_block_ids" not in after["connector_output"]
    assert after["recovered_logs"] == []
    assert after["failing_logs"] == []
    assert after["hit_status"] == "RUNNING" and after["hit_in_running"]
    assert after["hit_num_computed_tokens"] == 64  # not truncated at the failed block
    assert after["finish_reasons"] == {"hit": None, "miss": None}
    assert after["later_steps"] == [{"hit": 1, "miss": 1}] * 3  # decode only, no recompute
    assert after["final"] == {"hit": "FINISHED_LENGTH_CAPPED", "miss": "FINISHED_LENGTH_CAPPED"}
    assert len(after["hit_output_tokens"]) == 4


# --- (b) the KV-event code on a vLLM without the connector event path -------------------------


def test_event_methods_answer_nothing_and_raise_nothing(full: dict[str, Any]) -> None:
    worker = full["worker_step1"]
    # the stand-in engine holds 5 CacheStoreEvents (1 chunk of "hit", 4 of "miss"); with no
    # event path in vLLM 0.11.0 the connector never asks for them
    assert worker["kv_events_from_our_connector"] == "None"
    assert worker["engine_events_left_undrained"] == 5
    assert full["engine_events_left_undrained"] == 5
    # Scheduler.schedule() calls take_events(), update_from_output() update_connector_output()
    # with 0.11.0's KVConnectorOutput (no kv_cache_events attribute) every step
    assert full["after_failure"]["take_events"] == ["()"]
    assert full["update_connector_output"] == "None"


def test_lacking_release_steps_without_errors(lacking: dict[str, Any]) -> None:
    ours = lacking["ours"]
    assert ours["connector"] == OURS
    assert len(ours["steps"]) == 4
    for step in ours["steps"]:
        assert step["get_block_ids_with_load_errors"] == "set()"
        assert step["get_kv_connector_kv_cache_events"] == "None"
        assert step["take_events"] == "()"
        assert step["get_finished"] == "(None, None)"
    assert ours["final_requests"] == 0
    assert ours["shutdown"] == "ok"  # 0.3.9 has no shutdown: a no-op


def test_vllms_own_connector_does_not_break_on_vllm_0_11_0(lacking: dict[str, Any]) -> None:
    """Contrast with vLLM 0.32.0: 0.11.0 never asks for KV events, so its own connector runs
    with LMCache 0.3.9 (the AttributeError starts with vLLM 0.13.0)."""
    own, ours = lacking["vllm_own"], lacking["ours"]
    assert own["connector"].endswith(".lmcache_connector.LMCacheConnectorV1")
    assert own["has"] == {
        "get_block_ids_with_load_errors": False,
        "get_kv_connector_kv_cache_events": False,
    }
    assert [s["scheduled"] for s in own["steps"]] == [s["scheduled"] for s in ours["steps"]]
    assert own["final_requests"] == 0
    assert own["shutdown"] == "ok"


def test_events_convert_to_block_stored_without_lora_name(full: dict[str, Any]) -> None:
    """``_EventConverter`` called directly (the connector never builds one on 0.11.0): LMCache
    0.5.6's ``lora_name`` is left out, the rest copied positionally, bytes hashes kept."""
    conv = full["converter"]
    assert conv["types"] == ["BlockStored", "BlockRemoved"]
    stored, removed = conv["fields"]
    assert "lora_name" not in stored
    assert stored == {
        "block_hashes": ["01" * 8],
        "parent_block_hash": None,
        "token_ids": list(range(16)),
        "block_size": 16,
        "lora_id": None,
        "medium": "cpu",
    }
    assert removed == {"block_hashes": ["02" * 8], "medium": "cpu"}
    assert conv["positional_plan"] == {"CacheStoreEvent": True, "CacheRemoveEvent": True}
    assert conv["roundtrip_equal"] is True


# --- (c) start-up warnings, shutdown, use_native ------------------------------------------------


def test_lacking_release_warns_once_at_start_up(lacking: dict[str, Any]) -> None:
    (warning,) = lacking["ours"]["compat_warnings"]
    assert warning.startswith("LMCacheCompatConnector over LMCache 0.3.9: ")
    assert LOAD_ERRORS_WARNING not in warning  # upgrading LMCache would not help here
    assert VLLM_LOAD_ERRORS_WARNING in warning
    assert "(LMCache 0.3.9 lacks shutdown; first release with it: 0.3.10)" in warning
    assert "get_kv_events" not in warning  # no event path on vLLM 0.11.0: nothing is lost
    assert "\n" not in warning
    assert lacking["vllm_own"]["compat_warnings"] == []


def test_post1_warns_about_shutdown_and_vllms_missing_load_failure_path(
    post1: dict[str, Any],
) -> None:
    role = post1["scheduler_role"]
    assert role["connector"] == OURS
    assert "load_error_reporting" in role["capabilities"]
    (warning,) = role["compat_warnings"]
    assert warning == (
        "LMCacheCompatConnector over LMCache 0.3.9.post1: LMCache's background services are "
        "not stopped cleanly at exit (LMCache 0.3.9.post1 lacks shutdown; first release with "
        f"it: 0.3.10); {VLLM_LOAD_ERRORS_WARNING}"
    )


def test_shutdown_reaches_lmcache_once(full: dict[str, Any]) -> None:
    once = {"connector_shutdown": 1, "manager_stopping": 1}
    assert full["scheduler_shutdown"] == once  # vLLM 0.11.0's Scheduler.shutdown() twice
    assert full["worker_shutdown"] == once  # ensure_kv_transfer_shutdown() + a second call


def test_use_native_needs_a_vendored_copy_vllm_0_11_0_lacks(lacking: dict[str, Any]) -> None:
    assert lacking["use_native"] == (
        "ImportError: LMCacheCompatConnector: use_native=True needs vLLM's vendored copy of "
        "LMCache's adapter (vllm.distributed.kv_transfer.kv_connector.v1.lmcache_integration."
        "vllm_v1_adapter), which this vLLM does not ship; drop use_native to use LMCache's own "
        "adapter"
    )
