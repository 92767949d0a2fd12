"""MP and engine adapter overhead, as ratios against direct calls measured in the same run.

    python benchmarks/bench_mp.py [--number N] [--repeat R]

Uses fakes generated from the shipped matrix rows (0.5.6 and 0.4.1 shapes), whose methods do
nothing but record the call, so the ratios show what the adapter adds. Each release is measured
in its own process, as it runs in every deployment (one LMCache release per process): CPython
shares one instance-attribute layout per class, and adapters over two releases in one process
would share a layout that neither has alone.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import timeit
from pathlib import Path
from typing import Any, ClassVar

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lmcache_compat import EngineAdapter, MPSchedulerAdapter, MPWorkerAdapter
from lmcache_compat.upstream.matrix import load_matrix
from tools.generated_fakes import fake_module, instantiate


class Quiet:
    """Replaces the fakes' recording with nothing, so only call overhead is measured."""

    EMPTY: ClassVar[set[int]] = set()  # never mutated

    @staticmethod
    def patch(obj: Any) -> Any:
        obj._called = lambda name, *a, **k: Quiet.EMPTY
        return obj


class Plain:
    def get_kv_events(self) -> list[Any]:
        return []


def guarded(obj: Any) -> Any:  # how vLLM's connectors call an optional method today
    method = getattr(obj, "get_block_ids_with_load_errors", None)
    if callable(method):
        return method()
    return set()


#: (release, label, ours, base, goal)
ROWS = (
    ("0.5.6", "check_lookup_result (hit): adapter / own bound method",
     "ha.check_lookup_result('r')", "h.check_lookup_result('r')", 1.6),
    ("0.5.6", "check_lookup_result (0 hits: reads is_healthy): adapter / own",
     "sa.check_lookup_result('r')", "s.check_lookup_result('r')", 2.0),
    ("0.5.6", "lookup (0.5.6, salt): adapter / maybe_submit_lookup_request",
     "sa.lookup('r', toks, cache_salt='t')",
     "s.maybe_submit_lookup_request('r', toks, cache_salt='t')", 1.6),
    ("0.5.6", "worker get_block_ids_with_load_errors: adapter / getattr+callable",
     "wa.get_block_ids_with_load_errors()", "guarded(w)", 1.15),
    ("0.5.6", "worker submit_store_request: adapter / own",
     "wa.submit_store_request('r', 1, 2)", "w.submit_store_request('r', 1, 2)", 1.6),
    ("0.5.6", "engine lookup(lookup_id=): adapter / own",
     "ea.lookup(toks, lookup_id='q')", "e.lookup(toks, lookup_id='q')", 1.6),
    ("0.4.1", "fallback get_kv_events (0.4.1) / plain method returning []",
     "wa.get_kv_events()", "plain.get_kv_events()", 1.2),
    ("0.4.1", "end_session (present on 0.4.1): adapter / own bound method",
     "sa.end_session('r')", "own_end('r')", 1.6),
)  # fmt: skip


def environment(release: str) -> dict[str, Any]:
    """Adapters over the fakes of one release (and what they are compared with)."""
    mod = fake_module(load_matrix().row(release))
    s = Quiet.patch(instantiate(mod.LMCacheMPSchedulerAdapter))
    w = Quiet.patch(instantiate(mod.LMCacheMPWorkerAdapter))
    e = Quiet.patch(instantiate(mod.LMCacheEngine))
    hit = instantiate(mod.LMCacheMPSchedulerAdapter)
    hit._called = lambda name, *a, **k: 256  # type: ignore[method-assign]  # a hit
    return {
        "s": s,
        "sa": MPSchedulerAdapter(s),
        "h": hit,
        "ha": MPSchedulerAdapter(hit),
        "w": w,
        "wa": MPWorkerAdapter(w),
        "e": e,
        "ea": EngineAdapter(e),
        "plain": Plain(),
        "toks": [1, 2, 3, 4],
        "guarded": guarded,
        "own_end": s.end_session,
    }


def best(stmt: str, env: dict[str, Any], number: int, repeat: int) -> float:
    return min(timeit.repeat(stmt, globals=env, number=number, repeat=repeat)) / number


def measure(release: str, number: int, repeat: int) -> list[tuple[str, float, float, float]]:
    """``(label, ours, base, goal)`` for the rows of one release, in this process."""
    env = environment(release)
    out = []
    for row_release, label, ours, base, goal in ROWS:
        if row_release != release:
            continue
        t_base = best(base, env, number, repeat)
        t_ours = best(ours, env, number, repeat)
        t_base = min(t_base, best(base, env, number, repeat))
        out.append((label, t_ours, t_base, goal))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--number", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--release", help="measure only this release's rows here (print JSON)")
    args = ap.parse_args()
    if args.release:
        print(json.dumps(measure(args.release, args.number, args.repeat)))
        return 0
    print(f"Python {sys.version.split()[0]}; best of {args.repeat} x {args.number:,} calls each")
    print("(each release in its own process)\n")
    print(f"{'measurement':<66} {'ours ns':>8} {'base ns':>8} {'ratio':>6} {'goal':>6}")
    missed = 0
    for release in dict.fromkeys(r[0] for r in ROWS):
        done = subprocess.run(
            [sys.executable, __file__, "--release", release, "--number", str(args.number),
             "--repeat", str(args.repeat)],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        for label, t_ours, t_base, goal in json.loads(done.stdout):
            ratio = t_ours / t_base
            missed += ratio > goal
            print(
                f"{label:<66} {t_ours * 1e9:8.1f} {t_base * 1e9:8.1f} {ratio:6.2f} "
                f"{'<=' + str(goal):>6} {'ok' if ratio <= goal else 'MISSED'}"
            )
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
