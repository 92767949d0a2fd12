"""The shipped data files are laid out exactly as their maintainer script writes them (one
writer, tests/support/maintainer.json_lines, and each script's choice of what gets a line)."""

from __future__ import annotations

import importlib.util
import json
from types import ModuleType

import pytest

from tests.support import maintainer
from tests.support.paths import ROOT

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
        ("releases.json", "build_release_matrix", 3),
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
