"""The configuration schema of one LMCache release, read with ``ast`` (nothing imported).

:func:`scan_config_tree` reads, from the modules :mod:`~lmcache_compat.upstream.locations`
names (or, when a release moved them, the one module that defines each name):

* every engine configuration key: its type, its default where it is a literal, the converter a
  value goes through and its environment variable. 0.3.4 on, from the key table
  (``_CONFIG_DEFINITIONS``); before it, from the ``LMCacheEngineConfig`` dataclass and the names
  its hand-written ``from_file`` / ``from_env`` read (with their fallbacks from old names);
* the alias and deprecation tables, and what the loader *does* with them
  (:mod:`~lmcache_compat.upstream.loader_scan`: the alias rule read from the resolver's own
  code, how file values are converted and what a failed conversion does, whether the
  environment overrides the file, what importing the config module needs);
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
from typing import Any

from lmcache_compat.budgets import Meter
from lmcache_compat.errors import NotLMCacheError
from lmcache_compat.scan.modules import Index, Module
from lmcache_compat.scan.sources import SourceTree
from lmcache_compat.scan.targets import open_source
from lmcache_compat.upstream import locations as loc
from lmcache_compat.upstream.env_scan import scan_environment
from lmcache_compat.upstream.loader_scan import config_imports, loader_facts
from lmcache_compat.upstream.mp_flags_scan import scan_mp_flags
from lmcache_compat.upstream.source_facts import (
    assignment,
    calls_in,
    literal,
    method,
    parents,
    place_module,
    string_constant,
    text,
)

__all__ = ["scan_config", "scan_config_tree"]


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
                notes.append(f"{module.dotted}.{name} spreads {text(item)}: not read")
            continue
        key_name = string_constant(key)
        if key_name is None:
            notes.append(f"{module.dotted}.{name} has a key that is not a string: {text(key)}")
            continue
        entry: dict[str, Any] = {"type": None, "default": None, "converter": None}
        if isinstance(item, ast.Dict):
            for field, field_value in zip(item.keys, item.values, strict=True):
                field_name = string_constant(field)
                if field_name == "type":
                    entry["type"] = text(field_value)
                elif field_name == "default":
                    entry["default"] = literal(field_value)
                elif field_name == "env_converter":
                    entry["converter"] = text(field_value)
        out[key_name] = entry
    return out


# --- 0.3.0 ... 0.3.3: an explicit dataclass and hand-written readers ------------------------------


def _config_get(call: ast.Call) -> str | None:
    """The key of ``config.get("key", default)`` (any receiver name)."""
    if isinstance(call.func, ast.Attribute) and call.func.attr == "get" and call.args:
        return string_constant(call.args[0])
    return None


def _fields_config(
    cls: ast.ClassDef,
) -> tuple[dict[str, dict[str, Any]], dict[str, str], dict[str, str]]:
    """Keys of the dataclass, the file defaults and env parsers its readers use, and the code
    fallbacks ``{old: key}`` (``if key is None: key = config.get("old")``) of each reader."""
    keys: dict[str, dict[str, Any]] = {}
    for node in cls.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            keys[node.target.id] = {
                "type": text(node.annotation),
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
        up_of = parents(env_reader)
        for call in calls_in(env_reader):
            if not (isinstance(call.func, ast.Name) and call.func.id == "get_env_name"):
                continue
            key = string_constant(call.args[0]) if call.args else None
            if key is None:
                continue
            parser, fallback = "str", None
            up: ast.AST | None = up_of.get(call)
            while up is not None and not isinstance(up, ast.stmt):
                if isinstance(up, ast.Call) and isinstance(up.func, ast.Name):
                    if up.func.id == "parse_env" and len(up.args) > 1:
                        fallback = up.args[1]
                    elif up.func.id not in ("parse_env", "get_env_name"):
                        parser = up.func.id
                up = up_of.get(up)
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
                    f"assert isinstance(x, {text(test.args[1])})"
                )
    return fallbacks


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
