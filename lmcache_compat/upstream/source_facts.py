"""Small ``ast`` readers shared by the configuration scans (:mod:`config_scan`,
:mod:`env_scan`, :mod:`mp_flags_scan`): literal values, module-level assignments, the module
that defines a :class:`~lmcache_compat.upstream.locations.Place`. Nothing is imported."""

from __future__ import annotations

import ast
import json
from collections.abc import Iterator
from typing import Any

from lmcache_compat.errors import InvalidSourceError
from lmcache_compat.inputs import load_json
from lmcache_compat.scan.modules import Index, Module, top_level
from lmcache_compat.upstream.locations import Place, module_file

__all__ = [
    "assignment",
    "calls_in",
    "function",
    "literal",
    "method",
    "modules_of",
    "parents",
    "place_module",
    "string_constant",
    "text",
]


def text(node: ast.expr) -> str:
    """Source text of ``node`` on one line."""
    return " ".join(ast.unparse(node).split())


def parents(node: ast.AST) -> dict[ast.AST, ast.AST]:
    """Child -> parent for every node under ``node``."""
    return {child: parent for parent in ast.walk(node) for child in ast.iter_child_nodes(parent)}


def literal(node: ast.expr | None) -> Any:
    """A JSON value for a literal (tuples as lists), else ``{"expr": source text}``."""
    if node is None:
        return None
    try:
        value = ast.literal_eval(node)
        text = json.dumps(value)
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
        return {"expr": " ".join(ast.unparse(node).split())}
    try:  # the reader contract: the literal's text is the scanned release's
        loaded: Any = load_json(text, "a literal", InvalidSourceError)
    except InvalidSourceError:
        return {"expr": " ".join(ast.unparse(node).split())}
    return loaded


def string_constant(node: ast.expr | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def assignment(module: Module, name: str) -> ast.expr | None:
    """The value last assigned to the module-level ``name`` (plain or annotated)."""
    found: ast.expr | None = None
    if module.tree is None:
        return None
    for node in top_level(module.tree.body):
        if isinstance(node, ast.Assign):
            if any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
                found = node.value
        elif (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and node.target.id == name
            and node.value is not None
        ):
            found = node.value
    return found


def function(module: Module, name: str) -> ast.FunctionDef | None:
    """The module-level function ``name``."""
    if module.tree is None:
        return None
    for node in top_level(module.tree.body):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    return None


def method(cls: ast.ClassDef, name: str) -> ast.FunctionDef | None:
    for node in cls.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    return None


def calls_in(node: ast.AST) -> Iterator[ast.Call]:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call):
            yield sub


def modules_of(index: Index, place: Place) -> Iterator[Module]:
    """The known modules of ``place`` that exist in this tree, newest first."""
    for dotted in place.modules:
        module = index.module(module_file(dotted))
        if module is not None:
            yield module


def _defines(module: Module, place: Place) -> bool:
    if place.kind == "table":
        return assignment(module, place.name) is not None
    if place.kind == "function":
        return place.name in module.functions
    return place.name in module.classes


def place_module(index: Index, place: Place, search: bool = True) -> Module | None:
    """The module that defines ``place``: a known path first, else (``search``) the one module
    of the package whose source defines that name at top level (several: ``None``)."""
    for module in modules_of(index, place):
        if _defines(module, place):
            return module
    if not search:
        return None
    needle = place.name.encode()
    found: list[Module] = []
    for relpath in index.tree.python_files():
        data = index.tree.read(relpath, limit=index.tree.meter.budgets.source_bytes)
        if not data or needle not in data:
            continue
        candidate = index.module(relpath)
        if candidate is not None and _defines(candidate, place):
            found.append(candidate)
    return found[0] if len(found) == 1 else None
