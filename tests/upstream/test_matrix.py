from __future__ import annotations

import json
from pathlib import Path

import pytest

from lmcache_compat import CATALOG, probe
from lmcache_compat.core.catalog import Capability, owned_by
from lmcache_compat.core.probes import live_surface
from lmcache_compat.core.roles import CONNECTOR
from lmcache_compat.core.surface import render_surface
from lmcache_compat.report.cli import main
from lmcache_compat.report.tables import matrix_markdown
from lmcache_compat.upstream.diff import ReleaseView, diff_releases
from lmcache_compat.upstream.matrix import ReleaseMatrix, ReleaseRow, load_matrix
from tests.support.archives import ADAPTER_0_3_10_POST2, V1, make_wheel
from tests.support.behaviour import check_row_behaviour
from tests.support.fakes import FAKES, connector_view

ROOT = Path(__file__).resolve().parents[2]
MATRIX = load_matrix()
CONNECTOR_IMPL = CONNECTOR.name

#: Every final LMCache release on PyPI when the matrix was last generated.
RELEASES = [
    "0.3.0",
    "0.3.1",
    "0.3.1.post1",
    "0.3.2",
    "0.3.3",
    "0.3.4",
    "0.3.5",
    "0.3.6",
    "0.3.7",
    "0.3.9",
    "0.3.9.post1",
    "0.3.9.post2",
    "0.3.10",
    "0.3.10.post1",
    "0.3.10.post2",
    "0.3.11",
    "0.3.12",
    "0.3.13",
    "0.3.14",
    "0.3.15",
    "0.4.1",
    "0.4.2",
    "0.4.3",
    "0.4.4",
    "0.4.5",
    "0.4.6",
    "0.4.7",
    "0.5.0",
    "0.5.1",
    "0.5.2",
    "0.5.3",
    "0.5.4",
    "0.5.5",
    "0.5.6",
    "0.5.7rc2",
]


def test_matrix_covers_every_release() -> None:
    assert MATRIX.versions == RELEASES
    assert MATRIX.row("0.3.0").artifact == "lmcache-0.3.0.tar.gz"
    assert all(r.artifact.endswith("x86_64.whl") for r in MATRIX.rows[1:])
    assert all(len(r.sha256) == 64 for r in MATRIX.rows)


def test_catalog_since_matches_the_matrix() -> None:
    for spec in CATALOG:
        assert MATRIX.since(spec.capability) == spec.since, spec.capability
        first = next(r.version for r in MATRIX.rows if r.has(spec.capability))
        assert first == spec.since


def test_every_release_has_the_core_methods() -> None:
    for row in MATRIX.rows:
        surface = row.facts(CONNECTOR_IMPL)
        for name, params in CONNECTOR.core:
            assert surface[name].binds(len(params)), (row.version, name)


@pytest.mark.parametrize("release", sorted(FAKES))
def test_handwritten_fakes_mirror_the_real_releases(release: str) -> None:
    """tests/support/fakes.py is hand-written; the matrix is scanned from the real artifacts."""
    row = MATRIX.row(release)
    surface = live_surface(FAKES[release])
    assert render_surface(surface) == dict(row.surfaces[CONNECTOR_IMPL])
    props = sorted(n for n, f in surface.items() if f.kind == "property")
    assert props == row.properties.get(CONNECTOR_IMPL, [])
    assert probe(FAKES[release]).as_dict(CONNECTOR) == connector_view(dict(row.capabilities))


@pytest.mark.parametrize("release", RELEASES)
def test_generated_fakes_behave_per_catalog(release: str) -> None:
    check_row_behaviour(MATRIX.row(release))


def test_row_lookup_errors() -> None:
    assert MATRIX.row("v0.3.9").version == "0.3.9"
    with pytest.raises(
        KeyError, match=r"0\.3\.8 is not in the release matrix \(0\.3\.0 \.\.\. 0\.5\.7rc2\)"
    ):
        MATRIX.row("0.3.8")


