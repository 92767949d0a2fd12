"""Fetch the sdist of an LMCache release that cannot be installed here (0.3.0: its build compiles
CUDA extensions), checking its sha256 against the shipped release matrix.

    python tests/tiers/release/fetch_sdist.py VERSION DEST_DIR

Downloads from the index the installers are configured with (:mod:`tools.index`).
Prints the path.
"""

from __future__ import annotations

import sys
from pathlib import Path

from lmcache_compat.upstream.matrix import load_matrix
from tools.index import download, find_file, sha256_of


def main(version: str, dest: str) -> int:
    row = load_matrix().row(version)
    path = Path(dest) / row.artifact
    if not (path.exists() and sha256_of(path) == row.sha256):  # the index is asked only then
        download(find_file("lmcache", row.artifact), path, sha256=row.sha256)
    print(f"fetched {path} (sha256 matches the shipped matrix)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
