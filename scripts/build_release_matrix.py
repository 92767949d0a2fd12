#!/usr/bin/env python3
"""Regenerate lmcache_compat/upstream/data/releases.json from the real LMCache releases.

A maintainer command, not run in CI:

    python scripts/build_release_matrix.py [--pre] [--cache DIR] [--offline] [--docs]

For every final LMCache release from 0.3.0 on (with ``--pre``, also the pre-releases and dev
builds newer than the newest final release: a pre-release whose final is out is superseded), it
takes the CPython 3.11 manylinux wheel (or the sdist where there is no wheel: 0.3.0) from the
index the installers are configured with (``tests.support.index``), downloads it into the cache
(sha256 checked against the index), scans it with ``lmcache_compat.upstream.scanner`` (nothing
is imported or built), and writes one row per release. ``--docs`` also regenerates the
generated documentation. Review the diff like code: a changed row means the scanner or a
release changed.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lmcache_compat.upstream.matrix import DATA_FILE, row_json  # noqa: E402
from lmcache_compat.upstream.scanner import scan  # noqa: E402
from lmcache_compat.upstream.shipped import data_path  # noqa: E402
from tests.support import index, maintainer  # noqa: E402

FIRST = Version("0.3.0")
DATA = data_path(DATA_FILE)


def _is_pre(v: Version) -> bool:
    return v.is_prerelease or v.is_devrelease


def pick(files: list[dict[str, Any]], pre: bool = False) -> dict[str, dict[str, Any]]:
    """version -> the artifact to scan (cp311 manylinux wheel, else the sdist). With ``pre``,
    pre-releases and dev builds newer than the newest final release are included."""
    chosen: dict[str, dict[str, Any]] = {}
    for f in files:
        name = f["filename"]
        m = re.match(r"lmcache-([^-]+?)(?:\.tar\.gz|-cp311-cp311-manylinux.*x86_64\.whl)$", name)
        if not m or f.get("yanked"):
            continue
        v = Version(m.group(1))
        if v < FIRST or (_is_pre(v) and not pre):
            continue
        prev = chosen.get(str(v))
        if prev is None or (prev["filename"].endswith(".tar.gz") and name.endswith(".whl")):
            chosen[str(v)] = f
    finals = [Version(v) for v in chosen if not _is_pre(Version(v))]
    newest_final = max(finals) if finals else Version("0")
    return {v: f for v, f in chosen.items() if not _is_pre(Version(v)) or Version(v) > newest_final}


def fetch(f: dict[str, Any], cache: Path, offline: bool) -> Path:
    return index.cached(f, cache, offline=offline)


#: Row keys whose value has one entry per line (per class); ``CLASS_MEMBERS``: one per member.
PER_CLASS = ("properties", "modules", "found_by", "external_bases", "reexported_at", "functions")
CLASS_MEMBERS = ("surfaces", "details")


def _expand(path: tuple[Any, ...]) -> bool:
    """The top object, the releases, each release, its per-class tables and their classes."""
    if len(path) <= 2:
        return True
    if len(path) == 3:
        return path[2] in PER_CLASS or path[2] in CLASS_MEMBERS
    return len(path) == 4 and path[2] in CLASS_MEMBERS


def write_matrix(rows: list[dict[str, Any]]) -> None:
    """One release per block and one method per line, so reviews read as diffs."""
    data = {"format": 1, "generated_by": "scripts/build_release_matrix.py", "releases": rows}
    maintainer.write_json_lines(DATA, maintainer.json_lines(data, _expand, flat=3))


def main() -> int:
    ap = maintainer.parser(
        __doc__,
        "artifacts",
        "re-scan the releases the data file lists, from the cache only (no index query)",
    )
    ap.add_argument(
        "--pre",
        action="store_true",
        help="include pre-releases and dev builds newer than the newest final release",
    )
    args = ap.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    if args.offline:  # re-scan the artifacts the current data file names, from the cache
        current = json.loads(DATA.read_text(encoding="utf-8"))["releases"]
        chosen = {
            r["version"]: {"filename": r["artifact"], "hashes": {"sha256": r["sha256"]}}
            for r in current
        }
    else:
        chosen = pick(index.project("lmcache")["files"], pre=args.pre)
    rows = []
    for version in sorted(chosen, key=Version):
        f = chosen[version]
        path = fetch(f, args.cache, args.offline)
        result = scan(path).to_json()
        if result["lmcache_version"] != version:
            raise SystemExit(
                f"{path}: metadata says {result['lmcache_version']}, index says {version}"
            )
        print(f"  {version:<14} {f['filename']}", file=sys.stderr)
        rows.append(row_json(result, artifact=f["filename"], sha256=f["hashes"]["sha256"]))
    write_matrix(rows)
    print(f"wrote {len(rows)} releases to {DATA.relative_to(ROOT)}", file=sys.stderr)
    if args.docs:
        subprocess.run([sys.executable, str(ROOT / "scripts" / "update_docs.py")], check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
