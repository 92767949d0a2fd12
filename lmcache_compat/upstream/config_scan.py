"""The configuration schema of one LMCache release, read with ``ast`` (nothing imported).

:func:`scan_config_tree` reads, from the modules :mod:`~lmcache_compat.upstream.locations`
names (or, when a release moved them, the one module that defines each name):

* every engine configuration key: its type, its default where it is a literal, the converter a
  value goes through and its environment variable. 0.3.4 on, from the key table
  (``_CONFIG_DEFINITIONS``); before it, from the ``LMCacheEngineConfig`` dataclass and the names
  its hand-written ``from_file`` / ``from_env`` read (with their fallbacks from old names);
* the alias and deprecation tables, and what the loader *does* with them
  (:func:`loader_facts`: the alias rule read from the resolver's own code, how file values are
  converted and what a failed conversion does, whether the environment overrides the file);
* the legacy and cache-controller configurations, and the encoder-cache (EC) prefixes;
* the ``LMCACHE_*`` names the package reads that are not keys
  (:mod:`~lmcache_compat.upstream.env_scan`) and the MP command lines' flags
  (:mod:`~lmcache_compat.upstream.mp_flags_scan`).

The result is one JSON object per release: ``scripts/build_config_schema.py`` writes them to
``lmcache_compat/upstream/data/config_schema.json`` and :mod:`lmcache_compat.config.schema` reads
them.
"""

from __future__ import annotations

import ast
import os
import sys
from typing import Any

from lmcache_compat.errors import NotLMCacheError, ScanError
from lmcache_compat.scan.budgets import Meter
from lmcache_compat.scan.classreader import Index, Module
from lmcache_compat.scan.sources import SourceTree
from lmcache_compat.scan.targets import open_source
from lmcache_compat.upstream import locations as loc
from lmcache_compat.upstream.env_scan import scan_environment
from lmcache_compat.upstream.mp_flags_scan import scan_mp_flags
from lmcache_compat.upstream.source_facts import (
    assignment,
    calls_in,
    function,
    literal,
    method,
    place_module,
    string_constant,
)

__all__ = ["loader_facts", "scan_config", "scan_config_tree"]


def _text(node: ast.expr) -> str:
    return " ".join(ast.unparse(node).split())


def _table(module: Module, name: str) -> dict[str, Any]:
    value = assignment(module, name)
    if not isinstance(value, ast.Dict):
        return {}
    out: dict[str, Any] = {}
    for key, item in zip(value.keys, value.values, strict=True):
        name_ = string_constant(key)
        if name_ is not None:
            out[name_] = literal(item)
    return out


def _definitions(module: Module, name: str, notes: list[str]) -> dict[str, dict[str, Any]]:
    """``{key: {type, default, converter}}`` from a key table (``**spread`` of another table of
    the same module followed)."""
    value = assignment(module, name)
    out: dict[str, dict[str, Any]] = {}
    if not isinstance(value, ast.Dict):
        notes.append(f"{module.dotted}.{name} is not a dict literal: its keys were not read")
        return out
    for key, item in zip(value.keys, value.values, strict=True):
        if key is None:
            if isinstance(item, ast.Name) and assignment(module, item.id) is not None:
                out.update(_definitions(module, item.id, notes))
            else:
                notes.append(f"{module.dotted}.{name} spreads {_text(item)}: not read")
            continue
        key_name = string_constant(key)
        if key_name is None:
            notes.append(f"{module.dotted}.{name} has a key that is not a string: {_text(key)}")
            continue
        entry: dict[str, Any] = {"type": None, "default": None, "converter": None}
        if isinstance(item, ast.Dict):
            for field, field_value in zip(item.keys, item.values, strict=True):
                field_name = string_constant(field)
                if field_name == "type":
                    entry["type"] = _text(field_value)
                elif field_name == "default":
                    entry["default"] = literal(field_value)
                elif field_name == "env_converter":
                    entry["converter"] = _text(field_value)
        out[key_name] = entry
    return out


# --- 0.3.0 ... 0.3.3: an explicit dataclass and hand-written readers ------------------------------


def _config_get(call: ast.Call) -> str | None:
    """The key of ``config.get("key", default)`` (any receiver name)."""
    if isinstance(call.func, ast.Attribute) and call.func.attr == "get" and call.args:
        return string_constant(call.args[0])
    return None


