"""What a release's configuration loaders do, read from their code with ``ast`` (nothing
imported): :func:`loader_facts` (the alias rule of the resolver, file conversion and what a
rejected value does, whether ``LMCACHE_<KEY>`` overrides the file, the variable that names the
file, an empty file, the encoder-cache prefixes) and :func:`config_imports` (the third-party
packages importing the config module needs). Each fact is one of a few named values
(:class:`lmcache_compat.config.schema.LoaderFacts`) that the loader model
(:mod:`lmcache_compat.config.resolver`) reads.
"""

from __future__ import annotations

import ast
import sys
from typing import Any

from lmcache_compat.errors import ScanError
from lmcache_compat.scan.modules import Index, Module
from lmcache_compat.upstream import locations as loc
from lmcache_compat.upstream.source_facts import (
    assignment,
    calls_in,
    function,
    parents,
    place_module,
    string_constant,
    text,
)

__all__ = ["config_imports", "loader_facts"]


def _names_in(node: ast.AST) -> set[str]:
    return {n.id.lower() for n in ast.walk(node) if isinstance(n, ast.Name)}


def _alias_rule(resolver: ast.FunctionDef | None) -> str:
    """``deprecated-only``: the resolver maps an alias only inside ``if key in <deprecated>``;
    ``always``: it maps every alias; ``none``: no resolver (the tables are not applied)."""
    if resolver is None:
        return "none"
    up_of = parents(resolver)
    uses = [
        n
        for n in ast.walk(resolver)
        if isinstance(n, (ast.Subscript, ast.Attribute))
        and any("alias" in name for name in _names_in(n.value))
    ]
    if not uses:
        return "none"
    for use in uses:
        up: ast.AST | None = use
        guarded = False
        while up is not None and up is not resolver:
            parent = up_of.get(up)
            if (
                isinstance(parent, ast.If)
                and up in parent.body
                and any("deprecat" in name for name in _names_in(parent.test))
            ):
                guarded = True
                break
            up = parent
        if not guarded:
            return "always"
    return "deprecated-only"


