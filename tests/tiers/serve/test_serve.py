"""The serving tier: one child process (``tests/tiers/serve/child.py``) per (connector, LMCache
release) plus one baseline without a connector, two at a time. Asserts the served tokens, LMCache's
own retrieve counts, the scheduler's own line for each failed load (recovered, or the request
failed), the control, and each process's end through vLLM's own engine shutdown: ours exits 0
within 30 s of the last token, our ``shutdown()`` reached, none of LMCache's engine threads left
once vLLM's engine shutdown returned, no LMCache socket files left; the peer's end as measured
(see ``assert_peer_exit``).

``LMCACHE_COMPAT_SERVE_POLICY`` picks vLLM's ``kv_load_failure_policy`` of the processes:
``recompute`` (the default; ``serve-vllm0.32.0``, in ``ci``) serves every release; ``fail`` (vLLM
0.32.0's default; ``serve-policies-vllm0.32.0``, the ``serve`` label: it took the ci tier over
its time budget) serves 0.4.6 and 0.5.6.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.tiers.serve.child import BLOCK, FAULT_END, FAULT_START, FAULTS, STORED, prompts
from tests.tiers.serve.prepare import RELEASES

pytestmark = [pytest.mark.serve, pytest.mark.real]

ROOT = Path(__file__).resolve().parents[3]
CONNECTORS = ("compat", "peer")
#: The releases served under kv_load_failure_policy="fail" (issue 24, item 3).
FAIL_POLICY_RELEASES = ("0.4.6", "0.5.6")
#: The tokens of the hit's load request (its 100-token prefix and 12 more: 7 LMCache chunks).
HIT_PROMPT = len(prompts()["hit-load"])
#: The single-chunk failures, in the middle of the prefix and its last chunk (child.FAULTS).
SINGLE_CHUNK = ("middle-load", "last-load")
SHUTDOWN_LINE = "LMCacheCompatConnector: shutdown() reached"
EXIT_WITHIN = 30.0
HANG = 180.0
#: A process still running this long after its last token is killed as hung.
KILL_AFTER = 40.0
#: LMCache's per-engine service threads (its lookup and offload servers, its storage manager's
#: event loop, its stats logger), by thread name, in 0.4.6 ... 0.5.7rc2.
ENGINE_THREADS = frozenset(
    {
        "lookup-server-thread",
        "offload-server-thread",
        "storage-manager-event-loop",
        "stats-logger-thread",
    }
)
#: LMCache's process-wide pin monitor (``PinMonitor.GetOrCreate``: a daemon singleton shared by
#: every engine of the process, stopped by no release's engine close): not an engine service.
PROCESS_WIDE = frozenset({"PinMonitor-thread"})


def _env(release: str | None, rpc: Path) -> dict[str, str]:
    releases = Path(os.environ["LMCACHE_COMPAT_SERVE_RELEASES"])
    path = [str(releases / release)] if release else []
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([*path, str(ROOT)]),
        "VLLM_TARGET_DEVICE": "cpu",
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "VLLM_CPU_OMP_THREADS_BIND": "nobind",
        "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
        "VLLM_RPC_BASE_PATH": str(rpc),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "VLLM_NO_USAGE_STATS": "1",
        "LMCACHE_CHUNK_SIZE": "16",
        "LMCACHE_LOCAL_CPU": "True",
        "LMCACHE_MAX_LOCAL_CPU_SIZE": "0.5",
    }


def run_child(
    tmp: Path, connector: str, release: str | None, policy: str = "recompute"
) -> dict[str, Any]:
    name = f"{connector}-{release or 'none'}" + ("" if policy == "recompute" else f"-{policy}")
    # short: LMCache 0.4.6's socket names overflow sun_path (107 bytes) under pytest's tmp dirs
    rpc = Path(tempfile.mkdtemp(prefix="lmc-", dir="/tmp"))
    report = tmp / f"{name}.json"
    start = time.time()
    log_path = tmp / f"{name}.log"
    with log_path.open("w") as log_file:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.tiers.serve.child", connector, str(report), policy],
            env=_env(release, rpc),
            stdout=log_file,  # vLLM logs to stdout, LMCache and lmcache_compat to stderr
            stderr=subprocess.STDOUT,
        )
        code: int | str | None = None
        while code is None:
            code = proc.poll()
            last = json.loads(report.read_text()).get("last_token") if report.exists() else None
            now = time.time()
            if code is None and (now - start > HANG or (last and now - last > KILL_AFTER)):
                proc.kill()  # a hang: killed, recorded, asserted below
                proc.wait()
                code = f"hung, killed {now - (last or start):.0f} s after the last token"
            time.sleep(0.2)
    log = log_path.read_text()
    ended = time.time()
    out: dict[str, Any] = json.loads(report.read_text()) if report.exists() else {}
    out.update(
        name=name,
        returncode=code,
        seconds=ended - start,
        after_last=ended - out["last_token"] if "last_token" in out else None,
        log=log,
        sockets=sorted(p.name for p in rpc.iterdir()),
    )
    shutil.rmtree(rpc)
    return out


#: vLLM's kv_load_failure_policy of this run's processes (the tox env sets it).
POLICY = os.environ.get("LMCACHE_COMPAT_SERVE_POLICY", "recompute")
POLICY_RELEASES = {"recompute": RELEASES, "fail": FAIL_POLICY_RELEASES}
#: (connector, release, kv_load_failure_policy): one process each.
ALL_CELLS = [(c, r, POLICY) for r in POLICY_RELEASES[POLICY] for c in CONNECTORS]


def lmcache_threads(run: dict[str, Any], when: str) -> dict[str, bool]:
    """LMCache's live Python threads (name: daemon) the child saw ``before`` or ``after`` vLLM's
    engine shutdown: those running code of the ``lmcache`` package (not ``lmcache_compat``)."""
    return {
        t["name"]: t["daemon"]
        for t in run.get(f"threads_{when}_shutdown", [])
        if t["module"].split(".")[0] == "lmcache" or t["owner"].split(".")[0] == "lmcache"
    }


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("serve")
    cases: list[tuple[str, str | None, str]] = [("none", None, "recompute"), *ALL_CELLS]
    # the longest first (the peer's processes run until killed KILL_AFTER s after their last
    # token), so the two workers finish together
    cases.sort(key=lambda case: case[0] != "peer")
    with ThreadPoolExecutor(max_workers=2) as pool:
        done = list(pool.map(lambda case: run_child(tmp, *case), cases))
    results = {d["name"]: d for d in done}
    table = [{k: v for k, v in d.items() if k not in ("log",)} for d in done]  # the closing table
    dest = os.environ.get("LMCACHE_COMPAT_SERVE_REPORT")
    if dest:
        Path(dest).parent.mkdir(parents=True, exist_ok=True)
        Path(dest).write_text(json.dumps(table, indent=1))
    return results


def _cell(runs: dict[str, dict[str, Any]], name: str) -> dict[str, Any]:
    run = runs[name]
    if "last_token" not in run:  # not buildable: the process still ends 0
        assert run["returncode"] == 0, f"{run['name']}: {run['returncode']}\n{run['log'][-3000:]}"
    return run


def _affected(name: str) -> int:
    """The tokens vLLM's scheduler counts as affected by the fault of ``name``: from the first
    vLLM block holding a damaged token to the end of what was loaded."""
    _mode, start, _end = FAULTS[name]
    return STORED - (start // BLOCK) * BLOCK


def test_baseline(runs: dict[str, dict[str, Any]]) -> None:
    base = runs["none-none"]
    assert base["returncode"] == 0, base["log"][-3000:]
    assert all(len(t) == 8 for t in base["tokens"].values())
    assert not any(base["kv_load_failure"].values())


@pytest.mark.skipif(POLICY != "recompute", reason="run with kv_load_failure_policy=recompute")
@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("connector", CONNECTORS)
def test_served(runs: dict[str, dict[str, Any]], connector: str, release: str) -> None:
    run = _cell(runs, f"{connector}-{release}")
    if "build_error" in run:
        # vLLM's LMCacheConnectorV1 imports LMCache's adapter by its old path (0.5.7rc2 moved it)
        assert connector == "peer", run["build_error"]
        pytest.skip(f"not buildable: {run['build_error']}")
    base = runs["none-none"]["tokens"]
    tokens, cached, retrieved = run["tokens"], run["cached"], run["retrieved"]
    lines, reasons = run["kv_load_failure"], run["finish_reason"]
    # store, then hit: LMCache's own count (its retrieve mask) and vLLM's num_cached_tokens
    assert retrieved["hit-load"] == [STORED], retrieved
    assert cached["hit-load"] == STORED
    assert tokens["hit-load"] == base["hit-load"]
    assert lines["hit-load"] == []
    # a failed load (reported) is recomputed -- the second half of the prefix, one chunk in its
    # middle, its last chunk -- with vLLM's scheduler's own line, and the tokens are still right
    for name in ("recover-load", *SINGLE_CHUNK):
        assert retrieved[name] == [STORED], (name, retrieved)
        assert lines[name] == [
            "Recovered from KV load failure: 1 request(s) rescheduled "
            f"({_affected(name)} tokens affected)."
        ], (name, lines)
        assert tokens[name] == base[name], name
        assert reasons[name] == "length", (name, reasons)
    # the control: the same damage reported as loaded gives other tokens
    assert retrieved["control-load"] == [STORED]
    assert lines["control-load"] == []
    assert tokens["control-load"] != base["control-load"], (FAULT_START, FAULT_END)


@pytest.mark.skipif(
    POLICY != "fail", reason="kv_load_failure_policy=fail: tox -e serve-policies-vllm0.32.0"
)
@pytest.mark.parametrize("release", FAIL_POLICY_RELEASES)
@pytest.mark.parametrize("connector", CONNECTORS)
def test_fail_policy(runs: dict[str, dict[str, Any]], connector: str, release: str) -> None:
    """kv_load_failure_policy="fail": vLLM 0.32.0's scheduler finishes the request with
    ``FinishReason.ERROR`` and no new tokens (``Scheduler.update_from_output``: the failed
    request's ``EngineCoreOutput(new_token_ids=[], finish_reason=ERROR)``), which the LLM API
    returns as a finished ``RequestOutput`` whose completion has ``finish_reason == "error"``
    and no token ids -- no exception; the engine serves the next request."""
    run = _cell(runs, f"{connector}-{release}-fail")
    base = runs["none-none"]["tokens"]
    tokens, cached, retrieved = run["tokens"], run["cached"], run["retrieved"]
    lines, reasons = run["kv_load_failure"], run["finish_reason"]
    # a hit before the failed requests, and the same request after them: the engine still
    # serves (the second time LMCache holds all the prompt's tokens, stored by the first: it
    # retrieves them all, vLLM uses one fewer, as it always computes a prompt's last token)
    hits = {"hit-load": (STORED, STORED), "hit-load-again": (HIT_PROMPT, HIT_PROMPT - 1)}
    for name, (loaded, used) in hits.items():
        assert retrieved[name] == [loaded], (name, retrieved)
        assert cached[name] == used, (name, cached)
        assert tokens[name] == base["hit-load"], name
        assert reasons[name] == "length" and lines[name] == [], (name, reasons, lines)
    for name in SINGLE_CHUNK:
        assert retrieved[name] == [STORED], (name, retrieved)
        (line,) = lines[name]
        assert line.startswith(
            "Failing 1 request(s) due to KV load failure "
            f"(failure_policy=fail, {_affected(name)} tokens affected). Request IDs: "
        ), (name, line)
        assert reasons[name] == "error", (name, reasons)
        assert tokens[name] == [], (name, tokens)


@pytest.mark.parametrize(
    ("connector", "release", "policy"), ALL_CELLS, ids=["-".join(c) for c in ALL_CELLS]
)
def test_exit(runs: dict[str, dict[str, Any]], connector: str, release: str, policy: str) -> None:
    """How each process ends through vLLM's own engine shutdown (``engine_core.shutdown()``)."""
    run = _cell(runs, f"{connector}-{release}" + ("" if policy == "recompute" else f"-{policy}"))
    if "build_error" in run:
        pytest.skip(f"not buildable: {run['build_error']}")
    before, after = lmcache_threads(run, "before"), lmcache_threads(run, "after")
    # the thread check sees LMCache's servers while they run (it is not vacuous)
    assert {"lookup-server-thread", "offload-server-thread"} <= set(before), before
    if connector == "compat":
        # ours: exit 0 within EXIT_WITHIN s of the last token, our shutdown() reached, none of
        # LMCache's engine threads alive once vLLM's engine shutdown returned (only the process-
        # wide pin monitor, a daemon), and no socket files left (our shutdown() also removes the
        # files LMCache leaves: that alone proves our cleanup, not that its services stopped)
        assert run["returncode"] == 0, f"{run['name']}: {run['returncode']}\n{run['log'][-3000:]}"
        assert run["after_last"] is not None and run["after_last"] <= EXIT_WITHIN
        assert SHUTDOWN_LINE in run["log"]
        assert set(after) <= PROCESS_WIDE and all(after.values()), after
        assert run["sockets"] == [], run["sockets"]
    else:
        assert_peer_exit(run, after)


def assert_peer_exit(run: dict[str, Any], after: dict[str, bool]) -> None:
    """vLLM's LMCacheConnectorV1 (measured on 0.4.6 and 0.5.6): it never forwards shutdown(), so
    every LMCache engine thread is alive after vLLM's engine shutdown returned -- among them the
    storage manager's event loop, a non-daemon thread, so the interpreter waits for it at exit
    and the process is still running KILL_AFTER s after the last token (killed), with LMCache's
    socket files left."""
    assert str(run["returncode"]).startswith("hung"), (run["returncode"], run["after_last"])
    assert set(after) >= ENGINE_THREADS, after
    assert after["storage-manager-event-loop"] is False, after  # non-daemon
    assert run["sockets"], run["sockets"]
