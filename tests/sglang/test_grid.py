"""The shipped sglang grid is what the reader and the binder compute: runs are runs, every pair
is the binding of the run's facts against the shipped matrix row (regenerate the grid when the
matrix changes), and the pair table of the issue holds."""

from __future__ import annotations

import copy
import dataclasses
import itertools

import pytest

from lmcache_compat.sglang.known.bind import bind_integration, default_mode
from lmcache_compat.sglang.known.grid import load_sglang_grid
from lmcache_compat.sglang.known.reader import IntegrationJSON, facts_key
from lmcache_compat.upstream.matrix import ReleaseRow, load_matrix

GRID = load_sglang_grid()
MATRIX = load_matrix()


def test_the_grid_binds_against_the_shipped_matrix() -> None:
    assert GRID.lmcache == MATRIX.versions


@pytest.mark.parametrize("run", GRID.runs, ids=lambda r: r.label)
def test_every_pair_is_the_binding_of_its_run(run) -> None:  # type: ignore[no-untyped-def]
    assert facts_key(list(run.integration)) == run.key
    for row in MATRIX.rows:
        assert bind_integration(run.integration, row).to_json() == run.pairs[row.version]


def test_runs_are_consecutive_releases_with_one_key() -> None:
    seen = []
    for run in GRID.runs:
        for version in run.releases:
            assert GRID.release(version).key == run.key
            seen.append(version)
    assert seen == GRID.versions
    keys = [run.key for run in GRID.runs]
    assert all(a != b for a, b in itertools.pairwise(keys))


def _works(sglang: str) -> list[str]:
    out = []
    for version in GRID.lmcache:
        pair = GRID.pair(sglang, version)
        assert pair is not None
        mode = default_mode(pair["modes"])
        if mode is not None and mode["status"] == "works":
            out.append(version)
    return out


@pytest.mark.parametrize(
    ("sglang", "first", "last"),
    [
        ("0.5.2", "0.3.9.post1", "0.4.5"),  # 0.3.9 reduces over sglang's coordinator at tp 1
        ("0.5.10", "0.3.9", "0.4.5"),
        ("0.5.12.post1", "0.3.9", "0.4.5"),
        ("0.5.13", "0.4.6", "0.5.6"),
        ("0.5.20", "0.4.6", "0.5.6"),
        ("0.5.21", "0.5.6", "0.5.7rc2"),
        ("0.5.23", "0.5.6", "0.5.7rc2"),
    ],
)
def test_the_pair_table(sglang: str, first: str, last: str) -> None:
    works = _works(sglang)
    versions = GRID.lmcache
    assert works == versions[versions.index(first) : versions.index(last) + 1]


def test_the_reasons_are_the_real_ones() -> None:
    def reason(sglang: str, lmcache: str) -> str:
        pair = GRID.pair(sglang, lmcache)
        assert pair is not None
        mode = default_mode(pair["modes"])
        assert mode is not None
        return mode["reasons"][0]

    assert "unexpected keyword argument 'tp_group'" in reason("0.5.10", "0.3.6")
    assert "missing a required argument: 'config_file'" in reason("0.5.10", "0.4.6")
    assert "LMCache is not installed" in reason("0.5.10", "0.5.7rc2")
    assert "the real cause" in reason("0.5.10", "0.5.7rc2")
    assert "multi_process_adapter" in reason("0.5.20", "0.4.5")
    assert "lmcache_mp_metadata" in reason("0.5.23", "0.5.5") and "uncaught" in reason(
        "0.5.23", "0.5.5"
    )
    assert "GroupCoordinator" in reason("0.5.2", "0.3.9")


# --- the binder: names a module imports, and the real failure of a pair ---------------------

UNIFIED = next(r for r in GRID.runs if r.first == "0.5.21")


def _next_sglang(names: tuple[str, ...] = (), keyword: str | None = None) -> list[IntegrationJSON]:
    """The newest run's integration as a next sglang might write it: more names imported from
    the unified connector's module, and a keyword the connector may not take."""
    integration = copy.deepcopy(list(UNIFIED.integration))
    (module,) = integration
    for line in module["imports"]:
        if line["module"].endswith("unified_lmcache_mp_connector"):
            line["names"] = [*line["names"], *names]
    if keyword is not None:
        call = next(c for c in module["calls"] if c["callee"] == "UnifiedLMCacheMPConnector")
        call["keywords"] = {**call["keywords"], keyword: keyword}
    return integration


def _reasons(integration: list[IntegrationJSON], row: ReleaseRow) -> list[str]:
    (mode,) = bind_integration(integration, row).modes
    return mode["reasons"]


@pytest.mark.parametrize("version", ["0.5.6", "0.5.7rc2"])
def test_a_name_the_module_imports_at_its_top_level_is_importable_from_it(version: str) -> None:
    """0.5.6 and 0.5.7rc2's unified_lmcache_mp_connector imports SGLangKVComponentGroup and the
    operation classes from lmcache_mp_metadata: importing them from it works (a real import
    does), so the pair works; the scan records it (reexported_at)."""
    row = MATRIX.row(version)
    names = ("SGLangKVComponentGroup", "LMCacheLoadOperation", "LMCacheStoreOperation")
    unified = "lmcache.integration.sglang.unified_lmcache_mp_connector"
    assert all(unified in row.reexported_at[n] for n in names)
    assert _reasons(_next_sglang(names), row) == []
    plain = dataclasses.replace(row, reexported_at={})  # a release whose module does not import it
    (reason,) = _reasons(_next_sglang(names), plain)
    assert reason.startswith("ImportError: cannot import name 'SGLangKVComponentGroup'")


def test_the_binder_reports_the_real_failure_of_a_pair() -> None:
    """Imports that work are bound on: an unexpected keyword is the TypeError Python raises,
    not an ImportError."""
    row = MATRIX.row("0.5.6")
    reasons = _reasons(_next_sglang(("SGLangKVComponentGroup",), keyword="bogus"), row)
    assert reasons == [
        "TypeError: UnifiedLMCacheMPConnector() got an unexpected keyword argument 'bogus'"
    ]
