"""Source edits the mutations are made of: each finds its class by the name
:mod:`lmcache_compat.upstream.locations` gives it and its method by name (``ast``), then rewrites
text in place. Nothing here knows a line number, and every edit checks that it changed something.

The release tree is a hard-linked copy (fast); :func:`write` replaces a file instead of writing
through the link, so the installed release is never touched.
"""

from __future__ import annotations

import ast
import copy
import os
import shutil
from collections.abc import Callable
from pathlib import Path

from lmcache_compat.upstream.locations import Place, module_file


def copy_tree(src: Path, dest: Path) -> Path:
    """A hard-linked copy of an installed release (``lmcache/`` and its ``dist-info``)."""
    shutil.copytree(src, dest, copy_function=os.link, ignore=shutil.ignore_patterns("bin"))
    return dest


def write(path: Path, text: str) -> None:
    """Replace ``path`` (never write through a hard link into the installed release)."""
    if path.exists():
        path.unlink()
    path.write_text(text, encoding="utf-8")


def defining_module(root: Path, place: Place) -> str:
    """The first known module of ``place`` whose file defines the class (top level)."""
    for dotted in place.modules:
        path = root / module_file(dotted)
        if path.is_file() and class_node(ast.parse(path.read_text("utf-8")), place.name):
            return dotted
    raise LookupError(f"{place.name}: none of {place.modules} defines it under {root}")


def class_node(tree: ast.Module, name: str) -> ast.ClassDef | None:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node
    return None


def method_node(cls: ast.ClassDef, name: str) -> ast.FunctionDef:
    for node in cls.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    raise LookupError(f"{cls.name} has no method {name}")


def start_line(node: ast.stmt) -> int:
    """The first line of ``node``, decorators included (1-based)."""
    decorators: list[ast.expr] = getattr(node, "decorator_list", [])
    return min([node.lineno, *(d.lineno for d in decorators)])


def splice(text: str, first: int, last: int, new: str) -> str:
    """Replace lines ``first..last`` (1-based, inclusive) with ``new``."""
    lines = text.splitlines(keepends=True)
    return "".join([*lines[: first - 1], new, *lines[last:]])


def node_source(text: str, node: ast.stmt) -> str:
    lines = text.splitlines(keepends=True)
    return "".join(lines[start_line(node) - 1 : node.end_lineno])


def after_imports(tree: ast.Module) -> int:
    """The line after the module's last top-level import (where new imports go)."""
    last = 0
    for node in tree.body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            last = node.end_lineno or node.lineno
    return last + 1


def insert_line(text: str, line: int, new: str) -> str:
    lines = text.splitlines(keepends=True)
    return "".join([*lines[: line - 1], new, *lines[line - 1 :]])


def top_imports(text: str, tree: ast.Module) -> str:
    """The module's top-level imports, as source (for a new module beside it)."""
    return "".join(
        node_source(text, n) for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)
    )


class Module:
    """One module of the mutated tree: its path, text and tree, rewritten through :meth:`save`."""

    def __init__(self, root: Path, dotted: str) -> None:
        self.root, self.dotted = root, dotted
        self.path = root / module_file(dotted)
        self.text = self.path.read_text("utf-8")

    @property
    def tree(self) -> ast.Module:
        return ast.parse(self.text)

    def cls(self, name: str) -> ast.ClassDef:
        node = class_node(self.tree, name)
        if node is None:
            raise LookupError(f"{self.dotted} defines no class {name}")
        return node

    def save(self, text: str) -> None:
        if text == self.text:
            raise AssertionError(f"{self.dotted}: the edit changed nothing")
        ast.parse(text)  # a mutation must stay valid Python
        self.text = text
        write(self.path, text)

    def sibling(self, suffix: str) -> str:
        """A new module beside this one: ``<this module>_<suffix>``."""
        return f"{self.dotted}_{suffix}"


def module_of(root: Path, place: Place) -> Module:
    return Module(root, defining_module(root, place))


def rewrite_def(
    module: Module,
    cls_name: str,
    method: str,
    change: Callable[[ast.arguments], None],
    returns: ast.expr | None = None,
) -> None:
    """Rewrite one method's ``def`` header after ``change`` edits its parsed arguments (the
    body and decorators are kept as they are); ``returns``: a new return annotation."""
    node = method_node(module.cls(cls_name), method)
    change(node.args)
    header = copy.copy(node)
    header.body, header.decorator_list = [ast.Pass()], []
    if returns is not None:
        header.returns = returns
    ast.fix_missing_locations(header)
    source = ast.unparse(header).rsplit("\n", 1)[0]  # drop the placeholder body
    indent = " " * node.col_offset
    new = "".join(f"{indent}{line}\n" for line in source.splitlines())
    module.save(splice(module.text, node.lineno, node.body[0].lineno - 1, new))


def rewrite_annotation(
    module: Module,
    cls_name: str,
    method: str,
    pick: Callable[[ast.arg], bool],
    change: Callable[[ast.expr], ast.expr],
) -> str:
    """Change the annotation of the first parameter ``pick`` selects; returns its name."""
    chosen: list[str] = []

    def edit(args: ast.arguments) -> None:
        for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs]:
            if arg.annotation is not None and pick(arg):
                arg.annotation = change(arg.annotation)
                chosen.append(arg.arg)
                return
        raise LookupError(f"{cls_name}.{method}: no parameter to change")

    rewrite_def(module, cls_name, method, edit)
    return chosen[0]


def parameters_after(args: ast.arguments, name: str) -> list[ast.arg]:
    names = [a.arg for a in args.args]
    return args.args[names.index(name) + 1 :]
