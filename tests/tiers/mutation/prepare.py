"""commands_pre of the ``mutation`` tox env: the newest measured vLLM grid tier's CPU recipe and
the newest LMCache release of the shipped matrix (pre-releases included), nothing else.

    python -m tests.tiers.mutation.prepare RELEASES_DIR

installs vLLM with :mod:`tests.tiers.grid.prepare`'s recipe (torch's CPU build from
``UV_FIND_LINKS``), then ``uv pip install --no-deps --target RELEASES_DIR/V lmcache==V`` (kept if
present) and prints the wall time of each part.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from lmcache_compat.upstream.grid import load_grid
from lmcache_compat.upstream.matrix import load_matrix
from tests.tiers.grid.prepare import check_versions, constraints_file
from tools.lmcache_targets import install_release
from tools.uv_install import uv_install


def newest_vllm() -> str:
    """The newest vLLM the shipped grid measured."""
    return load_grid().versions[-1]


def main(releases_dir: str) -> int:
    if not os.environ.get("UV_FIND_LINKS"):
        raise SystemExit("UV_FIND_LINKS is unset: uv would download a CUDA build of torch")
    vllm = newest_vllm()
    start = time.perf_counter()
    uv_install(requirements=constraints_file(vllm))
    print(f"mutation prepare: {check_versions(vllm)} ({time.perf_counter() - start:.1f} s)")
    start = time.perf_counter()
    version = load_matrix().newest.version
    target = install_release(version, Path(releases_dir))
    print(f"mutation prepare: LMCache {version} at {target} ({time.perf_counter() - start:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
