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
from dataclasses import replace
from typing import Any

from lmcache_compat.budgets import BUDGETS, Meter
from lmcache_compat.scan.classreader import ClassReader
from lmcache_compat.scan.modules import Index, Module
from lmcache_compat.scan.sources import SourceTree
from lmcache_compat.scan.targets import open_source
from lmcache_compat.sglang.known.calls import CONNECTOR_MODES, integration_facts, module_tree
from lmcache_compat.sglang.known.types import (
    CallJSON,
    ImportJSON,
    IntegrationJSON,
    MethodJSON,
    SglangFacts,
)
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

#: sglang is large (0.5.23: 4,719 Python files, 65 MB): a reading may read all of it once.
SGLANG_BUDGETS = replace(BUDGETS, total_bytes=320 * 1024 * 1024, files=40_000)


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
            integration.append(integration_facts(tree, hit[0], place.name))
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


# --- the plugin loader and the internals ----------------------------------------------------------


def _plugin_group(tree: SourceTree, module: Module) -> str | None:
    """The entry-point group the plugin loader reads: the module-level string constant that
    ``load_plugins`` names (sglang: ``GENERAL_PLUGINS_GROUP``)."""
    root = module_tree(tree, module)
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
