#!/usr/bin/env python3
"""Regenerate lmcache_compat/upstream/data/config_schema.json from the real LMCache releases.

A maintainer command, not run in CI:

    python scripts/build_config_schema.py [--cache DIR] [--offline] [--docs]

For every release of the shipped release matrix (``releases.json``: run
``scripts/build_release_matrix.py`` first when a release is added) it takes the same artifact
(the CPython 3.11 manylinux wheel, or the 0.3.0 sdist), from the cache when its sha256 matches
the matrix, else from the index the installers are configured with (``tests.support.index``),
reads its configuration with ``lmcache_compat.upstream.config_scan`` (nothing is imported or
built) and writes one block per release, one key and one flag per line, so reviews read as
diffs. ``--docs`` also regenerates the generated documentation.
"""

from __future__ import annotations

import json
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
from tests.support import index, maintainer  # noqa: E402

DATA = data_path(DATA_FILE)
#: Fields of a release block written as one line each (the rest are written as blocks).
BLOCKS = ("keys", "mp_commands")


def fetch(artifact: str, sha256: str, cache: Path, offline: bool) -> Path:
    f = {"filename": artifact, "hashes": {"sha256": sha256}}
    return index.cached(f, cache, offline=offline, project_name="lmcache")


def _nested(key: str, value: dict[str, Any], comma: str, depth: int) -> list[str]:
    pad = "  " * depth
    if not value:
        return [f"{pad}{json.dumps(key)}: {{}}{comma}"]
    lines = [f"{pad}{json.dumps(key)}: {{"]
    items = list(value.items())
    for i, (name, item) in enumerate(items):
        c = "," if i < len(items) - 1 else ""
        if depth == 0 and key == "mp_commands" and "same_as" not in item:
            lines += _nested(name, item, c, depth + 1)
        else:
            lines.append(f"{pad}  {json.dumps(name)}: {json.dumps(item)}{c}")
    lines.append(f"{pad}}}{comma}")
    return lines


def write_schema(blocks: list[dict[str, Any]]) -> None:
    lines = [
        "{",
        '"format": 1,',
        '"generated_by": "scripts/build_config_schema.py",',
        '"releases": [',
    ]
    for i, row in enumerate(blocks):
        lines.append("{")
        keys = list(row)
        for j, key in enumerate(keys):
            comma = "," if j < len(keys) - 1 else ""
            if key in BLOCKS:
                lines += _nested(key, row[key], comma, 0)
            else:
                lines.append(f"{json.dumps(key)}: {json.dumps(row[key])}{comma}")
        lines.append("}" + ("," if i < len(blocks) - 1 else ""))
    lines += ["]", "}"]
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
