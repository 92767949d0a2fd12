"""How ``config check`` goes through ``lmcache_compat/config/``: one module per question (the
check of a file, of the environment and of the active configuration in one), and calls that
only go down the layers (a module never calls one that imports it)."""

from __future__ import annotations

import ast
from pathlib import Path

from tools.config_path import trace_sample

CONFIG = Path(__file__).resolve().parents[2] / "lmcache_compat" / "config"

#: config/'s modules from the top: each calls only modules after it.
LAYERS = ("check.py", "history.py", "resolver.py", "schema.py")


def test_config_check_goes_through_one_module_per_question() -> None:
    path = trace_sample()
    assert set(path.visits) == {*LAYERS, "yamlread.py"}


#: Returns of the sample ``config check`` to a config/ file it had already left, counting files
#: entered from another (``python -m tools.config_path``, second line). Was 12 (22 before the
#: config/ rearrangement); the target is 0 (each file visited once). The path left: schema ->
#: check -> yamlread -> resolver -> history -> schema -> resolver -> history -> check ->
#: resolver -> history -> check (check asks the resolver, then the history, key by key).
RETURNS = 7


def test_config_check_returns_to_a_file_no_more_than_measured() -> None:
    path = trace_sample(entered=True)
    assert (path.files, path.returns) == (5, RETURNS), " -> ".join(path.visits)


def test_calls_along_the_path_only_go_down() -> None:
    edges = trace_sample().edges
    up = {
        (a, b)
        for a, b in edges
        if a in LAYERS and b in LAYERS and LAYERS.index(a) > LAYERS.index(b)
    }
    assert edges and not up
    assert {a for a, b in edges if b == "yamlread.py"} == {"check.py"}


def test_no_module_imports_another_ones_private_names() -> None:
    private = []
    for module in sorted(CONFIG.glob("*.py")):
        for node in ast.walk(ast.parse(module.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "lmcache_compat.config."
            ):
                private += [f"{module.name}: {a.name}" for a in node.names if a.name[0] == "_"]
    assert not private