def _row(version: str, **caps: bool) -> ReleaseRow:
    """A row whose stored surfaces carry exactly the capabilities set true (each a method of
    the catalog's shape on its owner class): the row derives them, as a shipped row does."""
    surfaces: dict[str, dict[str, list[str]]] = {}
    for name, present in caps.items():
        spec = Capability(name).spec
        if present:
            surfaces.setdefault(spec.owner.name, {})[spec.method] = list(spec.params)
    row = ReleaseRow(version, "x", "0" * 64, surfaces, {}, ())
    assert {c for c, v in row.capabilities.items() if v} == {c for c, v in caps.items() if v}
    return row


def test_since_is_the_start_of_the_unbroken_run() -> None:
    m = ReleaseMatrix(
        [
            _row("0.1", kv_events=True),
            _row("0.2", kv_events=False),
            _row("0.3", kv_events=True),
            _row("0.4", kv_events=True),
        ]
    )
    assert m.since("kv_events") == "0.3"
    assert ReleaseMatrix([_row("0.1", kv_events=True), _row("0.2")]).since("kv_events") is None


def test_matrix_cli(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["matrix"]) == 0
    out = capsys.readouterr().out
    assert "0.3.9.post1" in out and "load_error_reporting" in out
    assert main(["matrix", "--markdown"]) == 0
    assert capsys.readouterr().out == matrix_markdown(MATRIX)
    assert main(["matrix", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [r["version"] for r in data["releases"]] == RELEASES
    assert data["since"]["kv_events"] == "0.3.10.post2"  # pinned: 0.3.10.post2 added get_kv_events
    assert data["since"] == {c: MATRIX.since(c) for c in data["since"]}


def test_diff_versions(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diff", "0.3.9", "0.3.9.post1", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["capabilities_added"] == ["load_error_reporting"]
    assert d["classes"][CONNECTOR_IMPL]["methods_added"] == [
        "get_block_ids_with_load_errors",
        "record_failed_blocks",
    ]
    assert d["breaking"] is False
    assert main(["diff", "0.4.7", "0.5.0", "--fail-on-breaking"]) == 1
    out = capsys.readouterr().out
    assert "BREAKING" in out and "server_urls" in out
    assert main(["diff", "0.5.6", "0.5.6"]) == 0
    assert "no differences" in capsys.readouterr().out


def test_diff_against_an_archive(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    whl = make_wheel(
        tmp_path / "lmcache-9.9-py3-none-any.whl", {V1: ADAPTER_0_3_10_POST2}, version="9.9"
    )
    assert main(["diff", "0.3.10.post2", str(whl), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["to"] == "9.9"
    assert d["classes"][CONNECTOR_IMPL]["methods_removed"] == [
        "get_inference_info",
        "get_inference_version",
        "record_failed_blocks",
    ]
    assert d["breaking"] is True


def test_diff_unknown_side(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diff", "0.3.8", "0.5.6"]) == 3
    assert "not in the release matrix" in capsys.readouterr().err
    assert main(["diff", "banana", "0.5.6"]) == 3
    assert "not a PEP 440 version" in capsys.readouterr().err


def test_reordered_parameters_are_breaking() -> None:
    old = {"surfaces": {"C": {"m": ["a", "b"]}}}
    new = {"surfaces": {"C": {"m": ["b", "a"]}}}
    view = ReleaseView.from_json
    assert diff_releases(view(old), view(new)).breaking is True
    assert diff_releases(view(new), view(new)).breaking is False


def test_capability_facts_for_engine_rows_are_consistent() -> None:
    # the matrix's capability columns are what the shared rule derives from its own surfaces
    from lmcache_compat.core.surface import class_capabilities

    for row in MATRIX.rows:
        caps = class_capabilities(CONNECTOR, row.facts(CONNECTOR_IMPL))
        assert {c.value: c in caps for c in owned_by(CONNECTOR)} == connector_view(
            dict(row.capabilities)
        ), row.version
