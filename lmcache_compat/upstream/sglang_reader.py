"""What an sglang release calls in LMCache, read from its files: nothing is imported.

:func:`read_sglang` opens a wheel, a source directory or the installed sglang
(:mod:`lmcache_compat.scan.targets`), finds its LMCache radix caches where
:mod:`lmcache_compat.upstream.locations` says they live (or by name under ``sglang/srt``), and
reads, with ``ast``:

* every ``lmcache`` import line: module, names, and the ``except ImportError`` handler that
  turns its failure into another error (sglang's "LMCache is not installed");
* every call of an imported LMCache name (a connector, a metadata record,
  ``lmcache_get_config``): positional count and keywords with their source text, a
  ``**kwargs`` built with ``dict(...)`` in the same function expanded;
* every method call and attribute read on a connector the cache holds, and the mode it runs in
  (in-process, MP, unified MP), and which modes the cache can reach;
* the plugin loader's entry-point group, the radix-cache registry and its build context's
  fields, and the internals the lmcache-compat backend relies on
  (:mod:`lmcache_compat.sglang.variants`).

The result is plain JSON (:class:`SglangFacts`): the shipped sglang grid stores it per run of
releases, ``doctor`` reads the installed sglang with the same function.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
from dataclasses import replace
from typing import Any, TypedDict

from lmcache_compat.core.roles import SGLANG_LAYERWISE, SGLANG_MP, SGLANG_UNIFIED
from lmcache_compat.scan.budgets import BUDGETS, Meter
from lmcache_compat.scan.classreader import ClassReader
from lmcache_compat.scan.modules import Index, Module, parse_source
from lmcache_compat.scan.sources import SourceTree
from lmcache_compat.scan.targets import open_source
from lmcache_compat.upstream import locations as loc
from lmcache_compat.upstream.resolve import locate_all

__all__ = [
    "CONNECTOR_MODES",
    "SGLANG_BUDGETS",
    "CallJSON",
    "ImportJSON",
    "IntegrationJSON",
    "MethodJSON",
    "SglangFacts",
    "facts_key",
    "read_sglang",
    "read_tree",
]

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
#: sglang is large (0.5.23: 4,719 Python files, 65 MB): a reading may read all of it once.
SGLANG_BUDGETS = replace(BUDGETS, total_bytes=320 * 1024 * 1024, files=40_000)


class ImportJSON(TypedDict):
    module: str
    names: list[str]
    #: The error sglang raises instead when the import fails (``None``: the ImportError itself
    #: propagates), and whether the import runs when the module is imported.
    guard: str | None
    at_import: bool


class CallJSON(TypedDict):
    callee: str
    mode: str
    positional: int
    #: keyword -> the source text of its value.
    keywords: dict[str, str]


class MethodJSON(TypedDict):
    classes: list[str]
    method: str
    mode: str
    positional: int
    #: The source text of the positional arguments (what sglang hands over).
    arguments: list[str]
    keywords: list[str]
    #: ``call`` or ``read`` (an attribute read on the connector).
    access: str


class IntegrationJSON(TypedDict):
    module: str
    cache_class: str
    imports: list[ImportJSON]
    calls: list[CallJSON]
    methods: list[MethodJSON]
    #: mode -> ``always`` / ``default`` / ``never`` / ``when <condition>``.
    modes: dict[str, str]


class SglangFacts(TypedDict):
    sglang: str | None
    integration: list[IntegrationJSON]
    plugin_group: str | None
    registry: bool
    context_fields: list[str]
    #: The internals the lmcache-compat backend builds on (``sglang.variants``).
    internals: dict[str, bool]


def facts_key(integration: list[IntegrationJSON]) -> str:
    """A digest of a release's LMCache import lines and call shapes (``integration``): releases
    with equal keys form a run (they bind the same against every LMCache release)."""
    text = json.dumps(integration, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def read_sglang(target: str | os.PathLike[str] | None = None) -> SglangFacts:
    """The facts of the sglang in ``target`` (a wheel, a directory; ``None``: the installed
    one). Nothing is imported."""
    with open_source(target, loc.SGLANG, Meter(SGLANG_BUDGETS)) as tree:
        return read_tree(tree)


def read_tree(tree: SourceTree) -> SglangFacts:
    index = Index(tree)
    reader = ClassReader(index)
    places = (
        *loc.SGLANG_CACHES,
        loc.SGLANG_REGISTER_BACKEND,
        loc.SGLANG_BUILD_CONTEXT,
        loc.SGLANG_LOAD_PLUGINS,
        *loc.SGLANG_INTERNALS,
    )
    located = locate_all(index, reader, places)
    integration = []
    for place in loc.SGLANG_CACHES:
        hit = located.found.get(place.name)
        if hit is not None:
            integration.append(_integration(tree, hit[0], place.name))
    context = located.found.get(loc.SGLANG_BUILD_CONTEXT.name)
    fields: list[str] = []
    if context is not None:
        init = reader.info(context[0], context[1]).methods.get("__init__")
        fields = list(init.names) if init is not None else []
    plugins = located.functions.get(loc.SGLANG_LOAD_PLUGINS.name)
    return {
        "sglang": tree.version,
        "integration": integration,
        "plugin_group": _plugin_group(tree, plugins[0]) if plugins is not None else None,
        "registry": loc.SGLANG_REGISTER_BACKEND.name in located.functions,
        "context_fields": fields,
        "internals": _internals(tree, reader, located.found),
    }


# --- one integration module ---------------------------------------------------------------------


def _tree_of(tree: SourceTree, module: Module) -> ast.Module:
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


def _integration(tree: SourceTree, module: Module, cache_class: str) -> IntegrationJSON:
    root = _tree_of(tree, module)
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


# --- the plugin loader and the internals ----------------------------------------------------------


def _plugin_group(tree: SourceTree, module: Module) -> str | None:
    """The entry-point group the plugin loader reads: the module-level string constant that
    ``load_plugins`` names (sglang: ``GENERAL_PLUGINS_GROUP``)."""
    root = _tree_of(tree, module)
    constants = {
        node.targets[0].id: node.value.value
        for node in root.body
        if isinstance(node, ast.Assign)
        and isinstance(node.targets[0], ast.Name)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    }
    loader = next(
        (
            node
            for node in root.body
            if isinstance(node, ast.FunctionDef) and node.name == loc.SGLANG_LOAD_PLUGINS.name
        ),
        None,
    )
    if loader is None:
        return None
    for node in ast.walk(loader):
        if isinstance(node, ast.Name) and node.id in constants:
            return constants[node.id]
    return None


def _internals(
    tree: SourceTree, reader: ClassReader, found: dict[str, tuple[Module, ast.ClassDef, str]]
) -> dict[str, bool]:
    """What the lmcache-compat backend reads of sglang (``sglang.variants`` names them)."""

    def members(place: loc.Place) -> dict[str, Any]:
        hit = found.get(place.name)
        return {} if hit is None else dict(reader.info(hit[0], hit[1]).methods)

    radix, key = members(loc.SGLANG_RADIX_CACHE), members(loc.SGLANG_RADIX_KEY)
    finished = radix.get("cache_finished_req")
    key_init = key.get("__init__")
    req = found.get(loc.SGLANG_REQ.name)
    return {
        "radix_key_raw_token_ids": "raw_token_ids" in key,
        "radix_key_cache_salt": key_init is not None and key_init.accepts_keyword("cache_salt"),
        "finished_takes_kv_len": finished is not None
        and finished.accepts_keyword("kv_len_to_handle"),
        "record_store_event": "_record_store_event" in radix,
        "req_flat_kv": req is not None and _assigns(req[1], "kv_committed_len"),
    }


def _assigns(cls: ast.ClassDef, attribute: str) -> bool:
    """Whether ``cls.__init__`` assigns ``self.<attribute>`` (an instance attribute of its own,
    not one kept in a nested record)."""
    for node in cls.body:
        if isinstance(node, ast.FunctionDef) and node.name == "__init__":
            for stmt in ast.walk(node):
                targets = (
                    stmt.targets
                    if isinstance(stmt, ast.Assign)
                    else [stmt.target]
                    if isinstance(stmt, ast.AnnAssign)
                    else []
                )
                if any(ast.unparse(t) == f"self.{attribute}" for t in targets):
                    return True
    return False
