#!/usr/bin/env python3
"""Regenerate lmcache_compat/upstream/data/releases/ from the real LMCache releases.

A maintainer command, not run in CI:

    python scripts/build_release_matrix.py [--pre] [--cache DIR] [--offline] [--docs]
    python scripts/build_release_matrix.py --from-shipped

For every final LMCache release from 0.3.0 on (with ``--pre``, also the pre-releases and dev
builds newer than the newest final release: a pre-release whose final is out is superseded), it
takes the CPython 3.11 manylinux wheel (or the sdist where there is no wheel: 0.3.0) from the
index the installers are configured with (``tools.index``), downloads it into the cache
(sha256 checked against the index), scans it with ``lmcache_compat.upstream.scanner`` (nothing
is imported or built), and writes one file per release (``releases/<version>.json``: its row,
one method per line, and ``tree_sha256``: the digest of the artifact's Python files, which
``doctor`` compares the installed release's files to; no capabilities: the library derives
them from the stored surfaces, ``lmcache_compat.upstream.derived``) and the index
(``releases/index.json``: each release's version, artifact, sha256 and size, oldest first).
``--from-shipped`` rewrites the shipped rows in this layout without scanning (a layout change;
it reads the single ``releases.json`` of the layout before this one too, and drops what a row
of an older layout stored that is now derived). ``--docs`` also regenerates the
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

from lmcache_compat.scan.targets import open_source  # noqa: E402
from lmcache_compat.upstream.known import tree_sha256  # noqa: E402
from lmcache_compat.upstream.matrix import row_json  # noqa: E402
from lmcache_compat.upstream.scanner import scan  # noqa: E402
from lmcache_compat.upstream.shipped import (  # noqa: E402
    INDEX_KEYS,
    RELEASE_INDEX,
    RELEASES,
    data_path,
    release_file,
)
from tools import index, maintainer  # noqa: E402

FIRST = Version("0.3.0")
DATA = data_path(RELEASES)
#: The single file of the layout before one file per release (read by --from-shipped only).
SINGLE_FILE = data_path("releases.json")


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


#: Keys a row of an older layout stored that follow from the rest (``capabilities``: from the
#: surfaces, by the catalog's rule): never written.
DERIVED = ("capabilities",)
#: Row keys whose value has one entry per line (per class); ``CLASS_MEMBERS``: one per member.
PER_CLASS = ("properties", "modules", "found_by", "external_bases", "reexported_at", "functions")
CLASS_MEMBERS = ("surfaces", "details")


def _expand(path: tuple[Any, ...]) -> bool:
    """A release's file: the row, its per-class tables and their classes."""
    if len(path) <= 0:
        return True
    if len(path) == 1:
        return path[0] in PER_CLASS or path[0] in CLASS_MEMBERS
    return len(path) == 2 and path[0] in CLASS_MEMBERS


def _expand_index(path: tuple[Any, ...]) -> bool:
    """The index: the object and its list of releases (one release a line)."""
    return len(path) <= 1


def write_matrix(rows: list[dict[str, Any]]) -> None:
    """One file per release (one method per line, so reviews read as diffs) and the index;
    a release's file that no row names any more is removed."""
    DATA.mkdir(parents=True, exist_ok=True)
    entries = [{k: r[k] for k in INDEX_KEYS if k in r} for r in rows]
    data = {"format": 2, "generated_by": "scripts/build_release_matrix.py", "releases": entries}
    maintainer.write_json_lines(
        data_path(RELEASE_INDEX), maintainer.json_lines(data, _expand_index, flat=1)
    )
    written = set()
    for row in rows:
        own = {"version": row["version"], "tree_sha256": row.get("tree_sha256")}
        own |= {
            k: v
            for k, v in row.items()
            if k not in INDEX_KEYS and k not in own and k not in DERIVED
        }
        if own["tree_sha256"] is None:  # a row of a layout before the digest
            del own["tree_sha256"]
        path = data_path(release_file(row["version"]))
        maintainer.write_json_lines(path, maintainer.json_lines(own, _expand, flat=1))
        written.add(path.name)
    for stale in DATA.glob("*.json"):
        if stale.name not in written and stale.name != Path(RELEASE_INDEX).name:
            stale.unlink()
    SINGLE_FILE.unlink(missing_ok=True)


def shipped_rows() -> list[dict[str, Any]]:
    """The rows shipped now, in either layout (the single file before one file per release)."""
    if SINGLE_FILE.is_file():
        return list(json.loads(SINGLE_FILE.read_text(encoding="utf-8"))["releases"])
    from lmcache_compat.upstream.shipped import release_index, release_row

    return [release_row(e["version"]) for e in release_index()["releases"]]


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
    ap.add_argument(
        "--from-shipped",
        action="store_true",
        help="rewrite the shipped rows in the current layout, scanning nothing",
    )
    args = ap.parse_args()
    if args.from_shipped:
        rows = shipped_rows()
        write_matrix(rows)
        print(f"rewrote {len(rows)} releases under {DATA.relative_to(ROOT)}", file=sys.stderr)
        return 0
    args.cache.mkdir(parents=True, exist_ok=True)
    if args.offline:  # re-scan the artifacts the current data files name, from the cache
        current = shipped_rows()
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
        row = row_json(result, artifact=f["filename"], sha256=f["hashes"]["sha256"])
        row["size"] = path.stat().st_size  # scan of a file of another size hashes nothing
        with open_source(path) as tree:  # what doctor compares an installed release's files to
            row["tree_sha256"] = tree_sha256(tree)
        rows.append(row)
    write_matrix(rows)
    print(f"wrote {len(rows)} releases under {DATA.relative_to(ROOT)}", file=sys.stderr)
    if args.docs:
        subprocess.run([sys.executable, str(ROOT / "scripts" / "update_docs.py")], check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
