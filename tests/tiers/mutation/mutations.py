"""The mutations: each makes ONE change to a copy of the newest real release (see
:mod:`tests.tiers.mutation` for the list and :mod:`tests.tiers.mutation.expected` for what each
check must report). Classes are found by their :mod:`~lmcache_compat.upstream.locations` names,
methods by their catalog names, parameters by their position relative to ``request_id`` or by
their annotation: nothing depends on line numbers.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from lmcache_compat.core.catalog import Capability
from lmcache_compat.upstream import locations as loc
from lmcache_compat.upstream.locations import Place
from tests.tiers.mutation.edits import (
    Module,
    after_imports,
    class_node,
    insert_line,
    method_node,
    module_of,
    node_source,
    parameters_after,
    rewrite_annotation,
    rewrite_def,
    splice,
    start_line,
    top_imports,
    write,
)

SCHED = loc.MP_SCHEDULER
LOOKUP = Capability.MP_LOOKUP_BY_TOKEN_IDS.spec.method
FREE = Capability.MP_FREE_LOOKUP_LOCKS.spec.method
REQUEST_ID = Capability.MP_LOOKUP_BY_TOKEN_IDS.spec.params[0]
#: The optional capability method the removal takes away (the in-process connector's events).
REMOVED = Capability.KV_EVENTS
ENGINE_LOOKUP = Capability.ENGINE_LOOKUP_ID.spec.method


@dataclass(frozen=True, slots=True)
class Mutation:
    kind: str
    #: The class the change is made to (the adapter is built over it).
    place: Place
    apply: Callable[[Path], None]


def _is_name(node: ast.expr, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name


def _drops_none(node: ast.expr) -> bool:
    """``X | None`` (either order)."""
    return isinstance(node, ast.BinOp) and (_is_none(node.left) or _is_none(node.right))


def _is_none(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _without_none(node: ast.expr) -> ast.expr:
    assert isinstance(node, ast.BinOp)
    return node.left if _is_none(node.right) else node.right


# --- moves ----------------------------------------------------------------------------------


def _defined_before(tree: ast.Module, node: ast.stmt) -> list[str]:
    """The top-level names a module defines above ``node`` (what a moved class may use)."""
    names: list[str] = []
    for stmt in tree.body[: tree.body.index(node)]:
        if isinstance(stmt, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            names.append(stmt.name)
        elif isinstance(stmt, ast.Assign | ast.AnnAssign):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            names += [t.id for t in targets if isinstance(t, ast.Name)]
    return names


def _move(
    root: Path, shim: str | None, copies: tuple[str, ...] = ("moved",), place: Place = SCHED
) -> None:
    """Move ``place``'s class to a new module beside its own: the old module's imports, the
    names the old module defines above the class (imported from it), then the class; leave
    ``shim`` (a format string of the new module) where the class was. Each of ``copies`` is
    one new module (two: two candidates)."""
    old = module_of(root, place)
    tree = old.tree
    node = class_node(tree, place.name)
    assert node is not None
    helpers = ", ".join(_defined_before(tree, node))
    uses = f"from {old.dotted} import {helpers}  # noqa: F401\n" if helpers else ""
    source = f"{top_imports(old.text, tree)}{uses}\n\n{node_source(old.text, node)}"
    for suffix in copies:
        write(root / loc.module_file(old.sibling(suffix)), source)
    line = "" if shim is None else shim.format(module=old.sibling(copies[0]), name=place.name)
    old.save(splice(old.text, start_line(node), node.end_lineno or node.lineno, line + "\n"))


STAR_SHIM = "from {module} import *  # noqa: F403  (moved; deprecated shim)"


def moved_star(root: Path) -> None:
    _move(root, STAR_SHIM)


def connector_moved_star(root: Path) -> None:
    _move(root, STAR_SHIM, place=loc.CONNECTOR_IMPL)


def moved_explicit(root: Path) -> None:
    _move(root, "from {module} import {name}  # noqa: F401  (moved; deprecated shim)")


def moved_no_reexport(root: Path) -> None:
    _move(root, None)


def two_candidates(root: Path) -> None:
    _move(root, None, copies=("moved", "copy"))


def renamed_alias(root: Path) -> None:
    old = module_of(root, SCHED)
    node = old.cls(SCHED.name)
    new_name = SCHED.name.removesuffix("Adapter") + "Client"
    header = old.text.splitlines(keepends=True)[node.lineno - 1]
    renamed = header.replace(f"class {SCHED.name}", f"class {new_name}", 1)
    text = splice(old.text, node.lineno, node.lineno, renamed)
    end = node.end_lineno or node.lineno
    alias = f"\n{SCHED.name} = {new_name}  # deprecated alias\n"
    old.save(insert_line(text, end + 1, alias))


def mixin(root: Path) -> None:
    """The lookup methods moved to a mixin class in a new file; the class inherits them."""
    old = module_of(root, SCHED)
    node = old.cls(SCHED.name)
    methods = [method_node(node, LOOKUP), method_node(node, FREE)]
    body = "".join(node_source(old.text, m) for m in methods)
    mixin_module = old.sibling("lookup")
    mixin_name = "_LookupMixin"
    write(
        root / loc.module_file(mixin_module),
        f"{top_imports(old.text, old.tree)}\n\nclass {mixin_name}:\n{body}",
    )
    text = old.text
    for m in sorted(methods, key=lambda m: m.lineno, reverse=True):
        text = splice(text, start_line(m), m.end_lineno or m.lineno, "")
    header = text.splitlines(keepends=True)[node.lineno - 1]
    if "(" in header.split(":")[0]:
        header = header.replace("(", f"({mixin_name}, ", 1)
    else:
        header = header.replace(f"class {SCHED.name}", f"class {SCHED.name}({mixin_name})", 1)
    text = splice(text, node.lineno, node.lineno, header)
    imp = f"from {mixin_module} import {mixin_name}\n"
    old.save(insert_line(text, after_imports(ast.parse(text)), imp))


# --- signatures -----------------------------------------------------------------------------


def _lookup(root: Path) -> Module:
    return module_of(root, SCHED)


def _keyword_only_after(first: str) -> Callable[[ast.arguments], None]:
    """Every parameter after ``first`` made keyword-only (defaults kept)."""

    def change(args: ast.arguments) -> None:
        after = parameters_after(args, first)
        defaults = [None] * (len(args.args) - len(args.defaults)) + list(args.defaults)
        kept = len(args.args) - len(after)
        args.kwonlyargs = after + args.kwonlyargs
        args.kw_defaults = defaults[kept:] + args.kw_defaults
        args.args = args.args[:kept]
        args.defaults = [d for d in defaults[:kept] if d is not None]

    return change


def keyword_only(root: Path) -> None:
    rewrite_def(_lookup(root), SCHED.name, LOOKUP, _keyword_only_after(REQUEST_ID))


#: The worker's submit methods (single and batched): their first parameter is the request id(s).
SUBMITS = ("submit_store_request", "batched_submit_store_requests")


def worker_keyword_only(root: Path) -> None:
    """The worker's store submits: every parameter after the request id(s) keyword-only."""
    module = module_of(root, loc.MP_WORKER)
    for method in SUBMITS:
        first = method_node(module.cls(loc.MP_WORKER.name), method).args.args[1].arg
        rewrite_def(module, loc.MP_WORKER.name, method, _keyword_only_after(first))