def _statement_lists(node: ast.AST) -> list[list[ast.stmt]]:
    out = []
    for sub in ast.walk(node):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(sub, field, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                out.append(block)
    return out


def _calls_attr(node: ast.AST, attr: str) -> bool:
    return any(isinstance(c.func, ast.Attribute) and c.func.attr == attr for c in calls_in(node))


def _getter_facts(getter: ast.FunctionDef | None) -> dict[str, Any]:
    """From vLLM's config getter: the file variable, and whether the environment is applied on
    top of the file (``overrides``) or not read at all once a file is named (``ignored``)."""
    if getter is None:
        return {"config_file_env": None, "env_with_file": "unknown"}
    config_file_env = None
    assigned: dict[str, str] = {}
    for node in ast.walk(getter):
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            value = node.value
            if isinstance(value, ast.Subscript):
                const = string_constant(value.slice)
            elif isinstance(value, ast.Call) and value.args:
                const = string_constant(value.args[0])
            else:
                const = None
            if const is not None:
                assigned[node.targets[0].id] = const
    env_with_file = "unknown"
    for block in _statement_lists(getter):
        for i, stmt in enumerate(block):
            file_calls = [
                c
                for c in calls_in(stmt)
                if isinstance(c.func, ast.Attribute) and c.func.attr == "from_file"
            ]
            if not file_calls:
                continue
            arg = file_calls[0].args[0] if file_calls[0].args else None
            if isinstance(arg, ast.Name) and arg.id in assigned:
                config_file_env = assigned[arg.id]
            later = block[i:]
            env_with_file = (
                "overrides"
                if any(_calls_attr(s, "update_config_from_env") for s in later)
                else "ignored"
            )
    return {"config_file_env": config_file_env, "env_with_file": env_with_file}


def _env_prefix(modules: list[Module]) -> str | None:
    """The prefix of ``LMCACHE_<KEY>``: the literal head of ``get_env_name``'s f-string, else
    the default of an ``env_prefix`` parameter."""
    for module in modules:
        if module.tree is None:
            continue
        for node in ast.walk(module.tree):
            if isinstance(node, ast.FunctionDef) and node.name == "get_env_name":
                for sub in ast.walk(node):
                    if isinstance(sub, ast.JoinedStr) and sub.values:
                        head = string_constant(sub.values[0])
                        if head:
                            return head
    for module in modules:
        if module.tree is None:
            continue
        for node in ast.walk(module.tree):
            if isinstance(node, ast.FunctionDef):
                args = node.args.args + node.args.kwonlyargs
                defaults: list[ast.expr | None] = [None] * (
                    len(node.args.args) - len(node.args.defaults)
                )
                defaults += [*node.args.defaults, *node.args.kw_defaults]
                for arg, default in zip(args, defaults, strict=False):
                    if arg.arg == "env_prefix" and string_constant(default):
                        return string_constant(default)
    return None


def _env_reads_aliases(modules: list[Module]) -> bool:
    """Whether the environment reader looks ``LMCACHE_<OLD>`` up for the alias table's names: a
    loop that calls ``getenv`` over a table whose name (or the name it was built from) says
    ``alias``."""
    for module in modules:
        if module.tree is None:
            continue
        for fn in ast.walk(module.tree):
            if not (isinstance(fn, ast.FunctionDef) and "env" in fn.name):
                continue
            built: dict[str, set[str]] = {}
            for node in ast.walk(fn):
                if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
                    built[node.targets[0].id] = _names_in(node.value)
            for loop in ast.walk(fn):
                if not isinstance(loop, ast.For):
                    continue
                names = _names_in(loop.iter)
                for name in list(names):
                    names |= built.get(name, set())
                reads = any(
                    text(c.func).endswith(("getenv", "environ.get")) for c in calls_in(loop)
                )
                if reads and any("alias" in name for name in names):
                    return True
    return False


def _uses_quote_parser(modules: list[Module]) -> bool:
    return any(m.tree is not None and "_parse_quoted_string" in m.functions for m in modules)


def _empty_file(modules: list[Module], style: str) -> str:
    """``defaults``: ``yaml.safe_load(f) or {}``; ``fails``: an empty file is ``None``, and the
    reader calls ``.get`` on it."""
    for module in modules:
        if module.tree is None:
            continue
        for node in ast.walk(module.tree):
            if (
                isinstance(node, ast.BoolOp)
                and isinstance(node.op, ast.Or)
                and isinstance(node.values[0], ast.Call)
                and text(node.values[0].func).endswith("safe_load")
                and isinstance(node.values[-1], ast.Dict)
            ):
                return "defaults"
    return "fails"


def loader_facts(index: Index, config: Module, style: str) -> dict[str, Any]:
    """What the release's loaders do, each fact read from its code (see the module doc)."""
    base = place_module(index, loc.CONFIG_ALIAS_RESOLVER, search=False)
    modules = [config] + ([base] if base is not None and base is not config else [])
    resolver = None
    for module in modules:
        resolver = resolver or function(module, loc.CONFIG_ALIAS_RESOLVER.name)
    getter_module = place_module(index, loc.CONFIG_GETTER, search=False) or place_module(
        index, loc.CONFIG_GETTER_OLD, search=False
    )
    getter = None
    if getter_module is not None:
        getter = function(getter_module, loc.CONFIG_GETTER.name) or function(
            getter_module, loc.CONFIG_GETTER_OLD.name
        )
    safe = any(loc.CONFIG_SAFE_CONVERTER.name in m.functions for m in modules)
    text = b"".join(index.tree.read(m.relpath) or b"" for m in modules)
    facts: dict[str, Any] = {
        "alias_rule": _alias_rule(resolver),
        "unknown_file_key": "logged" if b"Unknown configuration key" in text else "silent",
        "file_values": "converted" if style == "table" else "raw",
        "conversion_error": ("none" if safe else "raise") if style == "table" else "raw",
        "empty_file": _empty_file(modules, style),
        "env_prefix": _env_prefix(modules),
        "env_reads_aliases": _env_reads_aliases(modules),
        "env_unquotes": _uses_quote_parser(modules),
        **_getter_facts(getter),
    }
    ec_file = string_constant(assignment(config, loc.EC_FILE_PREFIX.name))
    ec_env = string_constant(assignment(config, loc.EC_ENV_PREFIX.name))
    facts["ec"] = None
    if ec_file and ec_env:
        nested = None
        if config.tree is not None:
            for node in ast.walk(config.tree):
                if isinstance(node, ast.FunctionDef) and any(
                    isinstance(n, ast.Name) and n.id == loc.EC_FILE_PREFIX.name
                    for n in ast.walk(node)
                ):
                    for cmp in ast.walk(node):
                        if (
                            isinstance(cmp, ast.Compare)
                            and isinstance(cmp.ops[0], ast.Eq)
                            and string_constant(cmp.comparators[0])
                        ):
                            nested = string_constant(cmp.comparators[0])
        facts["ec"] = {"file_prefix": ec_file, "env_prefix": ec_env, "nested_key": nested}
    return facts


def _unconditional_imports(module: Module) -> set[str]:
    """Dotted modules ``module`` imports at its top level outside ``try`` / ``if``."""
    out: set[str] = set()
    if module.tree is None:
        return out
    is_package = module.relpath.endswith("__init__.py")
    parts = module.dotted.split(".") if is_package else module.dotted.split(".")[:-1]
    for node in module.tree.body:
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                keep = parts[: len(parts) - (node.level - 1)]
                base = ".".join([*keep, base] if base else keep)
            out.add(base)
            out |= {f"{base}.{a.name}" for a in node.names}
    return out


def config_imports(index: Index, config: Module) -> list[str]:
    """The third-party packages importing the config module needs: every package imported
    unconditionally at the top level of it, of the package ``__init__`` files it runs, and of
    the modules of the release they import, transitively (``try`` / ``if`` imports are
    optional, so left out). 0.3.0 ... 0.3.11 need torch through ``lmcache.config``."""
    stdlib = sys.stdlib_module_names
    parts = config.dotted.split(".")
    todo = [".".join(parts[:i]) for i in range(1, len(parts))] + [config.dotted]
    seen: set[str] = set()
    third: set[str] = set()
    while todo:
        dotted = todo.pop()
        if dotted in seen:
            continue
        seen.add(dotted)
        try:
            module = index.module_by_dotted(dotted)
        except ScanError:
            continue
        if module is None:
            continue
        for name in _unconditional_imports(module):
            top = name.split(".")[0]
            if top == index.package:
                chain = name.split(".")
                todo += [".".join(chain[:i]) for i in range(1, len(chain) + 1)]
            elif top and top not in stdlib and top != "__future__":
                third.add(top)
    return sorted(third)
