"""The flags of the multi-process (MP) server's command lines, read with ``ast`` (nothing
imported).

Each command of :data:`~lmcache_compat.upstream.locations.MP_COMMANDS` starts at its argparse
function (``parse_args``, or a CLI command's ``add_arguments``); every ``add_argument`` call in
it, and in the functions it calls that the package defines (``add_mp_server_args`` ...,
followed through the imports, at module or function level), is one flag: its option strings,
``dest``, ``action``, ``type``, literal ``default`` (a module constant is followed),
``choices``, ``nargs``, ``required``, and whether it is hidden (``help=argparse.SUPPRESS``) or
says it is deprecated.
"""

from __future__ import annotations

import ast
from typing import Any

from lmcache_compat.errors import ScanError
from lmcache_compat.scan.modules import Index, Module
from lmcache_compat.upstream import locations as loc
from lmcache_compat.upstream.source_facts import (
    assignment,
    calls_in,
    function,
    literal,
    method,
    place_module,
    string_constant,
)

__all__ = ["flag_spec", "scan_mp_flags"]

#: How deep the walk follows calls from a command's argparse function.
MAX_DEPTH = 12


def _value(module: Module, node: ast.expr) -> Any:
    if isinstance(node, ast.Name):
        assigned = assignment(module, node.id)
        if assigned is not None:
            return literal(assigned)
    return literal(node)


def flag_spec(module: Module, call: ast.Call) -> dict[str, Any] | None:
    """One ``add_argument(...)`` call as a flag record (``None``: a positional argument)."""
    options = [s for a in call.args if (s := string_constant(a)) is not None]
    longs = [o for o in options if o.startswith("--")]
    if not options or not options[0].startswith("-"):
        return None
    kw = {k.arg: k.value for k in call.keywords if k.arg is not None}
    first = (longs or options)[0]
    dest = string_constant(kw.get("dest")) or first.lstrip("-").replace("-", "_")
    action = kw.get("action")
    action_text = None
    if action is not None:
        action_text = string_constant(action) or " ".join(ast.unparse(action).split())
    help_node = kw.get("help")
    help_text = string_constant(help_node) or ""
    hidden = help_node is not None and ast.unparse(help_node).endswith("SUPPRESS")
    spec: dict[str, Any] = {
        "options": options,
        "dest": dest,
        "action": action_text,
        "type": " ".join(ast.unparse(kw["type"]).split()) if "type" in kw else None,
        "default": _value(module, kw["default"]) if "default" in kw else None,
        "choices": _value(module, kw["choices"]) if "choices" in kw else None,
        "nargs": literal(kw["nargs"]) if "nargs" in kw else None,
        "required": bool(literal(kw["required"]) is True) if "required" in kw else False,
        "hidden": hidden,
        "deprecated": "deprecat" in help_text.lower(),
    }
    if action_text and action_text.endswith("BooleanOptionalAction"):
        spec["negated"] = ["--no-" + o[2:] for o in longs]
    return spec


class _Walker:
    def __init__(self, index: Index) -> None:
        self.index = index
        self.seen: set[tuple[str, str]] = set()
        self.flags: dict[str, dict[str, Any]] = {}
        self.unresolved: list[str] = []

    def function_in(self, dotted: str, name: str) -> tuple[Module, ast.FunctionDef] | None:
        try:
            module = self.index.module_by_dotted(dotted)
        except ScanError:
            return None
        if module is None or module.tree is None:
            return None
        node = function(module, name)
        if node is not None:
            return module, node
        if name in module.imports:  # a re-export
            source, attr = module.imports[name]
            if attr is not None and source.split(".")[0] == self.index.package:
                return self.function_in(source, attr)
        return None

    def walk(self, module: Module, fn: ast.FunctionDef, depth: int = 0) -> None:
        key = (module.dotted, f"{fn.name}:{fn.lineno}")
        if key in self.seen or depth > MAX_DEPTH:
            return
        self.seen.add(key)
        local_imports: dict[str, tuple[str, str]] = {}
        for node in ast.walk(fn):
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for alias in node.names:
                    local_imports[alias.asname or alias.name] = (node.module, alias.name)
        for node in sorted(calls_in(fn), key=lambda c: (c.lineno, c.col_offset)):
            if isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
                spec = flag_spec(module, node)
                if spec is not None:
                    self.flags.setdefault(spec["options"][0], spec)
            elif isinstance(node.func, ast.Name):
                self.follow(module, node.func.id, local_imports, depth)

    def follow(
        self, module: Module, name: str, local_imports: dict[str, tuple[str, str]], depth: int
    ) -> None:
        target: tuple[Module, ast.FunctionDef] | None = None
        if name in local_imports:
            source, attr = local_imports[name]
            if source.split(".")[0] == self.index.package:
                target = self.function_in(source, attr)
        elif name in module.functions:
            target = self.function_in(module.dotted, name)
        elif name in module.imports:
            source, imported = module.imports[name]
            if imported is not None and source.split(".")[0] == self.index.package:
                target = self.function_in(source, imported)
        if target is not None:
            self.walk(*target, depth=depth + 1)


def _start(index: Index, command: loc.MPCommand) -> tuple[Module, ast.FunctionDef] | None:
    place = command.place
    module = place_module(index, place, search=place.kind == "class")
    if module is None:
        return None
    if place.kind == "class":
        cls = module.classes.get(place.name)
        fn = method(cls, place.core[0]) if cls is not None else None
    else:
        fn = next(
            (
                n
                for n in (module.tree.body if module.tree else [])
                if isinstance(n, ast.FunctionDef) and n.name == place.name
            ),
            None,
        )
    return None if fn is None else (module, fn)


def scan_mp_flags(index: Index) -> dict[str, dict[str, dict[str, Any]]]:
    """``{command key: {first option string: flag record}}`` for each MP command this release
    has (in the order argparse adds them)."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for command in loc.MP_COMMANDS:
        start = _start(index, command)
        if start is None:
            continue
        walker = _Walker(index)
        walker.walk(*start)
        out[command.key] = walker.flags
    return out
