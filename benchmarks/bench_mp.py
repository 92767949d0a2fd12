"""MP and engine adapter overhead, as ratios against direct calls measured in the same run.

    python benchmarks/bench_mp.py [--number N] [--repeat R]

Uses fakes generated from the shipped matrix rows (0.5.6 and 0.4.1 shapes), whose methods do
nothing but record the call, so the ratios show what the adapter adds.
"""

from __future__ import annotations

import argparse
import sys
import timeit
from pathlib import Path
from typing import Any, ClassVar

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lmcache_compat import EngineAdapter, MPSchedulerAdapter, MPWorkerAdapter
from lmcache_compat.upstream.matrix import load_matrix
from tests.support.generated_fakes import fake_module, instantiate


class Quiet:
    """Replaces the fakes' recording with nothing, so only call overhead is measured."""

    EMPTY: ClassVar[set[int]] = set()  # never mutated

    @staticmethod
    def patch(obj: Any) -> Any:
        obj._called = lambda name, *a, **k: Quiet.EMPTY
        return obj


def best(stmt: str, env: dict[str, Any], number: int, repeat: int) -> float:
    return min(timeit.repeat(stmt, globals=env, number=number, repeat=repeat)) / number


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--number", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    m = load_matrix()
    new, old = fake_module(m.row("0.5.6")), fake_module(m.row("0.4.1"))
    s_new = Quiet.patch(instantiate(new.LMCacheMPSchedulerAdapter))
    s_old = Quiet.patch(instantiate(old.LMCacheMPSchedulerAdapter))
    w_new = Quiet.patch(instantiate(new.LMCacheMPWorkerAdapter))
    w_old = Quiet.patch(instantiate(old.LMCacheMPWorkerAdapter))
    e_new = Quiet.patch(instantiate(new.LMCacheEngine))

    class Plain:
        def get_kv_events(self) -> list[Any]:
            return []

        def end_session(self, request_id: str) -> None:
            return None

    s_hit = instantiate(new.LMCacheMPSchedulerAdapter)
    s_hit._called = lambda name, *a, **k: 256  # type: ignore[method-assign]  # a hit
    env = {
        "s": s_new,
        "sa": MPSchedulerAdapter(s_new),
        "h": s_hit,
        "ha": MPSchedulerAdapter(s_hit),
        "so": MPSchedulerAdapter(s_old),
        "w": w_new,
        "wa": MPWorkerAdapter(w_new),
        "wo": MPWorkerAdapter(w_old),
        "e": e_new,
        "ea": EngineAdapter(e_new),
        "plain": Plain(),
        "toks": [1, 2, 3, 4],
    }
    rows = [
        (
            "check_lookup_result (hit): adapter / own bound method",
            "ha.check_lookup_result('r')",
            "h.check_lookup_result('r')",
            1.6,
        ),
        (
            "check_lookup_result (0 hits: reads is_healthy): adapter / own",
            "sa.check_lookup_result('r')",
            "s.check_lookup_result('r')",
            2.0,
        ),
        (
            "lookup (0.5.6, salt): adapter / maybe_submit_lookup_request",
            "sa.lookup('r', toks, cache_salt='t')",
            "s.maybe_submit_lookup_request('r', toks, cache_salt='t')",
            1.6,
        ),
        (
            "worker get_block_ids_with_load_errors: adapter / getattr+callable",
            "wa.get_block_ids_with_load_errors()",
            "guarded(w)",
            1.15,
        ),
        (
            "worker submit_store_request: adapter / own",
            "wa.submit_store_request('r', 1, 2)",
            "w.submit_store_request('r', 1, 2)",
            1.6,
        ),
        (
            "fallback get_kv_events (0.4.1) / plain method returning []",
            "wo.get_kv_events()",
            "plain.get_kv_events()",
            1.2,
        ),
        (
            "end_session (present on 0.4.1): adapter / own bound method",
            "so.end_session('r')",
            "s_old_end('r')",
            1.6,
        ),
        (
            "engine lookup(lookup_id=): adapter / own",
            "ea.lookup(toks, lookup_id='q')",
            "e.lookup(toks, lookup_id='q')",
            1.6,
        ),
    ]
    env["s_old_end"] = s_old.end_session

    def guarded(obj: Any) -> Any:  # how vLLM's connectors call an optional method today
        method = getattr(obj, "get_block_ids_with_load_errors", None)
        if callable(method):
            return method()
        return set()

    env["guarded"] = guarded
    print(f"Python {sys.version.split()[0]}; best of {args.repeat} x {args.number:,} calls each\n")
    print(f"{'measurement':<66} {'ours ns':>8} {'base ns':>8} {'ratio':>6} {'goal':>6}")
    missed = 0
    for label, ours, base, goal in rows:
        t_base = best(base, env, args.number, args.repeat)
        t_ours = best(ours, env, args.number, args.repeat)
        t_base = min(t_base, best(base, env, args.number, args.repeat))
        ratio = t_ours / t_base
        missed += ratio > goal
        print(
            f"{label:<66} {t_ours * 1e9:8.1f} {t_base * 1e9:8.1f} {ratio:6.2f} "
            f"{'<=' + str(goal):>6} {'ok' if ratio <= goal else 'MISSED'}"
        )
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
