"""``diff`` on a class that became ambiguous: two candidates are not a removal."""

from __future__ import annotations

from pathlib import Path

from lmcache_compat.upstream import locations as loc
from lmcache_compat.upstream.diff import ChangeKind, ReleaseView, diff_releases
from lmcache_compat.upstream.scanner import scan
from tests.support.archives import ADAPTER_0_3_10_POST2, ENGINE, ENGINE_0_3_10_POST2, V1, make_tree


def _view(root: Path, files: dict[str, str]) -> ReleaseView:
    return ReleaseView.from_scan(scan(make_tree(root, files)))


def test_two_candidates_are_reported_ambiguous_not_removed(tmp_path: Path) -> None:
    """The class left its known path for two modules: diff says "class ambiguous" (breaking:
    nothing can find it by name) and names both; its capabilities are undecided, so none is
    reported removed. The JSON scan round-trips the same reading."""
    old = _view(tmp_path / "old", {V1: ADAPTER_0_3_10_POST2})
    files = {"lmcache/a/one.py": ADAPTER_0_3_10_POST2, "lmcache/b/two.py": ADAPTER_0_3_10_POST2}
    new = _view(tmp_path / "new", files)
    result = diff_releases(old, new)
    assert [c.kind for c in result.changes] == [ChangeKind.CLASS_AMBIGUOUS]
    assert result.breaking
    (change,) = result.changes
    assert change.cls == loc.CONNECTOR_IMPL.name
    assert change.before == "lmcache.integration.vllm.vllm_v1_adapter"
    assert change.after == "lmcache.a.one, lmcache.b.two"
    assert "one of lmcache.a.one, lmcache.b.two" in result.format()
    data = result.to_json()
    assert data["capabilities_removed"] == []
    assert data["classes"][loc.CONNECTOR_IMPL.name]["ambiguous"]["candidates"] == change.after
    again = scan(make_tree(tmp_path / "json", files)).to_json()
    assert diff_releases(old, ReleaseView.from_json(again)).changes == result.changes


def test_a_class_really_gone_is_still_removed(tmp_path: Path) -> None:
    old = _view(tmp_path / "old", {V1: ADAPTER_0_3_10_POST2, ENGINE: ENGINE_0_3_10_POST2})
    new = _view(tmp_path / "new", {V1: "Y = 2\n", ENGINE: ENGINE_0_3_10_POST2})
    kinds = {c.kind for c in diff_releases(old, new).changes}
    assert ChangeKind.CLASS_REMOVED in kinds and ChangeKind.CAPABILITY_REMOVED in kinds


def test_widening_to_object_or_any_is_not_breaking() -> None:
    """``Any -> object`` (LMCache 0.5.3 -> 0.5.4, a class's ``last_node``) and ``int -> Any``
    both accept every value the old annotation did: widened, not breaking. Narrowing back is
    breaking."""
    from lmcache_compat.core.annotations import widens
    from lmcache_compat.upstream.matrix import load_matrix

    matrix = load_matrix()
    shipped = diff_releases(
        ReleaseView.from_row(matrix.row("0.5.3")), ReleaseView.from_row(matrix.row("0.5.4"))
    )
    typed = [c for c in shipped.changes if c.before == "Any" and c.after == "object"]
    assert typed and all(c.kind is ChangeKind.PARAMETER_TYPE_WIDENED for c in typed)
    assert not any(c.breaking for c in typed)
    for old, new in (("Any", "object"), ("int", "Any"), ("bytes", "typing.Any"), ("int", "object")):
        assert widens(old, new), (old, new)
    for old, new in (("object", "int"), ("Any", "int"), ("list[int]", "list[object]")):
        assert not widens(old, new), (old, new)
