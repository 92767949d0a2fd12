#!/usr/bin/env python3
"""Regenerate lmcache_compat/upstream/data/sglang_grid.json from the real sglang wheels.

A maintainer command, not run in CI (CI re-reads the newest sglang wheel and one older one:
``tox -e sglang-grid``):

    python scripts/build_sglang_grid.py [--cache DIR] [--offline] [--docs]

For every sglang release of 0.5.x (pre-releases included: sglang ships its LMCache
integration in them too), it takes the CPython 3.11 manylinux x86_64 wheel, else the pure
wheel, from the index the installers are configured with (``tools.index``), downloads
it into the cache (sha256 checked against the index; ``--offline``: against the data file),
reads it with ``lmcache_compat.sglang.known.reader`` (nothing is imported), groups the
releases into runs of identical LMCache import lines and call shapes, and binds each run
against every LMCache release of the shipped matrix (``sglang_bind``). Review the diff like
code. Regenerate after ``scripts/build_release_matrix.py``: the pairs bind against its rows.
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

from lmcache_compat.sglang.known.bind import bind_integration  # noqa: E402
from lmcache_compat.sglang.known.grid import DATA_FILE  # noqa: E402
from lmcache_compat.sglang.known.reader import facts_key, read_sglang  # noqa: E402
from lmcache_compat.sglang.variants import variant_for  # noqa: E402
from lmcache_compat.upstream import locations as loc  # noqa: E402
from lmcache_compat.upstream.matrix import load_matrix  # noqa: E402
from lmcache_compat.upstream.shipped import data_path  # noqa: E402
from tools import index, maintainer  # noqa: E402

#: The first sglang series with an LMCache integration (its pre-releases included).
FIRST = Version("0.5.0.dev0")
DATA = data_path(DATA_FILE)
_WHEEL = re.compile(r"sglang-([^-]+)-(cp311-cp311-manylinux[^-]*_x86_64|py3-none-any)\.whl$")


def pick(releases: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """version -> the wheel to read (cp311 manylinux x86_64, else the pure wheel)."""
    chosen: dict[str, dict[str, Any]] = {}
    for version, files in releases.items():
        if Version(version) < FIRST:
            continue
        wheels = [f for f in files if _WHEEL.match(f["filename"]) and not f.get("yanked")]
        wheels.sort(key=lambda f: "py3-none-any" in f["filename"])  # binary wheels first
        if wheels:
            chosen[version] = wheels[0]
    return chosen


def fetch(f: dict[str, Any], cache: Path, offline: bool) -> Path:
    return index.cached(f, cache, offline=offline)


def build(chosen: dict[str, dict[str, Any]], cache: Path, offline: bool) -> dict[str, Any]:
    matrix = load_matrix()
    releases: list[dict[str, Any]] = []
    runs: list[dict[str, Any]] = []
    for version in sorted(chosen, key=Version):
        f = chosen[version]
        facts = read_sglang(fetch(f, cache, offline))
        if facts["sglang"] != version:
            raise SystemExit(f"{f['filename']}: metadata says {facts['sglang']}, index {version}")
        key = facts_key(facts["integration"])
        if not runs or runs[-1]["key"] != key:
            runs.append({"key": key, "integration": facts["integration"], "releases": []})
        runs[-1]["releases"].append(version)
        classes = tuple(i["cache_class"] for i in facts["integration"])
        variant = variant_for(classes, facts["internals"], loc.SGLANG_LMC_UNIFIED_CACHE.name)
        releases.append(
            {
                "sglang": version,
                "wheel": f["filename"],
                "sha256": f["hashes"]["sha256"],
                "key": key,
                "plugin_group": facts["plugin_group"],
                "registry": facts["registry"],
                "context_fields": facts["context_fields"],
                "internals": facts["internals"],
                "variant": variant.name if variant is not None and facts["registry"] else None,
            }
        )
        print(f"  {version:<14} {key} {f['filename']}", file=sys.stderr)
    for run in runs:
        run["first"], run["last"] = run["releases"][0], run["releases"][-1]
        run["pairs"] = {
            row.version: bind_integration(run["integration"], row).to_json() for row in matrix.rows
        }
    return {
        "format": 1,
        "generated_by": "scripts/build_sglang_grid.py",
        "lmcache": matrix.versions,
        "releases": releases,
        "runs": [
            {k: run[k] for k in ("first", "last", "key", "releases", "integration", "pairs")}
            for run in runs
        ],
    }


def _expand(path: tuple[Any, ...]) -> bool:
    """The top object, the release list, the runs, each run and its pairs."""
    return path in ((), ("releases",), ("runs",)) or (
        path[0] == "runs" and (len(path) == 2 or (len(path) == 3 and path[2] == "pairs"))
    )


def write(data: dict[str, Any]) -> None:
    """One release, one pair per line, so reviews read as diffs."""
    maintainer.write_json_lines(DATA, maintainer.json_lines(data, _expand, flat=2))


def main() -> int:
    ap = maintainer.parser(
        __doc__,
        "sglang-wheels",
        "re-read the wheels the data file lists, from the cache only (no index query)",
    )
    args = ap.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    if args.offline:
        current = json.loads(DATA.read_text(encoding="utf-8"))["releases"]
        chosen = {
            r["sglang"]: {"filename": r["wheel"], "hashes": {"sha256": r["sha256"]}}
            for r in current
        }
    else:
        chosen = pick(index.releases(loc.SGLANG))
    data = build(chosen, args.cache, args.offline)
    write(data)
    print(
        f"wrote {len(data['releases'])} sglang releases in {len(data['runs'])} runs to "
        f"{DATA.relative_to(ROOT)}",
        file=sys.stderr,
    )
    if args.docs:
        subprocess.run([sys.executable, str(ROOT / "scripts" / "update_docs.py")], check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
