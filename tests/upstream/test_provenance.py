"""Every catalog row cites the release diff that shows it appear, and the citation is checked:
the diff is re-derived from the shipped matrix and must name the row's capability and member.
So do the known issues and the version gates (the argument table's ``first=`` rows, the SGLang
side's constants and verified ranges): a gate a surface shows cites its release diff, which
must name its method, parameter or class; a gate no surface shows says so, with its release
range and the upstream issue where one is known. No row is left without a citation."""

from __future__ import annotations

import dataclasses

import pytest

from lmcache_compat.core.arguments import ARGUMENTS
from lmcache_compat.core.catalog import CATALOG, Capability
from lmcache_compat.sglang.known import issues as sglang_issues
from lmcache_compat.sglang.variants import VARIANTS
from lmcache_compat.upstream.diff import ChangeKind, ReleaseView, diff_releases
from lmcache_compat.upstream.known_issues import ALL, KNOWN_ISSUES, Lacks
from lmcache_compat.upstream.locations import LMCACHE_SCANNED
from lmcache_compat.upstream.matrix import load_matrix
from lmcache_compat.upstream.provenance import (
    ISSUE_SOURCES,
    SGLANG_GATES,
    UPSTREAM,
    GateSource,
    argument_source,
    citation,
    evidence,
    gate_evidence,
    issue_source,
    moves,
)


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


def _lower_bound(key: str) -> str | None:
    """The lowest ``X`` of a ``>=X`` or ``==X`` over every row of the known issue ``key`` (one
    issue may be split into rows by how it is known: measured releases, read ones)."""
    from packaging.version import Version

    bounds = [
        part[2:]
        for row in KNOWN_ISSUES
        if row.key == key and isinstance(row.lmcache, tuple)
        for specifiers in row.lmcache
        for part in specifiers.split(",")
        if part.startswith((">=", "=="))
    ]
    return min(bounds, key=Version) if bounds else None


@pytest.mark.parametrize("row", KNOWN_ISSUES, ids=lambda r: r.key)
def test_every_known_issue_has_a_checked_citation(row: object) -> None:
    from lmcache_compat.upstream.known_issues import KnownIssue

    assert isinstance(row, KnownIssue)
    source = issue_source(row)
    assert source.capability or source.since or source.invisible, row.key
    if isinstance(row.lmcache, Lacks):  # the range is the capability's: its catalog citation
        assert source.capability == row.lmcache.capability.value, row.key
        assert evidence(row.lmcache.capability), row.key
    elif source.capability is not None:  # a catalog row's, from its first release on
        capability = Capability(source.capability)
        assert capability.since == _lower_bound(row.key), (row.key, row.lmcache)
        assert evidence(capability), row.key
    elif source.since is not None:  # the range's lower bound is where the diff shows it
        assert source.since == _lower_bound(row.key), (row.key, row.lmcache)
        assert gate_evidence(source), f"{row.key}: {source} names nothing of {source.names}"
    else:  # a behaviour: said so, with its range
        assert source.invisible and source.range, row.key
        assert not source.upstream or all(
            u.startswith("https://github.com/") for u in source.upstream
        )
    if row.vllm != ALL:  # vLLM's side is never in LMCache's surfaces: its range is cited
        assert "vLLM" in source.invisible and all(v in source.range for v in row.vllm), row.key


def test_no_citation_without_a_known_issue() -> None:
    assert set(ISSUE_SOURCES) == {row.key for row in KNOWN_ISSUES}
    text = str(
        issue_source(next(r for r in KNOWN_ISSUES if r.key == "mp-failed-retrieve-reported-loaded"))
    )
    assert "`diff 0.3.12 0.3.13`" in text and "LMCache/LMCache/issues/2865" in text


@pytest.mark.parametrize("row", ARGUMENTS, ids=lambda r: r.key)
def test_every_version_gated_argument_cites_a_diff_that_names_it(row: object) -> None:
    from lmcache_compat.core.arguments import Argument

    assert isinstance(row, Argument)
    source = argument_source(row)
    if source.capability is not None:  # the catalog row's citation (checked above)
        assert row.capability is not None and evidence(row.capability), row.key
        return
    assert source.since == row.first
    found = gate_evidence(source)
    assert found, f"{row.key}: {source} does not name {source.names}"


def test_a_wrong_first_or_lower_bound_is_caught() -> None:
    """Each diff-cited gate cited one release late: that diff names nothing of it."""
    versions = load_matrix().versions
    gates = [argument_source(r) for r in ARGUMENTS if r.first is not None]
    gates += [s for s in ISSUE_SOURCES.values() if s.since is not None]
    assert len(gates) >= 10
    for gate in gates:
        assert gate.since is not None
        later = versions[versions.index(gate.since) + 1 :]
        if later:
            moved = dataclasses.replace(gate, since=later[0])
            assert gate_evidence(moved) == [], gate


def test_the_sglang_gates_are_cited() -> None:
    """The SGLang side's version constants and every variant's verified ranges: none is in a
    scanned surface, so each says so with its range (the sglang tier measured them)."""
    for name in ("SINGLE_RANK_SHORTCUT", "CPU_IN_PROCESS_FROM"):
        gate = SGLANG_GATES[name]
        assert gate.invisible and getattr(sglang_issues, name) in gate.range, name
    assert any(v.verified for v in VARIANTS) and SGLANG_GATES["verified"].invisible
    assert "CPU_IN_PROCESS_FROM" in SGLANG_GATES["verified"].invisible
    ins = {spec for v in VARIANTS for mode, spec in v.verified if mode == "in-process"}
    assert all(
        s.startswith(f"=={sglang_issues.CPU_IN_PROCESS_FROM}")
        or s.startswith(f">={sglang_issues.CPU_IN_PROCESS_FROM}")
        or s == "==0.5.6"
        for s in ins
    ), ins


def test_a_gate_source_without_a_diff_derives_nothing() -> None:
    assert gate_evidence(GateSource(invisible="x", range="y")) == []
