"""The MP worker's per-step cost with failed-retrieve tracking: ``get_finished`` +
``get_block_ids_with_load_errors`` over N = 1, 64, 1024 in-flight retrieves whose futures have
already resolved (no server I/O in the timed region), the release's own
``LMCacheMPWorkerAdapter`` against ``MPWorkerAdapter`` over another instance of it, in one
process per release.

    python benchmarks/bench_mp_retrieves.py [--releases 0.5.4 0.5.6] [--repeat 101]
        [--python PY] [--target-root DIR]

Each release is installed with ``uv pip install --no-deps --target DIR/lmcache-V lmcache==V``
(reused when present) and imported from there by ``--python`` (default: this interpreter),
which must have the adapter module's own imports (torch, zmq, msgspec...; the mp-servers
tier's venvs do). Both sides are the release's real class built without its ``__init__``
(``tools/mp_worker_shell.py``: no server; the transfer's ``submit_retrieve`` hands out the
release's own ``MessagingFuture``). Every retrieve goes in through the path vLLM's calls take:
the release's own ``submit_retrieve_request``, and ours through ``MPWorkerAdapter``'s tracked
submit. Two paths, each timed for both sides over the same kind of futures:

* ``at submit``: the future resolved before the submit returned (CPU transfer): our tracker
  judges it at submit;
* ``later``: resolved after the submit returned, before the timed step: our tracker judges it
  on the pass that reports it finished (the costly path).

Prints the median of each, the ratios ours/release's and ``os.getloadavg()`` before and after;
exits 1 if any ratio is above 1.1 (``--limit``).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

SIZES = (1, 64, 1024)
PATHS = ("at_submit", "later")
LIMIT = 1.1


def child(version: str, repeat: int) -> dict[str, Any]:
    import lmcache

    from lmcache_compat import MPWorkerAdapter
    from lmcache_compat.upstream import locations as loc
    from lmcache_compat.upstream.resolve import find
    from tools.mp_worker_shell import worker_without_server

    cls = find(loc.MP_WORKER)
    module = sys.modules[cls.__module__]
    where = str(Path(module.__file__ or "").resolve())
    if version not in where:  # the --target install, not another lmcache on the path
        raise SystemExit(f"lmcache {version}: imported {where} ({lmcache.__file__})")
    future_cls = vars(module)["MessagingFuture"]  # the module's own import

    own, own_transfer = worker_without_server(cls)
    raw, our_transfer = worker_without_server(cls)
    ours = MPWorkerAdapter(raw)
    if ours.retrieve_ledger is None:
        raise SystemExit("MPWorkerAdapter tracks no retrieve here: nothing to measure")
    op = ours.make_load_store_op(list(range(16)), list(range(256)))
    sides = {
        "own": (own.submit_retrieve_request, own.get_finished, own.get_block_ids_with_load_errors),
        "ours": (
            ours.submit_retrieve_request,
            ours.get_finished,
            ours.get_block_ids_with_load_errors,
        ),
    }
    transfers = {"own": own_transfer, "ours": our_transfer}

    def fill(side: str, n: int, path: str) -> list[Any]:
        submit = sides[side][0]
        futures = [future_cls() for _ in range(n)]
        if path == "at_submit":
            for f in futures:
                f.set_result(True)
        transfers[side].queue.extend(futures)
        for i in range(n):
            submit(f"r{i}", op, None)
        if path == "later":
            for f in futures:
                f.set_result(True)
        return futures

    def step(side: str) -> tuple[float, set[str], set[int]]:
        _, finished, errors = sides[side]
        t0 = time.perf_counter()
        _, done = finished(set())
        failed = errors()
        elapsed = time.perf_counter() - t0
        return elapsed, set(done or ()), failed

    out: dict[str, Any] = {}
    for n in SIZES:
        times: dict[tuple[str, str], list[float]] = {(s, p): [] for s in sides for p in PATHS}
        for rep in range(repeat):
            for path in PATHS:
                order = ("own", "ours") if rep % 2 == 0 else ("ours", "own")
                for side in order:
                    gc.collect()  # before the fill: no collection inside the timed step
                    gc.disable()
                    try:
                        fill(side, n, path)
                        elapsed, done, failed = step(side)
                    finally:
                        gc.enable()
                    if len(done) != n or failed:  # every retrieve finished, none failed
                        raise SystemExit(f"{side} {path} N={n}: {len(done)} done, {failed}")
                    times[side, path].append(elapsed)
        row: dict[str, Any] = {}
        for path in PATHS:
            own_s = statistics.median(times["own", path])
            ours_s = statistics.median(times["ours", path])
            row[path] = {
                "own_us": round(own_s * 1e6, 2),
                "ours_us": round(ours_s * 1e6, 2),
                "ratio": round(ours_s / own_s, 3),
            }
        out[str(n)] = row
    return out


def worst_ratio(rows: dict[str, Any]) -> float:
    """The largest ratio ours/release's over every release, N and path (both paths count)."""
    return max(
        float(r[path]["ratio"]) for by_n in rows.values() for r in by_n.values() for path in PATHS
    )