def engine_keyword_only(root: Path) -> None:
    """The engine's ``lookup``: every parameter after its first keyword-only."""
    module = module_of(root, loc.ENGINE)
    first = method_node(module.cls(loc.ENGINE.name), ENGINE_LOOKUP).args.args[1].arg
    rewrite_def(module, loc.ENGINE.name, ENGINE_LOOKUP, _keyword_only_after(first))


def engine_union_spelled(root: Path) -> None:
    """Every ``Optional[X]`` / ``Union[X, Y]`` of the engine's ``lookup`` spelled with ``|``."""
    module = module_of(root, loc.ENGINE)

    def change(args: ast.arguments) -> None:
        hits = 0
        for arg in args.args:
            if arg.annotation is not None and _typing_union(arg.annotation) is not None:
                arg.annotation = _typing_union(arg.annotation)
                hits += 1
        assert hits, "no Optional/Union annotation to respell"

    rewrite_def(module, loc.ENGINE.name, ENGINE_LOOKUP, change)


def _typing_union(node: ast.expr) -> ast.expr | None:
    """``Optional[X]`` -> ``X | None``, ``Union[X, Y]`` -> ``X | Y`` (nested too), else None."""
    if not (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name)):
        return None
    if node.value.id == "Optional":
        members = [node.slice, ast.Constant(None)]
    elif node.value.id == "Union" and isinstance(node.slice, ast.Tuple):
        members = list(node.slice.elts)
    else:
        return None
    members = [_typing_union(m) or m for m in members]
    out = members[0]
    for m in members[1:]:
        out = ast.BinOp(out, ast.BitOr(), m)
    return out