def _parents(node: ast.AST) -> dict[ast.AST, ast.AST]:
    return {child: parent for parent in ast.walk(node) for child in ast.iter_child_nodes(parent)}


def _fields_config(
    cls: ast.ClassDef,
) -> tuple[dict[str, dict[str, Any]], dict[str, str], dict[str, str]]:
    """Keys of the dataclass, the file defaults and env parsers its readers use, and the code
    fallbacks ``{old: key}`` (``if key is None: key = config.get("old")``) of each reader."""
    keys: dict[str, dict[str, Any]] = {}
    for node in cls.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            keys[node.target.id] = {
                "type": _text(node.annotation),
                "default": None,
                "converter": None,
                "env_converter": None,
            }
    file_fallbacks: dict[str, str] = {}
    env_fallbacks: dict[str, str] = {}
    reader = method(cls, "from_file")
    if reader is not None:
        file_fallbacks = _file_reader(reader, keys)
    env_reader = method(cls, "from_env")
    if env_reader is not None:
        parents = _parents(env_reader)
        for call in calls_in(env_reader):
            if not (isinstance(call.func, ast.Name) and call.func.id == "get_env_name"):
                continue
            key = string_constant(call.args[0]) if call.args else None
            if key is None:
                continue
            parser, fallback = "str", None
            up: ast.AST | None = parents.get(call)
            while up is not None and not isinstance(up, ast.stmt):
                if isinstance(up, ast.Call) and isinstance(up.func, ast.Name):
                    if up.func.id == "parse_env" and len(up.args) > 1:
                        fallback = up.args[1]
                    elif up.func.id not in ("parse_env", "get_env_name"):
                        parser = up.func.id
                up = parents.get(up)
            if key in keys:
                keys[key]["env_converter"] = parser
            elif isinstance(fallback, ast.Attribute) and fallback.attr in keys:
                env_fallbacks[key] = fallback.attr
    return keys, file_fallbacks, env_fallbacks


def _file_reader(reader: ast.FunctionDef, keys: dict[str, dict[str, Any]]) -> dict[str, str]:
    """From a hand-written ``from_file``: each key's default (``config.get("k", default)``) and
    what its value goes through (``f(config.get("k"))``, ``x = f(x)`` later, or
    ``assert isinstance(x, T)``); returns the fallbacks ``{old: key}``."""
    read_as: dict[str, str] = {}  # local variable -> the key it was first read as
    fallbacks: dict[str, str] = {}
    for sub in ast.walk(reader):
        if not (isinstance(sub, ast.Assign) and isinstance(sub.value, ast.Call)):
            continue
        call, wrapper = sub.value, None
        inner = call.args[0] if call.args else None
        func = call.func
        if (
            _config_get(call) is None
            and isinstance(inner, ast.Call)
            and isinstance(func, ast.Name)
            and _config_get(inner) is not None
        ):
            call, wrapper = inner, func.id
        key = _config_get(call)
        target = sub.targets[0]
        if key is None or not isinstance(target, ast.Name):
            continue
        if key in keys and target.id not in read_as:
            read_as[target.id] = key
            if len(call.args) > 1:
                keys[key]["default"] = literal(call.args[1])
            keys[key]["converter"] = wrapper
        elif key not in keys and target.id in read_as:
            fallbacks[key] = read_as[target.id]
    for sub in ast.walk(reader):
        # ``y = f(x)`` for a variable read from the file, and ``assert isinstance(x, T)``
        if isinstance(sub, ast.Assign) and isinstance(sub.value, ast.Call):
            call = sub.value
            if (
                isinstance(call.func, ast.Name)
                and len(call.args) == 1
                and isinstance(call.args[0], ast.Name)
                and call.args[0].id in read_as
            ):
                keys[read_as[call.args[0].id]]["converter"] = call.func.id
        elif isinstance(sub, ast.Assert) and isinstance(sub.test, ast.Call):
            test = sub.test
            if (
                isinstance(test.func, ast.Name)
                and test.func.id == "isinstance"
                and len(test.args) == 2
                and isinstance(test.args[0], ast.Name)
                and test.args[0].id in read_as
            ):
                keys[read_as[test.args[0].id]]["converter"] = (
                    f"assert isinstance(x, {_text(test.args[1])})"
                )
    return fallbacks


