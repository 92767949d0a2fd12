"""The whole ``lmcache-compat scan`` process, per release, against the interpreter's own start-up.

    python benchmarks/bench_scan_process.py [--releases 0.3.5 0.5.6 0.5.7rc2] [--repeat 15]

For each release, its artifact is fetched into the maintainer cache
(``~/.cache/lmcache-compat/artifacts``, sha256 checked against the shipped matrix), then in the
same run, alternating: ``python -c pass`` (the interpreter's start-up, the floor) and
``python -m lmcache_compat scan ARTIFACT --json`` (the whole scan process, interpreter start-up
included). Prints the medians, the scan's own cost (the difference) and the ratio. Goal: the
whole scan process under 150 ms per release. Needs nothing but this checkout and the network
once (or a warm cache).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lmcache_compat.upstream.matrix import load_matrix  # noqa: E402
from tests.support.index import download, find_file, sha256_of  # noqa: E402

CACHE = Path.home() / ".cache" / "lmcache-compat" / "artifacts"
GOAL_MS = 150.0


def artifact(version: str) -> Path:
    row = load_matrix().row(version)
    path = CACHE / row.artifact
    if not (path.exists() and sha256_of(path) == row.sha256):  # the index is asked only then
        download(find_file("lmcache", row.artifact), path, sha256=row.sha256)
    return path


def timed(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, check=True, env=env, capture_output=True)
    return time.perf_counter() - start


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--releases", nargs="+", default=["0.3.5", "0.4.7", "0.5.6", "0.5.7rc2"])
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONDONTWRITEBYTECODE": "0"}
    python = [sys.executable]
    # warm the bytecode caches of lmcache_compat once, as an installed copy would have them
    subprocess.run([*python, "-m", "lmcache_compat", "--version"], check=True, env=env)
    print(f"Python {sys.version.split()[0]}; median of {args.repeat} alternating runs each\n")
    print(
        f"{'release':<10} {'python -c pass':>15} {'scan process':>13} {'scan cost':>10} "
        f"{'ratio':>6}   goal"
    )
    ok = True
    for version in args.releases:
        target = str(artifact(version))
        bare, whole = [], []
        for _ in range(args.repeat):
            bare.append(timed([*python, "-c", "pass"], env))
            whole.append(timed([*python, "-m", "lmcache_compat", "scan", target, "--json"], env))
        b, w = statistics.median(bare) * 1000, statistics.median(whole) * 1000
        good = w < GOAL_MS
        ok &= good
        print(
            f"{version:<10} {b:12.1f} ms {w:10.1f} ms {w - b:7.1f} ms {w / b:6.2f}   "
            f"< {GOAL_MS:.0f} ms {'ok' if good else 'MISSED'}"
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
