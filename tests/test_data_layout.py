"""The shipped data files are laid out exactly as their maintainer script writes them (one
writer, tools/maintainer.py's json_lines, and each script's choice of what gets a line); the
release matrix one file per release beside an index (lmcache_compat.upstream.shipped)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

from lmcache_compat.upstream.matrix import load_matrix, row_json
from lmcache_compat.upstream.shipped import release_row
from tools import maintainer
from tools.paths import ROOT

DATA = ROOT / "lmcache_compat" / "upstream" / "data"


def _script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("data_file", "script", "flat"),
    [
        ("config_schema.json", "build_config_schema", 3),
        ("sglang_grid.json", "build_sglang_grid", 2),
    ],
)
def test_a_data_file_is_its_script_s_layout(data_file: str, script: str, flat: int) -> None:
    text = (DATA / data_file).read_text(encoding="utf-8")
    data = json.loads(text)
    module = _script(script)
    if script == "build_config_schema":

        def expand(path: tuple[object, ...]) -> bool:
            return bool(module._expand(path, data["releases"]))
    else:
        expand = module._expand
    assert "\n".join(maintainer.json_lines(data, expand, flat=flat)) + "\n" == text


def test_the_release_matrix_is_one_file_per_release_and_an_index() -> None:
    """releases/<version>.json (a row, readable on its own) and releases/index.json (version,
    artifact, sha256, oldest first), each in the script's layout; no other file."""
    module = _script("build_release_matrix")
    folder = DATA / "releases"
    index_text = (folder / "index.json").read_text(encoding="utf-8")
    index = json.loads(index_text)
    lines = maintainer.json_lines(index, module._expand_index, flat=1)
    assert "\n".join(lines) + "\n" == index_text
    versions = [e["version"] for e in index["releases"]]
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        ["index.json", *(f"{v}.json" for v in versions)]
    )
    for version in versions:
        text = (folder / f"{version}.json").read_text(encoding="utf-8")
        row = json.loads(text)
        assert row["version"] == version and "sha256" not in row and "artifact" not in row
        assert "\n".join(maintainer.json_lines(row, module._expand, flat=1)) + "\n" == text
    assert not (DATA / "releases.json").exists()  # the single file of the layout before


def test_json_lines_expands_only_what_it_is_told() -> None:
    data = {"a": [1, 2], "b": {"c": {}, "d": {"e": 1}}}
    lines = maintainer.json_lines(data, lambda path: path in ((), ("b",), ("b", "d")), flat=1)
    assert lines == [
        "{",
        '"a": [1, 2],',
        '"b": {',
        '  "c": {},',
        '  "d": {',
        '    "e": 1',
        "  }",
        "}",
        "}",
    ]
    assert json.loads("\n".join(lines)) == data


def _regenerate(module: ModuleType, rows: list[dict[str, object]], into: Path) -> dict[str, bytes]:
    """What ``write_matrix`` writes for ``rows`` into ``into`` (the script's own writer), by
    file name."""
    folder = into / "releases"
    setattr(module, "DATA", folder)  # noqa: B010 (a module loaded from its file: no stubs)
    setattr(module, "SINGLE_FILE", into / "releases.json")  # noqa: B010
    setattr(module, "data_path", lambda name: into.joinpath(*name.split("/")))  # noqa: B010
    module.write_matrix(rows)
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_regenerating_the_release_matrix_is_deterministic(tmp_path: Path) -> None:
    """Two regenerations give identical bytes, and they are the shipped files: once from the
    shipped rows (``--from-shipped``), once from what a scan of each artifact says (its row's
    ``scan --json``, capabilities included, as ``--offline`` writes it). No file stores
    capabilities: the library derives them from the surfaces."""
    module = _script("build_release_matrix")
    shipped = {p.name: p.read_bytes() for p in sorted((DATA / "releases").iterdir())}
    from_rows = _regenerate(module, module.shipped_rows(), tmp_path / "a")
    scanned = []
    for row in load_matrix().rows:
        stored = release_row(row.version)
        again = row_json(row.scan_json("x"), artifact=row.artifact, sha256=row.sha256)
        again |= {"size": stored["size"], "tree_sha256": stored["tree_sha256"]}
        scanned.append(again)
    from_scans = _regenerate(module, scanned, tmp_path / "b")
    assert from_rows == from_scans == shipped
    assert all(b'"capabilities"' not in data for data in shipped.values())
