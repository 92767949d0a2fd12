"""One sglang LMCache cache module, read with ``ast``: its ``lmcache`` import lines (and the
``except ImportError`` handler that turns their failure into another error), every call of an
imported LMCache name with its keywords' source text, every method call and attribute read on
a connector the cache holds, the mode each runs in, and the modes the cache can reach
(:func:`integration_facts`; :mod:`lmcache_compat.sglang.known.reader` reads the release)."""

from __future__ import annotations

import ast
import json
import re
from typing import Any

from lmcache_compat.core.roles import SGLANG_LAYERWISE, SGLANG_MP, SGLANG_UNIFIED
from lmcache_compat.scan.modules import Module, parse_source
from lmcache_compat.scan.sources import SourceTree
from lmcache_compat.sglang.known.types import CallJSON, ImportJSON, IntegrationJSON, MethodJSON
from lmcache_compat.upstream import locations as loc

__all__ = ["CONNECTOR_MODES", "integration_facts", "module_tree"]

#: The mode each connector class runs in.
CONNECTOR_MODES: dict[str, str] = {
    SGLANG_LAYERWISE.name: "in-process",
    SGLANG_MP.name: "mp",
    SGLANG_UNIFIED.name: "unified-mp",
}
#: sglang's names for the modes of ``LMCRadixCache`` (``LMCacheMode.IP`` / ``.MP``).
_SGLANG_MODE_NAMES = {"IP": "in-process", "MP": "mp"}
#: Methods of the cache that sglang calls only in one mode: ``init_load_back`` runs only when
#: ``match_prefix`` reported a host hit, which only the MP path does (0.5.13 ... 0.5.20).
_MODE_OF_HOOK = {"init_load_back": "MP"}


def module_tree(tree: SourceTree, module: Module) -> ast.Module:
    data = tree.read(module.relpath) or b""
    return parse_source(module.relpath, data, tree.description, tree.meter)


def _parents(root: ast.AST) -> dict[ast.AST, ast.AST]:
    return {child: node for node in ast.walk(root) for child in ast.iter_child_nodes(node)}


def _guard(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> tuple[str | None, bool]:
    """(the error an enclosing ``except ImportError`` raises instead, whether the import runs
    at module import: not inside a function and not under ``TYPE_CHECKING``)."""
    guard: str | None = None
    at_import = True
    child, parent = node, parents.get(node)
    while parent is not None:
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)):
            at_import = False
        if isinstance(parent, ast.If) and "TYPE_CHECKING" in ast.unparse(parent.test):
            at_import = False
        if guard is None and isinstance(parent, ast.Try) and child in parent.body:
            for handler in parent.handlers:
                caught = ast.unparse(handler.type) if handler.type is not None else "BaseException"
                if re.search(r"\b(ImportError|ModuleNotFoundError|Exception)\b", caught):
                    guard = _raised(handler.body) or "the error is swallowed"
        child, parent = parent, parents.get(parent)
    return guard, at_import


def _raised(body: list[ast.stmt]) -> str | None:
    for stmt in body:
        if isinstance(stmt, ast.Raise) and isinstance(stmt.exc, ast.Call):
            name = ast.unparse(stmt.exc.func)
            args = stmt.exc.args
            if args and isinstance(args[0], ast.Constant) and isinstance(args[0].value, str):
                return f"{name}: {args[0].value}"
            return name
        if isinstance(stmt, ast.Raise):
            return "the ImportError itself" if stmt.exc is None else ast.unparse(stmt.exc)
    return None


def _mode(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> str:
    """``IP``, ``MP`` or ``shared``: an enclosing ``if ... Mode.X`` branch, a function named for
    its mode (``_mp_load_back``), or a hook sglang calls in one mode only."""
    child, parent = node, parents.get(node)
    while parent is not None:
        if isinstance(parent, ast.If) and child in parent.body:
            found = re.search(r"Mode\.(MP|IP)\b", ast.unparse(parent.test))
            if found:
                return found.group(1)
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)):
            named = re.search(r"(?:^|_)(mp|ip)(?:_|$)", parent.name)
            if named:
                return named.group(1).upper()
            if parent.name in _MODE_OF_HOOK:
                return _MODE_OF_HOOK[parent.name]
        child, parent = parent, parents.get(parent)
    return "shared"


def _enclosing_function(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> ast.AST | None:
    parent = parents.get(node)
    while parent is not None and not isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)):
        parent = parents.get(parent)
    return parent


def _keywords(call: ast.Call, parents: dict[ast.AST, ast.AST]) -> dict[str, str]:
    """keyword -> source text; ``**name`` expanded where ``name = dict(...)`` (or a dict
    display) is assigned in the same function, else kept as ``**name``."""
    out: dict[str, str] = {}
    scope = _enclosing_function(call, parents)
    for kw in call.keywords:
        if kw.arg is not None:
            out[kw.arg] = ast.unparse(kw.value)
            continue
        expanded = _expanded(kw.value, scope) if scope is not None else None
        if expanded is None:
            out["**" + ast.unparse(kw.value)] = ast.unparse(kw.value)
        else:
            out.update(expanded)
    return out


def _expanded(value: ast.expr, scope: ast.AST) -> dict[str, str] | None:
    if not isinstance(value, ast.Name):
        return None
    for stmt in ast.walk(scope):
        if not isinstance(stmt, ast.Assign) or not any(
            isinstance(t, ast.Name) and t.id == value.id for t in stmt.targets
        ):
            continue
        built = stmt.value
        if isinstance(built, ast.Call) and ast.unparse(built.func) == "dict" and not built.args:
            return {k.arg: ast.unparse(k.value) for k in built.keywords if k.arg is not None}
        if isinstance(built, ast.Dict):
            return {
                str(k.value): ast.unparse(v)
                for k, v in zip(built.keys, built.values, strict=True)
                if isinstance(k, ast.Constant)
            }
    return None


