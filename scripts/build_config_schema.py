#!/usr/bin/env python3
"""Regenerate lmcache_compat/upstream/data/config_schema.json from the real LMCache releases.

A maintainer command, not run in CI:

    python scripts/build_config_schema.py [--cache DIR] [--offline] [--docs]

For every release of the shipped release matrix (``data/releases/``: run
``scripts/build_release_matrix.py`` first when a release is added) it takes the same artifact
(the CPython 3.11 manylinux wheel, or the 0.3.0 sdist), from the cache when its sha256 matches
the matrix, else from the index the installers are configured with (``tools.index``),
reads its configuration with ``lmcache_compat.upstream.config_scan`` (nothing is imported or
built) and writes one block per release, one key and one flag per line, so reviews read as
diffs. ``--docs`` also regenerates the generated documentation.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lmcache_compat.config.schema import DATA_FILE, shipped_block  # noqa: E402
from lmcache_compat.upstream.config_scan import scan_config  # noqa: E402
from lmcache_compat.upstream.matrix import load_matrix  # noqa: E402
from lmcache_compat.upstream.shipped import data_path  # noqa: E402
from tools import index, maintainer  # noqa: E402

DATA = data_path(DATA_FILE)
#: Fields of a release block written as one line each (the rest are written as blocks).
BLOCKS = ("keys", "mp_commands")


def fetch(artifact: str, sha256: str, cache: Path, offline: bool) -> Path:
    f = {"filename": artifact, "hashes": {"sha256": sha256}}
    return index.cached(f, cache, offline=offline, project_name="lmcache")


def _expand(path: tuple[Any, ...], blocks: list[dict[str, Any]]) -> bool:
    """The top object, the releases, each release, its ``BLOCKS`` and each MP command that is
    not ``same_as`` another."""
    if len(path) <= 3:
        return len(path) < 3 or path[2] in BLOCKS
    if len(path) == 4 and path[2] == "mp_commands":
        return "same_as" not in blocks[path[1]]["mp_commands"][path[3]]
    return False


def write_schema(blocks: list[dict[str, Any]]) -> None:
    data = {"format": 1, "generated_by": "scripts/build_config_schema.py", "releases": blocks}
    lines = maintainer.json_lines(data, lambda path: _expand(path, blocks), flat=3)
    maintainer.write_json_lines(DATA, lines)


def main() -> int:
    ap = maintainer.parser(__doc__, "artifacts", "read the cache only (no index)")
    args = ap.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    blocks = []
    for row in load_matrix().rows:
        path = fetch(row.artifact, row.sha256, args.cache, args.offline)
        scanned = scan_config(path)
        if scanned["version"] != row.version:
            raise SystemExit(f"{path}: metadata says {scanned['version']}, matrix {row.version}")
        print(f"  {row.version:<14} {len(scanned['keys'])} keys", file=sys.stderr)
        blocks.append(shipped_block(scanned, row.artifact, row.sha256))
    write_schema(blocks)
    print(f"wrote {len(blocks)} releases to {DATA.relative_to(ROOT)}", file=sys.stderr)
    if args.docs:
        subprocess.run([sys.executable, str(ROOT / "scripts" / "update_docs.py")], check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
