"""The ``LMCACHE_*`` environment variables a release reads that are not configuration keys,
read with ``ast`` from every module of the package (nothing imported).

The configuration check must not call a variable "ignored" when some other part of LMCache reads
it (``LMCACHE_CONFIG_FILE``, ``LMCACHE_LOG_LEVEL``, the MP coordinator's settings...). A name
counts when it is a string literal in code (docstrings and log texts that contain spaces do not
count), or is built by a helper of the form ``f"{PREFIX}{name}"`` called with a literal
``name``; a literal ending in ``_`` (``LMCACHE_EC_``) is a prefix: every variable under it is
read by the code that owns it.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from lmcache_compat.errors import ScanError
from lmcache_compat.scan.modules import Index, Module
from lmcache_compat.upstream.source_facts import string_constant

__all__ = ["scan_environment"]

NAME = re.compile(r"^LMCACHE_[A-Z0-9_]*[A-Z0-9]$")
PREFIX = re.compile(r"^LMCACHE_(?:[A-Z0-9]+_)+$")
NEEDLE = b"LMCACHE_"


def _docstrings(tree: ast.Module) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
    return ids


def _built_names(tree: ast.Module, prefixes: dict[str, str]) -> set[str]:
    """Names made by ``def f(name): ... f"{PREFIX_CONSTANT}{name}"`` and ``f("LITERAL")``."""
    builders: dict[str, tuple[str, int]] = {}  # function -> (prefix, index of the name parameter)
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef):
            continue
        params = [a.arg for a in node.args.args]
        for sub in ast.walk(node):
            if not (isinstance(sub, ast.JoinedStr) and len(sub.values) == 2):
                continue
            head, tail = sub.values
            if (
                isinstance(head, ast.FormattedValue)
                and isinstance(head.value, ast.Name)
                and head.value.id in prefixes
                and isinstance(tail, ast.FormattedValue)
                and isinstance(tail.value, ast.Name)
                and tail.value.id in params
            ):
                builders[node.name] = (prefixes[head.value.id], params.index(tail.value.id))
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            found = builders.get(node.func.id)
            if found is not None and len(node.args) > found[1]:
                tail_name = string_constant(node.args[found[1]])
                if tail_name is not None and NAME.match(found[0] + tail_name):
                    out.add(found[0] + tail_name)
    return out


def _module_prefixes(module: Module) -> dict[str, str]:
    out: dict[str, str] = {}
    if module.tree is None:
        return out
    for node in module.tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            value = string_constant(node.value)
            if value is not None and PREFIX.match(value):
                out[node.targets[0].id] = value
    return out


def scan_environment(index: Index, key_names: set[str]) -> dict[str, Any]:
    """``{"names": [...], "prefixes": [...], "unreadable": [...]}``: the literal ``LMCACHE_*``
    names that are not one of ``key_names`` (the keys' own variables), the prefixes, and the
    modules that could not be read (their names are then unknown)."""
    names: set[str] = set()
    prefixes: set[str] = set()
    unreadable: list[str] = []
    for relpath in index.tree.python_files():
        data = index.tree.read(relpath, limit=index.tree.meter.budgets.source_bytes)
        if not data or NEEDLE not in data:
            continue
        try:
            module = index.module(relpath)
        except ScanError:
            unreadable.append(relpath)
            continue
        if module is None or module.tree is None:
            continue
        docs = _docstrings(module.tree)
        for node in ast.walk(module.tree):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and id(node) not in docs
            ):
                if NAME.match(node.value):
                    names.add(node.value)
                elif PREFIX.match(node.value):
                    prefixes.add(node.value)
        names |= _built_names(module.tree, _module_prefixes(module))
    return {
        "names": sorted(names - key_names),
        "prefixes": sorted(prefixes),
        "unreadable": sorted(unreadable),
    }
