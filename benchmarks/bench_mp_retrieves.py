"""The MP worker's per-step cost with failed-retrieve tracking: ``get_finished`` +
``get_block_ids_with_load_errors`` over N = 1, 64, 1024 in-flight retrieves whose futures have
already resolved (no server I/O in the timed region), the release's own
``LMCacheMPWorkerAdapter`` against ``MPWorkerAdapter`` over it, in one process per release.

    python benchmarks/bench_mp_retrieves.py [--releases 0.5.4 0.5.6] [--repeat 41]

Each release runs in its venv of the mp-servers tier (``tests/tiers/mp_server/venvs.py``: the
adapter module imports torch and zmq, so a bare ``--no-deps`` install cannot import it), with a
real server of that release on 127.0.0.1 (its constructor pings the server). Two rows for ours:
futures that resolved before the submit returned (CPU transfer: the release resolves them
synchronously; the tracker judges them at submit) and futures that resolved after it (the
tracker judges them on the pass that finishes them). Prints median ratios beside
``os.getloadavg()``; target <= 1.1x.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

SIZES = (1, 64, 1024)


def child(url: str, repeat: int) -> dict[str, Any]:
    import inspect

    import zmq

    from lmcache_compat import MPWorkerAdapter
    from tests.tiers.mp_server.release_side import own_init_kwargs, worker_class

    cls = worker_class()
    future_cls = vars(inspect.getmodule(cls))["MessagingFuture"]  # the module's own import
    ctx = zmq.Context()

    def build() -> Any:
        return cls(**own_init_kwargs(cls, url, ctx, block_size=16, mq_timeout=5.0))

    own, ours_raw, late_raw = build(), build(), build()
    ours, late = MPWorkerAdapter(ours_raw), MPWorkerAdapter(late_raw)
    op = ours.make_load_store_op(list(range(16)), list(range(256)))

    def resolved() -> Any:
        f = future_cls()
        f.set_result(True)
        return f

    def fill(raw: Any, n: int, ledger: Any, before: bool) -> None:
        futures = {}
        for i in range(n):
            f = resolved() if before else future_cls()
            futures[f"r{i}"] = f
            raw.retrieve_futures[f"r{i}"] = (f, op.flat_block_ids)
            if ledger is not None:
                ledger.submitted(f"r{i}", op)
        for f in futures.values():
            if not f.query():
                f.set_result(True)

    def step(adapter: Any) -> float:
        t0 = time.perf_counter()
        adapter.get_finished(set())
        adapter.get_block_ids_with_load_errors()
        return time.perf_counter() - t0

    out: dict[str, Any] = {}
    for n in SIZES:
        times: dict[str, list[float]] = {"own": [], "ours": [], "ours_late": []}
        for _ in range(repeat):
            fill(own, n, None, True)
            times["own"].append(step(own))
            fill(ours_raw, n, ours.retrieve_ledger, True)
            times["ours"].append(step(ours))
            fill(late_raw, n, late.retrieve_ledger, False)
            times["ours_late"].append(step(late))
        med = {k: statistics.median(v) for k, v in times.items()}
        out[str(n)] = {
            "own_us": round(med["own"] * 1e6, 1),
            "ours_us": round(med["ours"] * 1e6, 1),
            "ours_late_us": round(med["ours_late"] * 1e6, 1),
            "ratio": round(med["ours"] / med["own"], 3),
            "ratio_late": round(med["ours_late"] / med["own"], 3),
        }
    for a in (own, ours_raw, late_raw):
        with contextlib.suppress(Exception):  # best effort: the server stops next
            a.shutdown()
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--releases", nargs="+", default=["0.5.4", "0.5.6"])
    parser.add_argument("--repeat", type=int, default=41)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print("RESULT " + json.dumps(child(args.child, args.repeat)))
        return 0
    from tests.tiers.mp_server.server import mp_server
    from tests.tiers.mp_server.venvs import ensure_venv, venv_root

    rows: dict[str, Any] = {}
    for release in args.releases:
        python = ensure_venv(release, venv_root())
        with tempfile.TemporaryDirectory() as tmp, mp_server(str(python), Path(tmp)) as srv:
            env = {**os.environ, "PYTHONPATH": str(REPO)}
            proc = subprocess.run(
                [str(python), __file__, "--child", srv.url, "--repeat", str(args.repeat)],
                capture_output=True,
                text=True,
                env=env,
                timeout=600,
                check=False,
            )
        line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
        if line is None:
            print(f"{release}: failed\n{proc.stderr[-2000:]}")
            return 1
        rows[release] = json.loads(line[len("RESULT ") :])
    load = os.getloadavg()
    print(f"load average (1, 5, 15 min): {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print("release  N     own us   ours us  ratio  ours(resolved after submit) us  ratio  target")
    worst = 0.0
    for release, by_n in rows.items():
        for n, r in by_n.items():
            worst = max(worst, r["ratio"])
            print(
                f"{release:8} {n:>5} {r['own_us']:>9} {r['ours_us']:>9} {r['ratio']:>6.3f}x "
                f"{r['ours_late_us']:>14} {r['ratio_late']:>21.3f}x  <= 1.1x"
            )
    print(json.dumps({"load": load, "rows": rows}))
    return 0 if worst <= 1.1 else 1


if __name__ == "__main__":
    raise SystemExit(main())