def _append(args: ast.arguments, name: str, annotation: str, default: str | None) -> None:
    arg = ast.arg(arg=name, annotation=ast.parse(annotation, mode="eval").body)
    args.args.append(arg)
    if default is not None:
        args.defaults.append(ast.parse(default, mode="eval").body)


def added_optional(root: Path) -> None:
    rewrite_def(_lookup(root), SCHED.name, LOOKUP, lambda a: _append(a, "priority", "int", "0"))


def required_added(root: Path) -> None:
    def change(args: ast.arguments) -> None:
        position = [a.arg for a in args.args].index(REQUEST_ID) + 1
        args.args.insert(position, ast.arg(arg="tenant", annotation=ast.Name("str")))

    rewrite_def(_lookup(root), SCHED.name, LOOKUP, change)


def _bytes_param(arg: ast.arg) -> bool:
    return arg.annotation is not None and _is_name(arg.annotation, "bytes")


def widened(root: Path) -> None:
    rewrite_annotation(
        _lookup(root),
        SCHED.name,
        LOOKUP,
        _bytes_param,
        lambda a: ast.BinOp(a, ast.BitOr(), ast.Name("memoryview")),
    )


def narrowed(root: Path) -> None:
    rewrite_annotation(
        _lookup(root),
        SCHED.name,
        LOOKUP,
        lambda a: a.annotation is not None and _drops_none(a.annotation),
        _without_none,
    )


def optional_spelled(root: Path) -> None:
    """Every ``X | None`` of the lookup spelled ``Optional[X]`` (same meaning)."""
    module = _lookup(root)

    def change(args: ast.arguments) -> None:
        hits = 0
        for arg in [*args.args, *args.kwonlyargs]:
            if arg.annotation is not None and _drops_none(arg.annotation):
                inner = _without_none(arg.annotation)
                arg.annotation = ast.Subscript(ast.Name("Optional"), inner)
                hits += 1
        assert hits, "no X | None annotation to respell"

    rewrite_def(module, SCHED.name, LOOKUP, change)
    imp = "from typing import Optional  # noqa: E402\n"
    module.save(insert_line(module.text, after_imports(module.tree), imp))


def future_annotations(root: Path) -> None:
    module = _lookup(root)
    first = module.tree.body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
        line = (first.end_lineno or first.lineno) + 1  # after the module docstring
    else:
        line = first.lineno
    module.save(insert_line(module.text, line, "from __future__ import annotations\n"))


def quoted(root: Path) -> None:
    rewrite_annotation(
        _lookup(root), SCHED.name, LOOKUP, _bytes_param, lambda a: ast.Constant(ast.unparse(a))
    )


def renamed_parameter(root: Path) -> None:
    """The last parameter of the lookup renamed."""

    def change(args: ast.arguments) -> None:
        args.args[-1].arg += "_index"

    rewrite_def(_lookup(root), SCHED.name, LOOKUP, change)


def reordered(root: Path) -> None:
    """The last two parameters of the lookup (both with defaults) swapped."""

    def change(args: ast.arguments) -> None:
        args.args[-2], args.args[-1] = args.args[-1], args.args[-2]
        args.defaults[-2], args.defaults[-1] = args.defaults[-1], args.defaults[-2]

    rewrite_def(_lookup(root), SCHED.name, LOOKUP, change)