def install(version: str, root: Path, python: str) -> Path:
    target = root / f"lmcache-{version}"
    if not (target / "lmcache").is_dir():
        from tools.uv_install import uv_install

        uv_install(f"lmcache=={version}", python=python, target=target, compile_bytecode=False)
    return target


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--releases", nargs="+", default=["0.5.4", "0.5.6"])
    parser.add_argument("--repeat", type=int, default=101)
    parser.add_argument("--python", default=sys.executable, help="interpreter with torch, zmq")
    parser.add_argument(
        "--target-root",
        type=Path,
        default=Path("/tmp/lmcache-compat-bench-releases"),
        help="where each release is installed with --target (reused)",
    )
    parser.add_argument("--limit", type=float, default=LIMIT)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print("RESULT " + json.dumps(child(args.child, args.repeat)))
        return 0

    rows: dict[str, Any] = {}
    loads: dict[str, Any] = {"before": os.getloadavg()}
    for release in args.releases:
        target = install(release, args.target_root, args.python)
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(target), str(REPO)]),
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        proc = subprocess.run(
            [args.python, __file__, "--child", release, "--repeat", str(args.repeat)],
            capture_output=True,
            text=True,
            env=env,
            timeout=1800,
            check=False,
        )
        line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
        if line is None:
            print(f"{release}: failed (exit {proc.returncode})\n{proc.stderr[-3000:]}")
            return 2
        rows[release] = json.loads(line[len("RESULT ") :])
        loads[release] = os.getloadavg()
    load = loads[args.releases[-1]]
    before = loads["before"]
    print(
        f"load average (1, 5, 15 min) before: {before[0]:.2f} {before[1]:.2f} {before[2]:.2f}; "
        f"after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} ({os.cpu_count()} CPUs)"
    )
    print(
        f"medians over {args.repeat} steps; ratio = ours / the release's own; limit {args.limit}x"
    )
    print("release      N | at submit: own us  ours us  ratio | later: own us  ours us  ratio")
    for release, by_n in rows.items():
        for n, r in by_n.items():
            a, b = r["at_submit"], r["later"]
            print(
                f"{release:8} {n:>5} | {a['own_us']:>15} {a['ours_us']:>8} {a['ratio']:>6.3f} |"
                f" {b['own_us']:>12} {b['ours_us']:>8} {b['ratio']:>6.3f}"
            )
    print(json.dumps({"load": loads, "repeat": args.repeat, "rows": rows}))
    worst = worst_ratio(rows)
    print(f"worst ratio {worst:.3f}x: {'within' if worst <= args.limit else 'ABOVE'} {args.limit}x")
    return 0 if worst <= args.limit else 1


if __name__ == "__main__":
    raise SystemExit(main())
