"""The whole ``lmcache-compat doctor`` process beside real LMCache 0.5.6 and vLLM 0.32.0, against
the interpreter's own start-up in the same venv.

    python benchmarks/bench_doctor.py [--repeat 15] [--venv DIR] [--profile]

The venv (default ``~/.cache/lmcache-compat/bench-doctor``; made once, reused while the pins are
unchanged) holds vLLM 0.32.0's CPU recipe (``tests/tiers/real/constraints/vllm-0.32.0-cpu.txt``,
``--no-deps``; torch 2.13.0's CPU build from ``/opt/wheels`` where it lies) and LMCache 0.5.6
(``--no-deps``), installed with uv as the grid tiers do; this checkout runs on ``PYTHONPATH``
with its bytecode compiled, as an installed copy would. ``doctor`` imports neither vLLM nor
LMCache: it reads their metadata and files (the installed LMCache's Python files are hashed and,
being exactly 0.5.6's, answered from its shipped row).

In the same run, alternating: ``python -c pass`` (the floor) and ``python -m lmcache_compat
doctor`` (and ``--json``). Prints the machine's load, the medians and the ratios. Goal (issue
27): at most 300 ms and at most 18x; exit 1 when missed. ``--profile``: ``-X importtime``'s top
modules and cProfile's top functions of one run.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import pstats
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench_scan_process import CACHE, load, timed

ROOT = Path(__file__).resolve().parent.parent
CONSTRAINTS = ROOT / "tests" / "tiers" / "real" / "constraints" / "vllm-0.32.0-cpu.txt"
LMCACHE = "lmcache==0.5.6"
GOAL_MS, GOAL_RATIO = 300.0, 18.0


def venv(where: Path) -> Path:
    """The benchmark's venv with vLLM 0.32.0's recipe and LMCache 0.5.6 (rebuilt when the pins
    change)."""
    python = where / "bin" / "python"
    stamp = where / "pins.sha256"
    pins = hashlib.sha256(CONSTRAINTS.read_bytes() + LMCACHE.encode()).hexdigest()
    if python.exists() and stamp.exists() and stamp.read_text() == pins:
        return python
    env = {**os.environ, "UV_FIND_LINKS": os.environ.get("UV_FIND_LINKS", "/opt/wheels")}
    subprocess.run(["uv", "venv", "--quiet", "--python", sys.executable, str(where)], check=True)
    for spec in (["-r", str(CONSTRAINTS)], [LMCACHE]):
        argv = ["uv", "pip", "install", "--quiet", "--python", str(python), "--no-deps", *spec]
        subprocess.run(argv, check=True, env=env)
    stamp.write_text(pins)
    return python


def profile(python: Path, env: dict[str, str]) -> None:
    done = subprocess.run(
        [str(python), "-X", "importtime", "-m", "lmcache_compat", "doctor"],
        check=False,
        env=env,
        capture_output=True,
        text=True,
    )
    rows = [line.split("|") for line in done.stderr.splitlines() if line.count("|") == 2]
    rows = [r for r in rows if r[1].strip().isdigit()]
    print("\n-X importtime (cumulative us, module), top 15:")
    for _self, cumulative, name in sorted(rows, key=lambda r: -int(r[1]))[:15]:
        print(f"  {int(cumulative):7d}  {name.rstrip()}")
    out = Path(env.get("TMPDIR", "/tmp")) / "bench-doctor.prof"
    subprocess.run(
        [str(python), "-m", "cProfile", "-o", str(out), "-m", "lmcache_compat", "doctor"],
        check=False,
        env=env,
        capture_output=True,
    )
    print("\ncProfile (cumulative), top 25:")
    pstats.Stats(str(out)).sort_stats("cumulative").print_stats(25)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--venv", type=Path, default=CACHE / "bench-doctor")
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    python = venv(args.venv)
    base = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    bare = {**base, "PYTHONDONTWRITEBYTECODE": "1"}
    env = {**base, "PYTHONPATH": str(ROOT), "PYTHONDONTWRITEBYTECODE": ""}
    subprocess.run(
        [str(python), "-m", "compileall", "-q", str(ROOT / "lmcache_compat")], check=True
    )
    versions = subprocess.run(
        [str(python), "-m", "lmcache_compat", "doctor", "--json"],
        check=False,
        env=env,
        capture_output=True,
        text=True,
    )
    if '"vllm": "0.32.0"' not in versions.stdout or '"lmcache": "0.5.6"' not in versions.stdout:
        sys.exit(f"the venv does not hold vLLM 0.32.0 and LMCache 0.5.6:\n{versions.stdout[:400]}")
    commands = {
        "doctor": [str(python), "-m", "lmcache_compat", "doctor"],
        "doctor --json": [str(python), "-m", "lmcache_compat", "doctor", "--json"],
    }
    print(f"Python {sys.version.split()[0]}; vLLM 0.32.0 + LMCache 0.5.6 in {args.venv}")
    print(f"median of {args.repeat} alternating runs each; before: {load()}")
    print(f"goal: doctor <= {GOAL_MS:.0f} ms and <= {GOAL_RATIO:.0f}x python -c pass\n")
    times: dict[str, list[float]] = {"pass": [], **{k: [] for k in commands}}
    for _ in range(args.repeat):
        times["pass"].append(timed([str(python), "-c", "pass"], bare))
        for name, argv in commands.items():
            start = time.perf_counter()
            subprocess.run(argv, env=env, capture_output=True, check=False)  # 1: a broken pair
            times[name].append(time.perf_counter() - start)
    med = {k: statistics.median(v) * 1000 for k, v in times.items()}
    print(f"{'python -c pass':<16} {med['pass']:7.1f} ms")
    ok = True
    for name in commands:
        ratio = med[name] / med["pass"]
        good = med[name] <= GOAL_MS and ratio <= GOAL_RATIO
        ok &= good or name != "doctor"
        print(f"{name:<16} {med[name]:7.1f} ms ({ratio:4.1f}x){'' if good else '!'}")
    print(f"\nafter: {load()}\n(Nx: against python -c pass in the same run; !: over the goal)")
    if args.profile:
        profile(python, env)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