# --- what the loaders do --------------------------------------------------------------------------


def _names_in(node: ast.AST) -> set[str]:
    return {n.id.lower() for n in ast.walk(node) if isinstance(n, ast.Name)}


def _alias_rule(resolver: ast.FunctionDef | None) -> str:
    """``deprecated-only``: the resolver maps an alias only inside ``if key in <deprecated>``;
    ``always``: it maps every alias; ``none``: no resolver (the tables are not applied)."""
    if resolver is None:
        return "none"
    parents = _parents(resolver)
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
            parent = parents.get(up)
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
                    _text(c.func).endswith(("getenv", "environ.get")) for c in calls_in(loop)
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
                and _text(node.values[0].func).endswith("safe_load")
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


# --- the other configurations ----------------------------------------------------------------


def _legacy_keys(index: Index) -> list[str]:
    module = place_module(index, loc.LEGACY_CONFIG_CLASS, search=False)
    if module is None:
        return []
    cls = module.classes.get(loc.LEGACY_CONFIG_CLASS.name)
    reader = method(cls, "from_file") if cls is not None else None
    if reader is None:
        return []
    return list(dict.fromkeys(k for c in calls_in(reader) if (k := _config_get(c)) is not None))


def _controller(index: Index, notes: list[str]) -> dict[str, Any] | None:
    module = place_module(index, loc.CONTROLLER_DEFINITIONS, search=False)
    if module is None or module.tree is None:
        return None
    keys = _definitions(module, loc.CONTROLLER_DEFINITIONS.name, notes)
    prefix = None
    for call in calls_in(module.tree):
        for keyword in call.keywords:
            if keyword.arg == "env_prefix" and string_constant(keyword.value):
                prefix = string_constant(keyword.value)
    return {"module": module.dotted, "env_prefix": prefix, "keys": sorted(keys)}


def scan_config_tree(tree: SourceTree) -> dict[str, Any]:
    """The configuration schema of the release in ``tree`` (see the module doc)."""
    index = Index(tree)
    notes: list[str] = []
    config = place_module(index, loc.CONFIG_DEFINITIONS)
    style = "table"
    if config is not None:
        keys = _definitions(config, loc.CONFIG_DEFINITIONS.name, notes)
        for entry in keys.values():
            entry["env_converter"] = entry["converter"]
        aliases = _table(config, loc.CONFIG_ALIASES.name)
        deprecated = _table(config, loc.DEPRECATED_CONFIGS.name)
        file_fallbacks: dict[str, str] = {}
        env_fallbacks: dict[str, str] = {}
    else:
        config = place_module(index, loc.CONFIG_CLASS)
        cls = config.classes.get(loc.CONFIG_CLASS.name) if config is not None else None
        if config is None or cls is None:
            raise NotLMCacheError(
                f"{tree.description}: no LMCache engine configuration found (neither "
                f"{loc.CONFIG_DEFINITIONS.name} nor the {loc.CONFIG_CLASS.name} dataclass)"
            )
        style = "fields"
        keys, file_fallbacks, env_fallbacks = _fields_config(cls)
        aliases, deprecated = {}, {}
    loader = loader_facts(index, config, style)
    prefix = loader["env_prefix"] or ""
    for name, entry in keys.items():
        entry["env"] = f"{prefix}{name.upper()}" if prefix else None
    read_names = {f"{prefix}{name.upper()}" for name in [*keys, *aliases, *env_fallbacks]}
    return {
        "version": tree.version,
        "config_module": config.dotted,
        "config_imports": config_imports(index, config),
        "style": style,
        "loader": loader,
        "aliases": aliases,
        "deprecated": deprecated,
        "file_fallbacks": file_fallbacks,
        "env_fallbacks": env_fallbacks,
        "legacy_keys": _legacy_keys(index),
        "controller": _controller(index, notes),
        "environment": scan_environment(index, read_names),
        "mp_commands": scan_mp_flags(index),
        "notes": notes,
        "keys": keys,
    }


def scan_config(
    target: str | os.PathLike[str] | None = None, meter: Meter | None = None
) -> dict[str, Any]:
    """The configuration schema of a ``.whl``, an sdist, a source directory or (``None``) the
    installed LMCache, read without importing it."""
    with open_source(target, loc.LMCACHE, meter) as tree:
        return scan_config_tree(tree)
