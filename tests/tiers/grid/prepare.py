"""commands_pre of each ``grid-vllmX`` tox env: install vLLM X's CPU recipe and every LMCache
wheel release, then check what got installed.

    python -m tests.tiers.grid.prepare ENV_NAME RELEASES_DIR

1. ``uv pip install --no-deps -r tests/tiers/real/constraints/vllm-X-cpu.txt`` into this
interpreter's
   venv (torch 2.13.0's CPU build comes from ``UV_FIND_LINKS``, set by tox.ini: never a CUDA
   download; the run fails if any other torch build got in);
2. the installed vLLM must be X and torch 2.13.0's CPU build;
3. every LMCache wheel release of the shipped matrix
(``lmcache_compat/upstream/data/releases/``:
   0.3.1 ... 0.5.7rc2) with ``uv pip install --no-deps --target RELEASES_DIR/V lmcache==V``,
   once: a target that already holds the release is kept (uv hardlinks from its cache).

Prints the wall time of each part.
"""

from __future__ import annotations

import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from importlib import metadata
from pathlib import Path

from tools import lmcache_targets
from tools.paths import vllm_constraints
from tools.uv_install import uv_install

ROOT = Path(__file__).resolve().parents[3]
PREFIX = "grid-vllm"
#: The --target installs (``tools/lmcache_targets.py``), read by the serve tier as this module's.
install_release = lmcache_targets.install_release
release_installed = lmcache_targets.release_installed
TORCH = "2.13.0"


def vllm_of(env_name: str) -> str:
    if not env_name.startswith(PREFIX):
        raise SystemExit(f"{env_name}: not a grid-vllmX tox env")
    return env_name[len(PREFIX) :]


def constraints_file(vllm: str) -> Path:
    return vllm_constraints(vllm)


def wheel_releases() -> list[str]:
    """Every LMCache release of the shipped matrix that has a wheel (0.3.0 ships an sdist
    only, whose build compiles CUDA extensions)."""
    from lmcache_compat.upstream.matrix import load_matrix

    return [r.version for r in load_matrix().rows if r.artifact.endswith(".whl")]


def check_versions(vllm: str) -> str:
    """The installed vLLM must be ``vllm``, torch 2.13.0's CPU build; returns a summary."""
    installed = metadata.version("vllm")
    torch = metadata.version("torch")
    if installed != vllm:
        raise SystemExit(f"installed vLLM is {installed}, this tier is vLLM {vllm}")
    if torch != f"{TORCH}+cpu":
        raise SystemExit(f"installed torch is {torch}, not {TORCH}'s CPU build ({TORCH}+cpu)")
    return f"vLLM {installed}, torch {torch}"


def main(env_name: str, releases_dir: str) -> int:
    vllm = vllm_of(env_name)
    if not os.environ.get("UV_FIND_LINKS"):
        raise SystemExit("UV_FIND_LINKS is unset: uv would download a CUDA build of torch")
    start = time.perf_counter()
    uv_install(requirements=constraints_file(vllm))
    print(f"grid prepare: {check_versions(vllm)} ({time.perf_counter() - start:.1f} s)")
    start = time.perf_counter()
    dest = Path(releases_dir)
    dest.mkdir(parents=True, exist_ok=True)
    releases = wheel_releases()
    fresh = [v for v in releases if not release_installed(dest / v, v)]
    with ThreadPoolExecutor(max_workers=4) as pool:  # mostly downloads and hardlinks
        list(pool.map(lambda v: install_release(v, dest), fresh))
    print(
        f"grid prepare: {len(releases)} LMCache releases under {dest} "
        f"({len(fresh)} installed now, {time.perf_counter() - start:.1f} s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
