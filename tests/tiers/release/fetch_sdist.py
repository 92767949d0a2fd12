"""Fetch the sdist of an LMCache release that cannot be installed here (0.3.0: its build compiles
CUDA extensions), checking its sha256 against the shipped release matrix.

    python tests/tiers/release/fetch_sdist.py VERSION DEST_DIR

Downloads from PyPI's simple index (JSON API). Prints the path.
"""

from __future__ import annotations

import hashlib
import json
import sys
import urllib.request
from pathlib import Path

from lmcache_compat.upstream.matrix import load_matrix


def main(version: str, dest: str) -> int:
    row = load_matrix().row(version)
    path = Path(dest) / row.artifact
    if not path.exists() or hashlib.sha256(path.read_bytes()).hexdigest() != row.sha256:
        req = urllib.request.Request(
            "https://pypi.org/simple/lmcache/",
            headers={"Accept": "application/vnd.pypi.simple.v1+json"},
        )
        with urllib.request.urlopen(req, timeout=120) as resp:
            files = json.load(resp)["files"]
        (entry,) = [f for f in files if f["filename"] == row.artifact]
        with urllib.request.urlopen(entry["url"], timeout=300) as resp:
            data = resp.read()
        digest = hashlib.sha256(data).hexdigest()
        if digest != row.sha256:
            print(f"{row.artifact}: sha256 {digest} != matrix {row.sha256}", file=sys.stderr)
            return 1
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    print(f"fetched {path} (sha256 matches the shipped matrix)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
