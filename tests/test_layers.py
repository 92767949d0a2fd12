"""The package's import graph, read with ``ast``: no cycle between the top-level parts of
``lmcache_compat`` (its subpackages and modules), nothing in the package imports ``tests``, and
no script, benchmark or maintainer tool imports ``tests`` either.

Every import counts, at module level or inside a function (a lazy import is still a
dependency); only imports under ``if TYPE_CHECKING:`` are left out (they never run).
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "lmcache_compat"

#: Files outside ``tests/`` that still import a test module, each with why it is left. The
#: list only shrinks: a new importer fails the test, and so does an entry that no longer imports.
IMPORTS_TESTS_PENDING = {
    "benchmarks/bench_mp_server.py": "its helpers are the mp-servers tier's own modules "
    "(tests/tiers/mp_server/), edited concurrently; they move to tools/ after that work lands",
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            test = node.test
            name = test.id if isinstance(test, ast.Name) else getattr(test, "attr", None)
            if name == "TYPE_CHECKING":
                for child in node.body:
                    skipped.update(id(n) for n in ast.walk(child))
    return skipped


def imports(path: Path, text: str | None = None) -> Iterator[str]:
    """Every module ``path`` (or ``text`` as if it were that file) imports (``from a import b``
    yields ``a`` and ``a.b``: ``b`` may be a submodule), relative imports resolved,
    ``TYPE_CHECKING`` blocks left out."""
    tree = ast.parse(path.read_text(encoding="utf-8") if text is None else text)
    skipped = _type_checking_nodes(tree)
    package = _module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package[: len(package) - (node.level - 1)]
                base = ".".join([*up, *([node.module] if node.module else [])])
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names)


def _part(module: str) -> str | None:
    """The top-level part of ``lmcache_compat`` a module belongs to (``None``: the package's
    own ``__init__``, which may import any part)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def part_graph() -> dict[str, dict[str, set[str]]]:
    """part -> part it imports -> the ``module -> module`` imports that make the edge."""
    graph: dict[str, dict[str, set[str]]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        here = _module_name(path)
        source = _part(here)
        if source is None:
            continue
        graph.setdefault(source, {})
        for target in imported_by(path):
            if not target.startswith("lmcache_compat."):
                continue
            dest = _part(target)
            if dest is not None and dest != source:
                graph[source].setdefault(dest, set()).add(f"{here} -> {target}")
    return graph


def cycles(graph: dict[str, dict[str, set[str]]]) -> list[list[str]]:
    """The strongly connected components with more than one part (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_cycle_between_top_level_parts() -> None:
    graph = part_graph()
    assert len(graph) > 15  # the walk saw the package's parts
    found = cycles(graph)
    detail = [
        f"{a} -> {b}: {sorted(graph[a][b])[:3]}"
        for component in found
        for a in component
        for b in graph[a]
        if b in component
    ]
    assert not found, "\n".join(detail)


def test_cycle_detection_sees_a_cycle() -> None:
    """The check itself: a two-part cycle and a three-part one are found."""
    edge = {"a module -> another"}
    graph = {"a": {"b": edge}, "b": {"a": edge}, "c": {"d": edge}, "d": {"e": edge}}
    graph["e"] = {"c": edge}
    assert cycles(graph) == [["a", "b"], ["c", "d", "e"]]


def test_a_lazy_import_counts_and_type_checking_does_not() -> None:
    text = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from lmcache_compat.report import cli\n"
        "def f():\n    from lmcache_compat.scan import targets\n"
        "from .. import errors\n"
    )
    found = set(imports(PACKAGE / "mp" / "probe.py", text))  # the file is never written
    assert {"lmcache_compat.scan.targets", "lmcache_compat.errors"} <= found
    assert not any(name.startswith("lmcache_compat.report") for name in found)


@functools.cache
def imported_by(path: Path) -> frozenset[str]:
    """:func:`imports` of a file, read once per run (both package tests walk every file)."""
    return frozenset(imports(path))


def _imports_tests(path: Path) -> list[str]:
    return sorted({m for m in imported_by(path) if m == "tests" or m.startswith("tests.")})


def test_the_package_never_imports_tests() -> None:
    offenders = {
        str(path.relative_to(ROOT)): _imports_tests(path)
        for path in sorted(PACKAGE.rglob("*.py"))
        if _imports_tests(path)
    }
    assert not offenders


def test_no_script_benchmark_or_tool_imports_tests() -> None:
    offenders = {
        str(path.relative_to(ROOT)): _imports_tests(path)
        for folder in ("scripts", "benchmarks", "tools")
        for path in sorted((ROOT / folder).rglob("*.py"))
        if _imports_tests(path)
    }
    unexpected = {k: v for k, v in offenders.items() if k not in IMPORTS_TESTS_PENDING}
    assert not unexpected, f"import tests/ (move what they need into tools/): {unexpected}"
    stale = set(IMPORTS_TESTS_PENDING) - set(offenders)
    assert not stale, f"no longer import tests/: drop them from IMPORTS_TESTS_PENDING: {stale}"
