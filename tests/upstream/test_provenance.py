"""Every catalog row cites the release diff that shows it appear, and the citation is checked:
the diff is re-derived from the shipped matrix and must name the row's capability and member."""

from __future__ import annotations

import dataclasses

import pytest

from lmcache_compat.core.catalog import CATALOG, Capability
from lmcache_compat.upstream.diff import ChangeKind, ReleaseView, diff_releases
from lmcache_compat.upstream.locations import LMCACHE_SCANNED
from lmcache_compat.upstream.matrix import load_matrix
from lmcache_compat.upstream.provenance import UPSTREAM, citation, evidence, moves


@pytest.mark.parametrize("spec", CATALOG, ids=lambda s: s.capability.value)
def test_every_row_cites_a_diff_that_names_it(spec: object) -> None:
    cited = citation(spec)  # type: ignore[arg-type]
    assert cited.previous is not None, "since is the matrix's first release: nothing to cite"
    found = evidence(spec)  # type: ignore[arg-type]
    assert found, f"{cited}: the diff does not name {cited.capability}"
    assert found[0] == f"capability added: {cited.capability}"
    assert cited.command == f"lmcache-compat diff {cited.previous} {cited.since}"


def test_a_wrong_since_is_caught() -> None:
    """The same row cited one release late: that diff names nothing of it."""
    versions = load_matrix().versions
    for spec in CATALOG:
        later = versions[versions.index(spec.since) + 1 :]
        if later:
            moved = dataclasses.replace(spec, since=later[0])
            assert evidence(moved) == [], spec.capability


def test_upstream_citations_name_catalog_rows_and_are_links() -> None:
    names = {c.value for c in Capability}
    for capability, links in UPSTREAM.items():
        assert capability in names
        assert links and all(link.startswith("https://github.com/") for link in links)
    assert str(citation(Capability.LOAD_ERROR_REPORTING)).endswith(
        "LMCache/LMCache/pull/1835, https://github.com/vllm-project/vllm/pull/27978"
    )


def test_every_known_move_is_cited_by_the_diff_that_shows_it() -> None:
    """Each module a scanned class is known at is one some shipped row records, and each change
    of module between neighbouring releases is reported by that diff as a move of the class."""
    matrix = load_matrix()
    for place in LMCACHE_SCANNED:
        recorded = {row.modules.get(place.name) for row in matrix.rows}
        assert set(place.modules) <= recorded, (place.name, set(place.modules) - recorded)
    found = moves()
    assert found, "0.5.7rc2 moved the in-process classes under lmcache.inprocess"
    for move in found:
        diff = diff_releases(
            ReleaseView.from_row(matrix.row(move.previous)),
            ReleaseView.from_row(matrix.row(move.since)),
        )
        shown = [
            c
            for c in diff.changes
            if c.cls == move.cls
            and c.kind in (ChangeKind.CLASS_MOVED, ChangeKind.CLASS_MOVED_REEXPORTED)
        ]
        assert [(c.before, c.after) for c in shown] == [(move.before, move.after)], str(move)
