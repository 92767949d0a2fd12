"""The shipped sglang grid re-checked against real sglang wheels (``tox -e sglang-grid``).

The newest sglang the grid lists and one older one (the first with an LMCache integration: a
small pure wheel) are downloaded from the index (sha256 checked against the grid) and read
again: the facts, the run key and the variant must equal the shipped data, and binding the
fresh facts against every LMCache release must give the shipped pairs. The index's newest
sglang, if the grid does not list it, is read as a new release would be: the reader and the
plan must say what it is (no failure: a new release is news, not a defect).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from packaging.version import Version

from lmcache_compat.sglang.decisions import plan
from lmcache_compat.sglang.known.bind import bind_pair
from lmcache_compat.sglang.known.grid import load_sglang_grid
from lmcache_compat.sglang.known.reader import facts_key, read_sglang
from lmcache_compat.sglang.variants import variant_for
from lmcache_compat.upstream import locations as loc
from lmcache_compat.upstream.matrix import load_matrix
from tools import index

pytestmark = [pytest.mark.sglanggrid, pytest.mark.real]

GRID = load_sglang_grid()
WITH_INTEGRATION = [r.sglang for r in GRID.releases if GRID.run_of(r.sglang).integration]
CHECKED = [GRID.versions[-1], WITH_INTEGRATION[0]]


def _cache() -> Path:
    path = Path(os.environ.get("LMCACHE_COMPAT_SGLANG_WHEELS", "/tmp/lmcache-compat-sglang-wheels"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def _wheel(version: str) -> Path:
    release = GRID.release(version)
    path = _cache() / release.wheel
    if path.exists() and index.sha256_of(path) == release.sha256:
        return path
    return index.download(index.find_file(loc.SGLANG, release.wheel), path, sha256=release.sha256)


@pytest.mark.parametrize("version", CHECKED)
def test_a_fresh_reading_equals_the_shipped_grid(version: str) -> None:
    facts = read_sglang(_wheel(version))
    assert facts == GRID.facts(version)
    assert facts_key(facts["integration"]) == GRID.release(version).key
    classes = tuple(i["cache_class"] for i in facts["integration"])
    found = variant_for(classes, facts["internals"], loc.SGLANG_LMC_UNIFIED_CACHE.name)
    shipped = GRID.release(version).variant
    assert (found.name if found is not None and facts["registry"] else None) == shipped
    run = GRID.run_of(version)
    for row in load_matrix().rows:
        assert bind_pair(facts, row).to_json() == run.pairs[row.version], row.version


def test_the_index_s_newest_sglang_is_read_like_any_release() -> None:
    releases = index.releases(loc.SGLANG)
    newest = max((Version(v) for v in releases), default=None)
    assert newest is not None
    if str(newest) in GRID.versions or newest <= Version(GRID.versions[-1]):
        return  # nothing newer than the grid: the checks above cover it
    wheels = [
        f for f in releases[str(newest)] if "cp311" in f["filename"] and "x86_64" in f["filename"]
    ]
    wheels += [f for f in releases[str(newest)] if f["filename"].endswith("py3-none-any.whl")]
    assert wheels, f"sglang {newest}: no wheel this machine can read"
    path = index.download(wheels[0], _cache())
    facts = read_sglang(path)
    row = load_matrix().newest
    verdict = plan(facts, row.version, row.capabilities, config_file=True)
    # day one: a release the grid has never seen is read, bound and planned, or refused
    # with a reason, never an exception
    print(f"sglang {newest} (not in the shipped grid): {verdict.line()}")
    assert verdict.serves or verdict.reason