def removed_parameter(root: Path) -> None:
    """The second-to-last parameter of the lookup removed (the last keeps its place)."""

    def change(args: ast.arguments) -> None:
        del args.args[-2]
        del args.defaults[-2]

    rewrite_def(_lookup(root), SCHED.name, LOOKUP, change)


def became_optional(root: Path) -> None:
    """The token parameter (right after ``request_id``, no default) gets one."""

    def change(args: ast.arguments) -> None:
        first_default = len(args.args) - len(args.defaults)
        position = [a.arg for a in args.args].index(REQUEST_ID) + 1
        assert position == first_default - 1, "the token parameter is not the last required"
        args.defaults.insert(0, ast.Constant(b""))

    rewrite_def(_lookup(root), SCHED.name, LOOKUP, change)


def return_changed(root: Path) -> None:
    rewrite_def(_lookup(root), SCHED.name, LOOKUP, lambda a: None, returns=ast.Name("int"))


def return_added(root: Path) -> None:
    """``free_lookup_locks`` (``-> None``) now returns whether it freed anything."""
    module = _lookup(root)
    returns = method_node(module.cls(SCHED.name), FREE).returns
    assert returns is not None and ast.unparse(returns) == "None", "it returns a value already"
    rewrite_def(module, SCHED.name, FREE, lambda a: None, returns=ast.Name("bool"))


def method_added(root: Path) -> None:
    module = _lookup(root)
    node = module.cls(SCHED.name)
    lookup = method_node(node, LOOKUP)
    indent = " " * lookup.col_offset
    new = (
        f"{indent}def lookup_stats(self) -> dict[str, int]:\n"
        f'{indent}    """New in the next release."""\n{indent}    return {{}}\n\n'
    )
    module.save(insert_line(module.text, start_line(lookup), new))


def removed_method(root: Path) -> None:
    place = loc.CONNECTOR_IMPL
    module = module_of(root, place)
    node = method_node(module.cls(place.name), REMOVED.spec.method)
    module.save(splice(module.text, start_line(node), node.end_lineno or node.lineno, ""))


#: Every mutation, in the order of the report.
MUTATIONS: tuple[Mutation, ...] = (
    Mutation("moved, star re-export left", SCHED, moved_star),
    Mutation("moved, explicit re-export left", SCHED, moved_explicit),
    Mutation("moved, no re-export", SCHED, moved_no_reexport),
    Mutation(
        "in-process connector moved, star re-export left", loc.CONNECTOR_IMPL, connector_moved_star
    ),
    Mutation("renamed, deprecated alias kept", SCHED, renamed_alias),
    Mutation("methods moved to a mixin in another file", SCHED, mixin),
    Mutation("arguments after request_id keyword-only", SCHED, keyword_only),
    Mutation("worker: submit arguments keyword-only", loc.MP_WORKER, worker_keyword_only),
    Mutation("optional parameter added", SCHED, added_optional),
    Mutation("annotation widened (bytes | memoryview)", SCHED, widened),
    Mutation("annotation narrowed (X | None -> X)", SCHED, narrowed),
    Mutation("Optional[...] spelled", SCHED, optional_spelled),
    Mutation("engine: Optional/Union spelled with |", loc.ENGINE, engine_union_spelled),
    Mutation("engine: lookup arguments keyword-only", loc.ENGINE, engine_keyword_only),
    Mutation("from __future__ import annotations", SCHED, future_annotations),
    Mutation("quoted annotation", SCHED, quoted),
    Mutation("method added", SCHED, method_added),
    Mutation("parameter became optional", SCHED, became_optional),
    Mutation("return type changed", SCHED, return_changed),
    Mutation("now returns a value", SCHED, return_added),
    Mutation("parameter renamed", SCHED, renamed_parameter),
    Mutation("parameters reordered", SCHED, reordered),
    Mutation("parameter removed", SCHED, removed_parameter),
    Mutation("required parameter added", SCHED, required_added),
    Mutation("optional capability method removed", loc.CONNECTOR_IMPL, removed_method),
    Mutation("two candidates, known path gone", SCHED, two_candidates),
)