def integration_facts(tree: SourceTree, module: Module, cache_class: str) -> IntegrationJSON:
    root = module_tree(tree, module)
    parents = _parents(root)
    imports: list[ImportJSON] = []
    names: dict[str, str] = {}  # local name -> LMCache symbol
    for node in ast.walk(root):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == loc.LMCACHE:
            guard, at_import = _guard(node, parents)
            if not at_import and _under_type_checking(node, parents):
                continue
            imports.append(
                {
                    "module": node.module or "",
                    "names": [a.name for a in node.names],
                    "guard": guard,
                    "at_import": at_import,
                }
            )
            names.update({a.asname or a.name: a.name for a in node.names})
    calls: list[CallJSON] = []
    holders: dict[str, set[str]] = {}
    for node in ast.walk(root):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in names:
            callee = names[node.func.id]
            calls.append(
                {
                    "callee": callee,
                    "mode": _mode(node, parents),
                    "positional": len(node.args),
                    "keywords": _keywords(node, parents),
                }
            )
            target = parents.get(node)
            if callee in CONNECTOR_MODES and isinstance(target, (ast.Assign, ast.AnnAssign)):
                first = target.targets[0] if isinstance(target, ast.Assign) else target.target
                holders.setdefault(ast.unparse(first), set()).add(callee)
    _typed_holders(root, holders)
    return {
        "module": module.dotted,
        "cache_class": cache_class,
        "imports": imports,
        "calls": _unique(calls),
        "methods": _unique(_connector_uses(root, parents, holders)),
        "modes": _modes(root, holders),
    }


def _under_type_checking(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    parent = parents.get(node)
    while parent is not None:
        if isinstance(parent, ast.If) and "TYPE_CHECKING" in ast.unparse(parent.test):
            return True
        parent = parents.get(parent)
    return False


def _typed_holders(root: ast.Module, holders: dict[str, set[str]]) -> None:
    """``self.x = param`` where ``param`` is annotated with a connector class (sglang's
    ``LayerTransferCounter`` keeps the in-process connector so)."""
    for fn in ast.walk(root):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        typed = {
            a.arg: cls
            for a in (*fn.args.args, *fn.args.kwonlyargs)
            if a.annotation is not None
            for cls in CONNECTOR_MODES
            if re.search(rf"\b{cls}\b", ast.unparse(a.annotation))
        }
        for stmt in ast.walk(fn):
            if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Name):
                cls = typed.get(stmt.value.id)
                if cls is not None:
                    holders.setdefault(ast.unparse(stmt.targets[0]), set()).add(cls)


def _connector_uses(
    root: ast.Module, parents: dict[ast.AST, ast.AST], holders: dict[str, set[str]]
) -> list[MethodJSON]:
    aliases: dict[tuple[ast.AST | None, str], str] = {}
    for node in ast.walk(root):
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.targets[0], ast.Name)
            and ast.unparse(node.value) in holders
        ):
            key = (_enclosing_function(node, parents), node.targets[0].id)
            aliases[key] = ast.unparse(node.value)
    out: list[MethodJSON] = []
    for node in ast.walk(root):
        if not isinstance(node, ast.Attribute) or isinstance(node.ctx, ast.Store):
            continue
        held = ast.unparse(node.value)
        if held not in holders and isinstance(node.value, ast.Name):
            held = aliases.get((_enclosing_function(node, parents), node.value.id), held)
        if held not in holders:
            continue
        parent = parents.get(node)
        is_call = isinstance(parent, ast.Call) and parent.func is node
        call = parent if isinstance(parent, ast.Call) and is_call else None
        out.append(
            {
                "classes": sorted(holders[held]),
                "method": node.attr,
                "mode": _mode(node, parents),
                "positional": len(call.args) if call is not None else 0,
                "arguments": [ast.unparse(a) for a in call.args] if call is not None else [],
                "keywords": sorted(k.arg for k in call.keywords if k.arg) if call else [],
                "access": "call" if call is not None else "read",
            }
        )
    return out


def _modes(root: ast.Module, holders: dict[str, set[str]]) -> dict[str, str]:
    """Which modes the cache reaches: from ``self._mode = ...`` (``LMCacheMode.IP if
    <condition> else LMCacheMode.MP``), else the one connector class it builds."""
    built = sorted({CONNECTOR_MODES[c] for classes in holders.values() for c in classes})
    for node in ast.walk(root):
        if not (
            isinstance(node, ast.Assign)
            and ast.unparse(node.targets[0]) == "self._mode"
            and re.search(r"Mode\.", ast.unparse(node.value))
        ):
            continue
        value = node.value
        modes = dict.fromkeys(built, "never")
        if isinstance(value, ast.IfExp):
            first = _SGLANG_MODE_NAMES.get(ast.unparse(value.body).rsplit(".", 1)[-1])
            other = _SGLANG_MODE_NAMES.get(ast.unparse(value.orelse).rsplit(".", 1)[-1])
            if other is not None:
                modes[other] = "default"
            if first is not None:
                modes[first] = f"when {ast.unparse(value.test)}"
        else:
            only = _SGLANG_MODE_NAMES.get(ast.unparse(value).rsplit(".", 1)[-1])
            if only is not None:
                modes[only] = "always"
        return modes
    return dict.fromkeys(built, "always")


def _unique(items: list[Any]) -> list[Any]:
    seen: dict[str, Any] = {}
    for item in items:
        seen.setdefault(json.dumps(item, sort_keys=True), item)
    return [seen[k] for k in sorted(seen)]
