"""lmcache-compat's MP adapters against the REAL multi-process server of every LMCache release
from 0.3.13 to 0.5.7rc2, on 127.0.0.1, on a CPU-only machine (``tox run -e mp-servers``).

What is real: each release's own server (its code, command line, request handlers, storage,
ZMQ transport), its own client-side adapter classes under ours, its own token codec, torch
2.13.0 (CPU build) and the release's runtime dependencies at the pins generated from its
metadata (``constraints/``). What is injected: only in the server process of 0.3.13 ... 0.4.5,
narrow stand-ins for GPU-only modules their servers import or call at start-up (``cupy``,
``lmcache.c_ops`` served as the release's own CPU fallback, ``torch.cuda.cudart``'s host-memory
pinning as a no-op, ``torch.cuda.init`` as a no-op; ``stubs/README.md``). Each such release is
first started WITHOUT them, and the test asserts it fails with the documented error. No client
process gets anything injected.

What a release cannot do on CPU is asserted as such, never skipped: before 0.4.6 the worker
wraps every KV tensor for CUDA IPC (no CPU transfer mode), so its store/retrieve fails with a
CUDA error; the test asserts that error. Releases without a capability get the adapter's
documented fallback or refusal, asserted.

Runs at most two servers at a time (one job per release on two threads; a job with two
servers takes both slots) within ``LMCACHE_COMPAT_MP_TIER_BUDGET_S`` (default 900 s). Venvs
are built with uv under ``LMCACHE_COMPAT_MP_TIER_VENVS`` (default
``/tmp/lmcache-compat-mp-venvs``) and reused.
``LMCACHE_COMPAT_MP_TIER_REPORT=path.json`` writes every job's measurements there.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from packaging.version import Version

from lmcache_compat import Capability
from lmcache_compat.mp.server import ROOT_SERVICE, release_of_reply
from lmcache_compat.upstream.matrix import load_matrix
from tests.tiers.mp_server.survey import CUDA_ONLY_WORKER
from tests.tiers.mp_server.tier import (
    MQ_TIMEOUT,
    RETRIEVES_FAIL_AFTER_A_MISS,
    STALL_SECONDS,
    Tier,
    default_budget,
)
from tests.tiers.mp_server.venvs import releases, venv_root

pytestmark = [pytest.mark.mpserver, pytest.mark.real]

MATRIX = load_matrix()
RELEASES = releases()
#: (client release, server release): adapters of one against the other's server.
MIXES = [("0.5.6", "0.5.7rc2"), ("0.5.7rc2", "0.5.6")]
#: The HTTP front end serves /lmc_version from this release on (earlier ones answer 404).
LMC_VERSION_ROUTE_SINCE = Version("0.4.5")
FULL = 512  # tokens stored: two 256-token chunks


def has(version: str, capability: Capability) -> bool:
    return MATRIX.row(version).has(capability)


def job_order() -> list[tuple[str, tuple[Any, ...]]]:
    """Longest first: the two-server jobs and the mixed pairs, then the rest, newest first."""
    jobs: list[tuple[str, tuple[Any, ...]]] = []
    for client, server in MIXES:
        jobs.append((f"mixed-{client}-{server}", ("mixed", client, server)))
    multi = [v for v in RELEASES if has(v, Capability.MP_MULTI_SERVER)]
    single = [v for v in RELEASES if v not in multi]
    for v in reversed(multi + single):
        jobs.append((f"release-{v}", ("release", v, v in multi)))
    return jobs


@pytest.fixture(scope="module")
def tier(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tier]:
    t = Tier(venv_root(), tmp_path_factory.mktemp("mp-tier"), default_budget())
    for name, (kind, *args) in job_order():
        t.submit(name, t.release_job if kind == "release" else t.mixed_job, *args)
    yield t
    t.close()


def job(tier: Tier, name: str) -> dict[str, Any]:
    result = tier.result(name)
    assert "fatal" not in result, json.dumps(result, indent=1)[:6000]
    client = result.get("client", {})
    assert "fatal" not in client, json.dumps(client, indent=1)[:6000]
    return result


def steps(result: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = result["client"]["steps"]
    return out


def ok(step: dict[str, Any]) -> dict[str, Any]:
    assert step.get("ok"), json.dumps(step, indent=1)[:4000]
    return step


def failed_with(step: dict[str, Any], error_type: str) -> dict[str, Any]:
    assert not step.get("ok"), json.dumps(step, indent=1)[:4000]
    error: dict[str, Any] = step["error"]
    assert error["type"] == error_type, error
    return error


# --- per release -------------------------------------------------------------------------------


@pytest.mark.parametrize("version", RELEASES)
def test_server_starts_on_cpu_on_loopback_and_stops(tier: Tier, version: str) -> None:
    r = job(tier, f"release-{version}")
    for server in r["servers"]:
        assert server["version"] == version
        assert {addr for addr, _ in server["listening"]} == {"127.0.0.1"}, server["listening"]
    assert r["stopped"], "every server process is gone and its port closed after the job"
    used = {line.split(" -> ")[0] for s in r["servers"] for line in s["stubs_used"]}
    if r["needs"]:
        # Not startable as shipped on a CPU-only machine: the documented first error, then the
        # narrow stand-ins (server process only) make it start.
        assert r["bare_start"] == "failed"
        assert r["bare_error"] == "ModuleNotFoundError: No module named 'cupy'"
        assert used and used <= set(r["needs"]), (used, r["needs"])
        assert "cupy" in used
    else:
        assert "bare_start" not in r  # started as shipped: nothing offered, nothing imported
        assert used == set()
        assert all(s["stubs_offered"] == [] for s in r["servers"])


@pytest.mark.parametrize("version", RELEASES)
def test_scheduler_calls_round_trip(tier: Tier, version: str) -> None:
    r = job(tier, f"release-{version}")
    s = steps(r)
    assert r["client"]["client_version"] == version
    create = ok(s["create"])
    url = r["servers"][0]["url"]
    route = r["frontend"] == "http" and Version(version) >= LMC_VERSION_ROUTE_SINCE
    # the server's release, read from its HTTP front end where it serves /lmc_version
    assert create["servers"] == {url: version if route else None}
    if r["frontend"] == "http":  # what the front end sends, as the library reads it
        raw = ok(s["lmc_version_raw"])
        if route:  # every release with the route: a JSON string of its version
            assert (raw["status"], raw["body"]) == (200, json.dumps(version)), raw
            assert release_of_reply(raw["body"].encode(), url) == version
        else:
            assert raw["status"] == 404, raw
        # every front end's GET / names LMCache's HTTP API: what makes a 404 above a front end
        root = ok(s["root_raw"])
        assert root["status"] == 200, root
        assert json.loads(root["body"])["service"] == ROOT_SERVICE, root
    assert create["check_lookup_result_wrapped"] == has(version, Capability.MP_HEALTH_CHECK)
    assert ok(s["health"])["value"] is True  # real property, or the documented "assumed" True
    assert s["health"]["capability"] == has(version, Capability.MP_HEALTH_CHECK)
    assert ok(s["lookup_cold"])["hits"] == 0  # a real round trip: nothing stored, zero hits
    assert ok(s["round_trip"])["median_ms"] < 200
    for name, capability in (
        ("free_lookup_locks", Capability.MP_FREE_LOOKUP_LOCKS),
        ("end_session", Capability.MP_END_SESSION),
        ("report_block_allocations", Capability.MP_REPORT_BLOCK_ALLOCATIONS),
    ):
        step = ok(s[name])
        assert step["capability"] == has(version, capability), name
        assert step["value"] is None  # the release's own None, or the no-op fallback's
    assert s["report_block_allocations"]["then_lookup"] == 0  # the server still answers
    reset = ok(s["reset_cache"])
    assert reset["capability"] == has(version, Capability.MP_RESET_CACHE)
    assert reset["value"] is reset["capability"]  # True from the server; False: fallback
    shutdown = ok(s["shutdown"])
    assert shutdown["capability"] == has(version, Capability.MP_SCHEDULER_SHUTDOWN)


@pytest.mark.parametrize("version", RELEASES)
def test_worker_store_lookup_retrieve_bytes(tier: Tier, version: str) -> None:
    r = job(tier, f"release-{version}")
    s = steps(r)
    if r["transfer_flags"] is not None:  # the server has a CPU transfer mode (0.4.6 on)
        w = ok(s["worker_roundtrip"])
        assert w["stored"] == ["store-plain"]
        assert w["lookup"]["hits"] == FULL
        assert w["retrieved"] == ["look-plain"]
        assert w["bytes_equal"] is True and w["bytes_compared"] > 0
        return
    # Before 0.4.6 the server has no CPU transfer mode and the worker shares KV caches through
    # CUDA IPC: registering CPU tensors fails. Asserted, not skipped.
    assert "worker_roundtrip" not in s
    cpu = s["worker_cpu"]
    assert cpu["registering"] is True and "registered" not in cpu, cpu  # it failed right there
    assert (cpu["error"]["type"], cpu["error"]["message"]) in CUDA_ONLY_WORKER, cpu


@pytest.mark.parametrize("version", RELEASES)
def test_cache_salt_isolation(tier: Tier, version: str) -> None:
    r = job(tier, f"release-{version}")
    s = steps(r)
    salted = s["salt_refused_or_taken"]
    if not has(version, Capability.MP_CACHE_SALT):
        # no salts: the adapter refuses rather than mix tenants' caches (lookup and store)
        assert failed_with(salted, "UnsupportedArgumentError")["argument"] == "cache_salt"
        submit = s["worker_cpu"]["salted_submit"]
        assert submit["type"] == "UnsupportedArgumentError" and submit["argument"] == "cache_salt"
        return
    assert ok(salted)["hits"] == 0  # taken by the release, nothing stored under it
    if r["transfer_flags"] is None:
        # 0.4.4/0.4.5 take salts, but nothing can be stored on CPU (see the worker test)
        assert "salt_isolation" not in s
        return
    iso = ok(s["salt_isolation"])
    assert iso["unsalted_seen_under_a"] == 0  # the unsalted entry is not visible under A
    assert iso["stored_a"] == ["store-a"]
    assert iso["hits_a"] == FULL
    assert iso["hits_b"] == 0  # salt B misses what salt A stored
    assert iso["bytes_equal_a"] is True  # the bytes stored under A come back under A


@pytest.mark.parametrize("version", RELEASES)
def test_packed_token_ids(tier: Tier, version: str) -> None:
    s = steps(job(tier, f"release-{version}"))
    arg = s["packed_bytes_argument"]
    if has(version, Capability.MP_PACKED_TOKEN_IDS):
        assert ok(arg)["hits"] == 0 and arg["packed_len"] == 4 * 512
        p = ok(s["packed_end_to_end"])
        assert p["ours_pack_equals_codec"] is True  # our list -> the release's own codec
        assert p["hits_list"] == p["hits_bytes"] == FULL  # ids or pre-packed bytes: same key
        assert p["op_token_bytes_equal"] is True
        assert p["hits_packed_salt"] == FULL
        assert p["retrieved"] == ["pk-look"] and p["bytes_equal"] is True
    elif has(version, Capability.MP_LOOKUP_BY_TOKEN_IDS):
        error = failed_with(arg, "TypeError")  # bytes where the release takes a list
        assert "list of ints" in error["message"]
    else:  # 0.3.13 looks up by block hashes: the bytes are not its key
        assert ok(arg)["hits"] == 0


@pytest.mark.parametrize("version", RELEASES)
def test_several_servers_each_rank_its_own(tier: Tier, version: str) -> None:
    r = job(tier, f"release-{version}")
    s = steps(r)
    if not has(version, Capability.MP_MULTI_SERVER):
        error = failed_with(s["several_servers"], "UnsupportedArgumentError")
        assert error["argument"] == "server_urls"
        assert len(r["servers"]) == 1
        return
    u0, u1 = (srv["url"] for srv in r["servers"])
    m = ok(s["multi_server"])
    assert m["scheduler_servers"] == {u0: version, u1: version}
    assert m["rank0_local_server_url"] == u0 and m["rank0_servers"] == {u0: version}
    assert m["rank1_local_server_url"] == u1 and m["rank1_servers"] == {u1: version}
    assert m["stored_rank0"] == ["m-store"] and m["stored_rank1"] == ["m-store"]
    assert m["hits_after_rank0_only"] == 0  # server 1 has nothing yet: the minimum is 0
    assert m["hits_after_both"] == FULL
    # each rank gets back its own bytes, from its own server
    assert m["bytes_equal_rank0"] is True and m["bytes_equal_rank1"] is True


@pytest.mark.parametrize("version", RELEASES)
def test_a_lost_reply_never_reads_as_zero_hits(tier: Tier, version: str) -> None:
    """The server stops answering (SIGSTOP) after the adapter was built."""
    r = job(tier, f"release-{version}")
    stall = ok(steps(r)["stall"])
    while_stopped = stall["outcome_while_stopped"]
    if has(version, Capability.MP_HEALTH_CHECK):
        # the release answers 0 and marks the server unhealthy; our adapter raises instead
        assert while_stopped["error"]["type"] == "MPServerError", stall
        message = while_stopped["error"]["message"]
        assert "not a cache miss" in message and "version mismatch" in message
        assert f"Client LMCache {version}" in message
        assert while_stopped["seconds"] < 2 * MQ_TIMEOUT + 3
        return
    # Before the health property the release cannot tell a lost reply from a miss, and our
    # adapter binds its own method: the reply stays None (0.3.x poll a future) or the call
    # blocks (0.4.1 waits without a timeout) until the server answers again. Never 0.
    if stall["blocked"]:
        assert while_stopped == {}
        assert stall["outcome_after_resume"]["value"] == 0  # the real answer, once resumed
    else:
        assert while_stopped["value"] is None
        assert while_stopped["seconds"] >= STALL_SECONDS


# --- mixed releases ------------------------------------------------------------------------------


@pytest.mark.parametrize(("client", "server"), MIXES)
def test_mixed_releases_raise_instead_of_reading_as_misses(
    tier: Tier, client: str, server: str
) -> None:
    r = job(tier, f"mixed-{client}-{server}")
    s = steps(r)
    assert r["client"]["client_version"] == client and r["servers"][0]["version"] == server
    # the release's own adapter: a timed-out exchange reads as 0 hits, server marked unhealthy
    own = ok(s["own_adapter"])
    assert own["value"] == 0 and own["is_healthy_after"] is False
    # ours, without the servers' HTTP front ends: the same exchange raises MPServerError
    ours = ok(s["ours_without_http_urls"])
    assert "hits" not in ours, ours
    assert ours["raised"]["type"] == "MPServerError"
    message = ours["raised"]["message"]
    assert f"Client LMCache {client}" in message and "version mismatch" in message
    assert "wire format" in message
    assert ours["after_s"] < 2 * MQ_TIMEOUT + 3  # bounded by mq_timeout, not 300 s
    # ours, with MPConfig.http_urls: named up front, before anything connects
    for name in ("ours_with_http_urls", "worker_with_http_urls"):
        raised = ok(s[name])["raised"]
        assert raised["type"] == "MPVersionMismatchError"
        assert (raised["client"], raised["server"]) == (client, server)
        assert f"runs LMCache {server}" in raised["message"]
        assert f"this client runs LMCache {client}" in raised["message"]
    assert s["ours_with_http_urls"]["after_s"] < 3
    # doctor --mp-server reports the server's release and the mismatch (exit status 1)
    doctor = ok(s["doctor"])
    assert doctor["exit"] == 1
    (entry,) = doctor["mp_servers"]
    assert (entry["release"], entry["client"], entry["matches"]) == (server, client, False)
    assert f"LMCache {server}: NOT the installed LMCache {client}" in doctor["text_line"]


#: The release's own adapter reports a failed retrieve's block ids from this release on.
OWN_REPORTS_FAILED_RETRIEVES_SINCE = Version("0.5.5")


@pytest.mark.parametrize("version", RELEASES)
def test_failed_retrieve_never_stored_reference_vs_ours(tier: Tier, version: str) -> None:
    r = job(tier, f"release-{version}")
    if r["transfer_flags"] is None:  # no CPU transfer mode: the worker cannot run (above)
        return
    f = ok(steps(r)["failed_retrieve_never_stored"])
    blocks = f["op_block_ids"]
    assert f["own_lookup_hits"] == 0 and f["ours_lookup_hits"] == 0
    own, ours = f["own"], f["ours"]
    # the reference: finished on some pass; its ids only from 0.5.5 on (the upstream bug)
    assert own["finished_on_pass"] is not None, own
    expected_own = blocks if Version(version) >= OWN_REPORTS_FAILED_RETRIEVES_SINCE else []
    assert own["ids"] == expected_own, own
    # ours: exactly the op's block ids, on the pass that finishes it, never again
    assert ours["finished_on_pass"] is not None and ours["ids"] == blocks, ours
    assert all(later == [] for later in ours["later_ids"]), ours


@pytest.mark.parametrize("version", RELEASES)
def test_no_false_failure_over_successful_retrieves(tier: Tier, version: str) -> None:
    r = job(tier, f"release-{version}")
    if r["transfer_flags"] is None:
        return
    g = ok(steps(r)["successful_retrieves"])
    if version in RETRIEVES_FAIL_AFTER_A_MISS:
        # measured: after the never-stored retrieve every retrieve on that worker fails (tier.py);
        # each is reported, with its op's 32 block ids, on the pass that finishes it
        assert g["finished"] == g["retrieves"] > 0 and g["false_failure_ids"] == 32 * g["retrieves"]
        return
    assert g["finished"] == g["retrieves"] and g["false_failure_ids"] == 0, g


def failed_retrieve_figures(results: dict[str, Any]) -> dict[str, Any]:
    """Per release: the reference's and our ids for a never-stored retrieve, and the successes."""
    out: dict[str, Any] = {}
    for name, res in results.items():
        s = res.get("client", {}).get("steps", {})
        f, g = s.get("failed_retrieve_never_stored"), s.get("successful_retrieves")
        if f is None:
            continue
        out[name.removeprefix("release-")] = {
            "never_stored": {
                "op_blocks": len(f.get("op_block_ids", [])),
                "own": f.get("own"),
                "ours": f.get("ours"),
            },
            "successes": g,
        }
    return out


# --- the tier as a whole -------------------------------------------------------------------------


def test_tier_budget_and_concurrency(tier: Tier) -> None:
    results = {name: tier.result(name) for name in tier.jobs}
    elapsed = time.monotonic() - tier.budget.start
    report = {
        "elapsed_s": round(elapsed, 1),
        "budget_s": tier.budget.seconds,
        "peak_servers": tier.slots.peak,
        "venv_build_s": tier.venv_seconds,
        "failed_retrieves": failed_retrieve_figures(results),
        "jobs": results,
    }
    path = os.environ.get("LMCACHE_COMPAT_MP_TIER_REPORT")
    if path:
        Path(path).write_text(json.dumps(report, indent=1, default=repr))
    assert tier.slots.peak <= 2
    assert elapsed < tier.budget.seconds
    assert all("fatal" not in r for r in results.values())
