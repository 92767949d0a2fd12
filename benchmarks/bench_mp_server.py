"""Lookup round trip against a REAL LMCache MP server: our MPSchedulerAdapter / the release's own
LMCacheMPSchedulerAdapter, measured in the same run, on the same server, alternating.

    python benchmarks/bench_mp_server.py [--rounds N] [--releases 0.5.6 0.5.7rc2] [--venvs DIR]

One round trip = ``lookup`` (ours) or ``maybe_submit_lookup_request`` (theirs, with the
release's own token packing where it takes bytes), then ``check_lookup_result`` polled every
0.1 ms until it is not None, then ``cleanup_lookup_result``; 512 tokens: first misses (nothing stored; on releases
with a health property our ``check_lookup_result`` also reads ``is_healthy`` for that 0), then
hits (a CPU worker stored the tokens, where the server has a CPU transfer mode). The server runs on 127.0.0.1 (``tests/tiers/mp_server/server.py``) from the release's venv
(``tests/tiers/mp_server/venvs.py``, built with uv if missing). Ratios of medians and of minima.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.tiers.mp_server.server import inspect_release, mp_server
from tests.tiers.mp_server.survey import transfer_flags
from tests.tiers.mp_server.tier import L1_SIZE_GB, MQ_TIMEOUT, Budget, run_client
from tests.tiers.mp_server.venvs import ensure_venv

GOAL = 1.10  # our adapter adds microseconds to a round trip of about a millisecond


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--rounds", type=int, default=400)
    ap.add_argument("--releases", nargs="+", default=["0.5.6", "0.5.7rc2"])
    ap.add_argument("--venvs", type=Path, default=Path("/tmp/lmcache-compat-mp-venvs"))
    args = ap.parse_args()
    budget = Budget(1800.0)
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-mp-server-") as tmp:
        for version in args.releases:
            python = ensure_venv(version, args.venvs)
            release = inspect_release(python)
            flags = transfer_flags(release)
            with mp_server(
                release, Path(tmp) / version, l1_size_gb=L1_SIZE_GB, extra_args=flags or ()
            ) as server:
                spec = {
                    "mode": "bench",
                    "url": server.url,
                    "mq_timeout": MQ_TIMEOUT,
                    "poll_timeout": 20.0,
                    "rounds": args.rounds,
                    "worker": flags is not None,
                }
                out = run_client(python, spec, server.client_env(), budget)
            steps = out.get("steps", {})
            if "fatal" in out or not all(step.get("ok") for step in steps.values()):
                print(f"{version}: failed: {out}", file=sys.stderr)
                return 2
            for kind in ("miss", "hit"):
                if f"bench_{kind}" in steps:
                    rows.append((version, kind, steps[f"bench_{kind}"]))
    print(f"lookup round trip on a real server, {args.rounds} rounds per side, alternating\n")
    print(
        f"{'release':<10} {'lookup':<9} {'ours med us':>12} {'own med us':>11} {'ratio':>6}  "
        f"{'ours min us':>12} {'own min us':>11} {'ratio':>6} {'goal':>6}"
    )
    missed = 0
    for version, kind, b in rows:
        ratio = b["ratio_median"]
        missed += ratio > GOAL
        label = f"{kind} ({b['hits_ours']})"
        print(
            f"{version:<10} {label:<9} {b['ours_median_us']:12.1f} {b['own_median_us']:11.1f} "
            f"{ratio:6.3f}  {b['ours_min_us']:12.1f} {b['own_min_us']:11.1f} "
            f"{b['ratio_min']:6.3f} {'<=' + str(GOAL):>6} {'ok' if ratio <= GOAL else 'MISSED'}"
        )
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
