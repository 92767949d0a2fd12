"""The whole ``lmcache-compat scan`` process, per release, against the interpreter's own start-up.

    python benchmarks/bench_scan_process.py [--releases 0.3.5 0.5.6 0.5.7rc2] [--repeat 15]

For each release, its artifact is fetched into the maintainer cache
(``~/.cache/lmcache-compat/artifacts``, sha256 checked against the shipped matrix). The runs use a
clean venv (``~/.cache/lmcache-compat/bench-venv``: this interpreter's Python with ``packaging``
only, no ``.pth`` of any other project) and this checkout on ``PYTHONPATH``. In the same run,
alternating: ``python -c pass`` in that venv (the interpreter's start-up, the floor) and
``python -m lmcache_compat scan ARTIFACT --json`` (the whole process, start-up included) with the
package's bytecode cached (an installed copy), without it (a tox env: uv installs no bytecode,
tox.ini sets ``PYTHONDONTWRITEBYTECODE``), and without it forcing a re-read (``--rescan``,
shown, not a goal). A published artifact is answered from its own release's shipped file: the
artifact is hashed (the 17.6 MB 0.5.6 wheel: about 12 ms, counted), the matrix's index and that
one file read; the scanner and the matrix's model are not imported.

Prints the machine's load, the medians and the ratios. Goal (issue 27): the whole scan process
at most 100 ms and at most 6x ``python -c pass``, with bytecode cached; exit 1 when missed.
Profile one run with ``python -X importtime`` or ``-m cProfile`` (``--profile``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lmcache_compat.upstream.shipped import release_index  # noqa: E402
from tools.index import download, find_file, sha256_of  # noqa: E402

CACHE = Path.home() / ".cache" / "lmcache-compat"
GOAL_MS, GOAL_RATIO = 100.0, 6.0


def artifact(version: str) -> Path:
    (entry,) = (e for e in release_index()["releases"] if e["version"] == version)
    path: Path = CACHE / "artifacts" / str(entry["artifact"])
    if not (path.exists() and sha256_of(path) == entry["sha256"]):  # the index is asked only then
        download(find_file("lmcache", entry["artifact"]), path, sha256=entry["sha256"])
    return path


def clean_venv(where: Path, *requirements: str) -> Path:
    """A venv of this interpreter with ``requirements`` (made once, then reused)."""
    python = where / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(where)], check=True)
        if requirements:
            pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
            subprocess.run([*pip, *requirements], check=True)
    return python


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f}, {five:.2f}, {fifteen:.2f} on {os.cpu_count()} CPUs"


def timed(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, check=True, env=env, capture_output=True)
    return time.perf_counter() - start


def bytecode_free_copy() -> Path:
    """A copy of the package with no ``__pycache__``: run with ``PYTHONDONTWRITEBYTECODE=1`` it
    compiles every module it imports on every run, as in a tox env."""
    dest = Path(tempfile.mkdtemp(prefix="bench-scan-")) / "lmcache_compat"
    shutil.copytree(ROOT / "lmcache_compat", dest, ignore=shutil.ignore_patterns("__pycache__"))
    return dest.parent


def cell(ms: float, floor: float, goal: bool) -> str:
    ok = ms <= GOAL_MS and ms / floor <= GOAL_RATIO
    return f"{ms:7.1f} ms ({ms / floor:4.1f}x){'' if ok or not goal else '!'}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--releases", nargs="+", default=["0.3.5", "0.4.7", "0.5.6", "0.5.7rc2"])
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--profile", action="store_true", help="also print -X importtime's top 15")
    args = ap.parse_args()
    python = [str(clean_venv(CACHE / "bench-venv", "packaging"))]
    base = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    cached = {**base, "PYTHONPATH": str(ROOT), "PYTHONDONTWRITEBYTECODE": ""}
    bare_env = {**base, "PYTHONDONTWRITEBYTECODE": "1"}
    nobc = {**bare_env, "PYTHONPATH": str(bytecode_free_copy())}
    # warm the bytecode caches of lmcache_compat once, as an installed copy would have them
    subprocess.run([*python, "-m", "compileall", "-q", str(ROOT / "lmcache_compat")], check=True)
    modes = {
        "bytecode cached": (cached, []),
        "no bytecode": (nobc, []),
        "no bytecode, --rescan": (nobc, ["--rescan"]),
    }
    print(f"Python {sys.version.split()[0]}; median of {args.repeat} alternating runs each")
    print(f"before: {load()}")
    print(f"goal: the whole scan process <= {GOAL_MS:.0f} ms and <= {GOAL_RATIO:.0f}x, cached\n")
    print(f"{'release':<10} {'python -c pass':>15}" + "".join(f" {m:>22}" for m in modes))
    ok = True
    for version in args.releases:
        target = str(artifact(version))
        times: dict[str, list[float]] = {"pass": [], **{m: [] for m in modes}}
        for _ in range(args.repeat):
            times["pass"].append(timed([*python, "-c", "pass"], bare_env))
            for mode, (env, extra) in modes.items():
                argv = [*python, "-m", "lmcache_compat", "scan", target, "--json", *extra]
                times[mode].append(timed(argv, env))
        med = {k: statistics.median(v) * 1000 for k, v in times.items()}
        good = med["bytecode cached"] <= GOAL_MS
        good &= med["bytecode cached"] / med["pass"] <= GOAL_RATIO
        ok &= good
        cells = [cell(med[m], med["pass"], m == "bytecode cached") for m in modes]
        print(f"{version:<10} {med['pass']:12.1f} ms" + "".join(f" {c:>22}" for c in cells))
    print(f"\nafter: {load()}")
    print("(Nx: against python -c pass in the same run; !: over the goal)")
    if args.profile:
        target = str(artifact(args.releases[-1]))
        done = subprocess.run(
            [*python, "-X", "importtime", "-m", "lmcache_compat", "scan", target, "--json"],
            env=cached,
            capture_output=True,
            text=True,
            check=True,
        )
        rows = [line.split("|") for line in done.stderr.splitlines()[1:] if "|" in line]
        top = sorted(rows, key=lambda r: -int(r[1]))[:15]
        print(f"\n-X importtime, {args.releases[-1]} (cumulative us, module):")
        for _self, cumulative, name in top:
            print(f"  {int(cumulative):7d}  {name.rstrip()}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
