"""Upstream locations: written once (``lmcache_compat/upstream/locations.py``), found by name when
moved."""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

from lmcache_compat.errors import AmbiguousLocationError
from lmcache_compat.scan.targets import open_source
from lmcache_compat.upstream import locations as loc
from lmcache_compat.upstream.matrix import load_matrix
from lmcache_compat.upstream.scanner import scan, scan_tree
from tests.support.archives import (
    ADAPTER_0_3_10_POST2,
    ENGINE,
    ENGINE_0_3_10_POST2,
    make_tree,
    make_wheel,
)

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "lmcache_compat"
#: An upstream module path, dotted or as a file path (``lmcache.v1.x``, ``vllm/distributed``).
#: a file name such as ``lmcache.yaml`` (the CLI's examples) is not a module path
UPSTREAM_PATH = re.compile(
    r"(?<![\w.])(lmcache|vllm|sglang)[./](?!(?:yaml|yml|json|toml)\b)[A-Za-z_]"
)


def _docstrings(tree: ast.Module) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
    return ids


def _spelled_paths(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in docs
            and not node.value.startswith("https://")  # a tracker's link, not a module path
            and UPSTREAM_PATH.search(node.value)
        ):
            found.append(f"{path.name}:{node.lineno}: {node.value!r}")
    return found


def test_no_upstream_module_path_is_spelled_outside_the_locations_module() -> None:
    offenders = [
        hit
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.name != "locations.py"
        for hit in _spelled_paths(path)
    ]
    assert offenders == []
    assert _spelled_paths(PACKAGE / "upstream" / "locations.py"), (
        "the check must see the locations module"
    )


def test_the_check_catches_a_path_in_code(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text('"""lmcache.v1.cache_engine in a docstring is fine."""\nX = "lmcache.v1.x"\n')
    assert _spelled_paths(bad) == ["bad.py:2: 'lmcache.v1.x'"]


def test_every_module_the_matrix_records_is_a_known_path() -> None:
    places = {p.name: p for p in loc.LMCACHE_SCANNED}
    for row in load_matrix().rows:
        for cls, module in row.modules.items():
            assert module in places[cls].modules, (row.version, cls, module)


def test_known_paths_are_newest_first() -> None:
    # 0.5.7rc2 moved the in-process classes; the new place is tried first
    assert loc.CONNECTOR_IMPL.modules[0].startswith("lmcache.inprocess.")
    assert loc.ENGINE.modules[0].startswith("lmcache.inprocess.")


MOVED = "lmcache/somewhere/new_home.py"


def _blind(places: tuple[loc.Place, ...]) -> tuple[loc.Place, ...]:
    """The places with every known path replaced by one that no release has."""
    return tuple(dataclasses.replace(p, modules=(f"{p.package}.nowhere",)) for p in places)


def test_a_class_at_no_known_path_is_found_by_name(tmp_path: Path) -> None:
    whl = make_wheel(
        tmp_path / "lmcache-9.9-py3-none-any.whl",
        {"lmcache/__init__.py": "", MOVED: ADAPTER_0_3_10_POST2},
        version="9.9",
    )
    result = scan(whl)
    assert result.modules["LMCacheConnectorV1Impl"] == "lmcache.somewhere.new_home"
    assert result.found_by["LMCacheConnectorV1Impl"] == "search"
    assert result.capabilities["kv_events"] is True
    data = result.to_json()
    assert data["modules"]["LMCacheConnectorV1Impl"] == "lmcache.somewhere.new_home"


def test_candidates_without_the_core_methods_are_not_taken(tmp_path: Path) -> None:
    decoy = "class LMCacheConnectorV1Impl:\n    def unrelated(self): ...\n"
    tree = make_tree(
        tmp_path / "src",
        {"lmcache/__init__.py": "", "lmcache/decoy.py": decoy, MOVED: ADAPTER_0_3_10_POST2},
    )
    assert scan(tree).modules["LMCacheConnectorV1Impl"] == "lmcache.somewhere.new_home"


def test_several_matching_candidates_are_refused_and_named(tmp_path: Path) -> None:
    """Two definitions match and neither is at a known path: none is chosen. The scan names
    both, says which capabilities that leaves unknown, and keeps the classes it could read; the
    run-time lookup refuses with both names."""
    tree = make_tree(
        tmp_path / "src",
        {
            "lmcache/__init__.py": "",
            MOVED: ADAPTER_0_3_10_POST2,
            "lmcache/other/copy.py": ADAPTER_0_3_10_POST2,
            ENGINE: ENGINE_0_3_10_POST2,
        },
    )
    result = scan(tree)
    assert result.ambiguous == {
        "LMCacheConnectorV1Impl": ("lmcache.other.copy", "lmcache.somewhere.new_home")
    }
    assert "LMCacheConnectorV1Impl" not in result.missing_classes
    unknown = result.undecided
    assert "kv_events" in unknown and "lmcache.other.copy" in unknown["kv_events"]
    assert "engine_kv_events" not in unknown and result.capabilities["engine_kv_events"]
    data = result.to_json()
    assert data["ambiguous"]["LMCacheConnectorV1Impl"] == [
        "lmcache.other.copy",
        "lmcache.somewhere.new_home",
    ]
    from lmcache_compat.scan.classreader import ClassReader
    from lmcache_compat.scan.modules import Index
    from lmcache_compat.upstream.resolve import locate_all

    with open_source(tree) as source:
        index = Index(source)
        located = locate_all(index, ClassReader(index), (loc.CONNECTOR_IMPL,))
        error = located.error(source.description, loc.CONNECTOR_IMPL)
    assert isinstance(error, AmbiguousLocationError)
    assert error.candidates == ("lmcache.other.copy", "lmcache.somewhere.new_home")
    assert "lmcache.other.copy" in str(error) and "lmcache.somewhere.new_home" in str(error)


def test_blind_scan_of_a_tree_equals_the_known_path_scan(tmp_path: Path) -> None:
    from tests.support.archives import V1

    tree = make_tree(tmp_path / "src", {"lmcache/__init__.py": "", V1: ADAPTER_0_3_10_POST2})
    with open_source(tree) as opened:
        blind = scan_tree(opened, _blind(loc.LMCACHE_SCANNED))
    known = scan(tree)
    assert blind.modules == known.modules and blind.capabilities == known.capabilities
    assert blind.found_by == {"LMCacheConnectorV1Impl": "search"}
