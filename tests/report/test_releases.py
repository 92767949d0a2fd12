"""``lmcache-compat releases`` and lmcache_compat.report.releases."""

from __future__ import annotations

import json

import pytest

from lmcache_compat.report.cli import main
from lmcache_compat.report.releases import distinct, render, select
from lmcache_compat.upstream.matrix import load_matrix

MATRIX = load_matrix()


def test_select() -> None:
    assert select("all") == MATRIX.versions
    assert select("v0.3.9") == ["0.3.9"]
    assert select(">=0.5.5") == ["0.5.5", "0.5.6", "0.5.7rc2"]  # pre-releases included
    assert select(">=0.3.9.post1,<0.3.10") == ["0.3.9.post1", "0.3.9.post2"]
    assert select("distinct") == [d.version for d in distinct("connector")]
    assert select("distinct:mp") == [d.version for d in distinct("mp")]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("0.3.8", "closest known releases are 0.3.7 and 0.3.9"),
        (">=9", "no shipped LMCache release matches '>=9'"),
        ("~~", "is not a release SPEC"),
        ("distinct:gpu", "unknown role 'gpu'"),
    ],
)
def test_select_refuses(spec: str, message: str) -> None:
    with pytest.raises(Exception, match=message):
        select(spec)


@pytest.mark.parametrize("role", ["connector", "mp", "engine"])
def test_distinct_covers_every_surface_once(role: str) -> None:
    """Every release's surface of the role equals the surface of the distinct release that
    starts its run, and consecutive distinct releases differ."""
    from lmcache_compat.upstream.release_query import _role_classes, _surface

    classes = _role_classes()[role]
    found = distinct(role)
    starts = [d.version for d in found]
    key = {r.version: [_surface(r, c) for c in classes] for r in MATRIX.rows}
    present = [v for v in MATRIX.versions if any(s is not None for s in key[v])]
    assert starts[0] == present[0] and found[0].changes == ("first",)
    current = present[0]
    for v in present:
        if v in starts:
            assert v == present[0] or key[v] != key[current]
            current = v
        assert key[v] == key[current], (role, v)
    assert all(d.changes for d in found)


def test_distinct_connector_names_the_changes() -> None:
    found = {d.version: d.changes for d in distinct("connector")}
    assert "LMCacheConnectorV1Impl.get_block_ids_with_load_errors added" in found["0.3.9.post1"]
    assert "LMCacheConnectorV1Impl.get_kv_events added" in found["0.3.10.post2"]
    assert any(c.startswith("LMCacheConnectorV1Impl moved from") for c in found["0.5.7rc2"])
    assert "0.3.9" not in found


def test_formats(capsys: pytest.CaptureFixture[str]) -> None:
    assert render(["0.3.0", "0.5.6"], "tox") == "{0.3.0,0.5.6}"
    assert json.loads(render(["0.3.0"], "github")) == {"lmcache": ["0.3.0"]}
    assert main(["releases", "--distinct", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [r["version"] for r in data["releases"]] == select("distinct")
    assert main(["releases", ">=0.5.6", "--format", "lines"]) == 0
    assert capsys.readouterr().out.split() == ["0.5.6", "0.5.7rc2"]
    assert main(["releases", "--distinct", "--role", "engine", "--format", "tox"]) == 0
    out = capsys.readouterr().out.strip()
    assert out == "{" + ",".join(select("distinct:engine")) + "}"


@pytest.mark.parametrize(("argv", "status"), [(["0.3.8"], 3), (["~~"], 3), ([">=9"], 3)])
def test_failures_are_one_line(
    argv: list[str], status: int, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["releases", *argv]) == status
    err = capsys.readouterr().err
    assert err.startswith("lmcache-compat releases: error: ") and err.count("\n") == 1
