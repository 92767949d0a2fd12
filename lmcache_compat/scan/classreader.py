"""Reading classes from Python source with ``ast``: nothing is imported or executed.

:class:`ClassReader` turns a class of a module read by :mod:`lmcache_compat.scan.modules` into
its members' :class:`~lmcache_compat.core.signatures.MethodFacts`, following base classes,
aliases and re-exports in the same package (memoised per class) and synthesising a dataclass's
``__init__``; :func:`function_facts` does the same for one function.
"""

from __future__ import annotations

import ast
import inspect
from dataclasses import dataclass
from typing import Any

from lmcache_compat.core.signatures import DEFAULT, MethodFacts, literal_default, make_signature
from lmcache_compat.errors import InvalidSourceError
from lmcache_compat.scan.modules import Index, Module, top_level

__all__ = ["ClassInfo", "ClassReader", "function_facts"]

P = inspect.Parameter

_PROPERTIES = {"property", "cached_property", "abstractproperty"}
_ACCESSORS = {"setter", "getter", "deleter"}
_IGNORED_BASES = ("object", "ABC", "abc.ABC", "Protocol")


def _tail(node: ast.expr) -> str | None:
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _text(node: ast.expr | None) -> Any:
    return P.empty if node is None else ast.unparse(node)


def _default(node: ast.expr) -> Any:
    """A parameter's default: its literal where the source writes a constant (``None``,
    ``-1``, ``"x"``), else only that it has one. Nothing else is evaluated."""
    value = node
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = node.operand
    if isinstance(value, ast.Constant) and not isinstance(value.value, (complex, type(...))):
        try:
            return literal_default(ast.literal_eval(node))
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return DEFAULT
    return DEFAULT


def function_facts(fn: ast.FunctionDef | ast.AsyncFunctionDef, drop_first: bool) -> MethodFacts:
    a = fn.args
    positional = [*a.posonlyargs, *a.args]
    first_default = len(positional) - len(a.defaults)
    params: list[P] = []
    for i, arg in enumerate(positional):
        kind = P.POSITIONAL_ONLY if i < len(a.posonlyargs) else P.POSITIONAL_OR_KEYWORD
        default = _default(a.defaults[i - first_default]) if i >= first_default else P.empty
        params.append(P(arg.arg, kind, default=default, annotation=_text(arg.annotation)))
    if drop_first and params:
        params = params[1:]
    if a.vararg is not None:
        params.append(P(a.vararg.arg, P.VAR_POSITIONAL, annotation=_text(a.vararg.annotation)))
    for arg, kw_default in zip(a.kwonlyargs, a.kw_defaults, strict=True):
        default = P.empty if kw_default is None else _default(kw_default)
        params.append(P(arg.arg, P.KEYWORD_ONLY, default=default, annotation=_text(arg.annotation)))
    if a.kwarg is not None:
        params.append(P(a.kwarg.arg, P.VAR_KEYWORD, annotation=_text(a.kwarg.annotation)))
    returns = ast.unparse(fn.returns) if fn.returns is not None else None
    try:
        signature = make_signature(params, returns)
    except ValueError as exc:  # duplicate names: Python would refuse to compile it
        raise InvalidSourceError(f"def {fn.name}() at line {fn.lineno}: {exc}") from None
    return MethodFacts(signature, is_async=isinstance(fn, ast.AsyncFunctionDef))


def _is_dataclass(cls: ast.ClassDef) -> bool:
    return any(_tail(d) == "dataclass" for d in cls.decorator_list)


def _dataclass_kw_only(cls: ast.ClassDef) -> bool:
    for d in cls.decorator_list:
        if isinstance(d, ast.Call) and _tail(d) == "dataclass":
            for k in d.keywords:
                if k.arg == "kw_only" and isinstance(k.value, ast.Constant):
                    return bool(k.value.value)
    return False


def _dataclass_field(node: ast.AnnAssign, kw_only: bool) -> P | None:
    if not isinstance(node.target, ast.Name):
        return None
    ann = ast.unparse(node.annotation)
    if "ClassVar" in ann:
        return None
    default: Any = P.empty if node.value is None else _default(node.value)
    if isinstance(node.value, ast.Call) and _tail(node.value.func) == "field":
        kwargs = {k.arg: k.value for k in node.value.keywords if k.arg}
        init = kwargs.get("init")
        if isinstance(init, ast.Constant) and init.value is False:
            return None
        if "default" in kwargs:
            default = _default(kwargs["default"])
        else:
            default = DEFAULT if "default_factory" in kwargs else P.empty
    kind = P.KEYWORD_ONLY if kw_only else P.POSITIONAL_OR_KEYWORD
    return P(node.target.id, kind, default=default, annotation=ann)


@dataclass
class ClassInfo:
    methods: dict[str, MethodFacts]
    fields: list[P] | None  # dataclass fields, None for other classes
    external: list[str]


class ClassReader:
    """Class surfaces from ``ast``: follows bases in the package (memoised per class: a
    diamond or a doubling hierarchy is read once per class, within ``budgets.classes``)."""

    def __init__(self, index: Index) -> None:
        self.index = index
        self._done: dict[tuple[str, str], ClassInfo] = {}
        self._active: set[tuple[str, str]] = set()

    def in_package(self, dotted: str) -> bool:
        return dotted == self.index.package or dotted.startswith(self.index.package + ".")

    def resolve(
        self, module: Module, name: str, depth: int = 0
    ) -> tuple[Module, ast.ClassDef] | None:
        """Find class ``name`` as seen from ``module``: defined there, bound by an alias
        (``Old = New``), imported from the same package, or re-exported by ``from x import *``
        (honouring a literal ``__all__``); each step within the package, at most 20 deep."""
        if depth > 20:
            return None
        if name in module.classes:
            return module, module.classes[name]
        alias = module.aliases.get(name)
        if alias is not None:
            return self._resolve_expr(module, alias, depth + 1)
        origin = module.imports.get(name)
        if origin is not None:
            source, attr = origin
            if attr is None or not self.in_package(source):
                return None
            target = self.index.module_by_dotted(source)
            if target is None:  # ``from pkg import submodule``: not a class
                return None
            return self.resolve(target, attr, depth + 1)
        for source in module.stars:
            if not self.in_package(source):
                continue
            target = self.index.module_by_dotted(source)
            if target is not None and target is not module and target.star_exports(name):
                hit = self.resolve(target, name, depth + 1)
                if hit is not None:
                    return hit
        return None

    def _resolve_expr(
        self, module: Module, expr: ast.expr, depth: int = 0
    ) -> tuple[Module, ast.ClassDef] | None:
        """The class a name (``X``) or an attribute of an imported module (``mod.X``) refers
        to, as seen from ``module``."""
        if isinstance(expr, ast.Subscript):
            expr = expr.value
        if isinstance(expr, ast.Name):
            return self.resolve(module, expr.id, depth)
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name):
            origin = module.imports.get(expr.value.id)
            if origin is None:
                return None
            source, attr = origin
            dotted = source if attr is None else f"{source}.{attr}"
            if not self.in_package(dotted):
                return None
            target = self.index.module_by_dotted(dotted)
            return None if target is None else self.resolve(target, expr.attr, depth + 1)
        return None

    def info(self, module: Module, cls: ast.ClassDef) -> ClassInfo:
        key = (module.relpath, cls.name)
        done = self._done.get(key)
        if done is not None:
            return done
        if key in self._active:  # a cycle through re-exports: stop
            return ClassInfo({}, None, [])
        self.index.tree.meter.spend("classes", 1, f"{self.index.tree.description}: {cls.name}")
        self._active.add(key)
        try:
            info = self._compute(module, cls)
        finally:
            self._active.discard(key)
        self._done[key] = info
        return info

    def _compute(self, module: Module, cls: ast.ClassDef) -> ClassInfo:
        methods, fields, external, base_is_dataclass = self._inherited(module, cls)
        own, own_fields = _own_members(cls)
        for name, facts in own.items():
            if facts is None:
                methods.pop(name, None)
            else:
                methods[name] = facts
        is_dataclass = _is_dataclass(cls)
        if is_dataclass:
            names = {p.name for p in own_fields}
            fields = [p for p in fields if p.name not in names] + own_fields
            if "__init__" not in own:
                try:
                    signature = make_signature(fields)
                except ValueError as exc:  # a required field after a defaulted one
                    raise InvalidSourceError(
                        f"{module.relpath}: dataclass {cls.name}: {exc}"
                    ) from None
                methods["__init__"] = MethodFacts(signature, dataclass=True)
        return ClassInfo(
            methods, fields if (is_dataclass or base_is_dataclass) else None, list(external)
        )

    def _inherited(
        self, module: Module, cls: ast.ClassDef
    ) -> tuple[dict[str, MethodFacts], list[P], dict[str, None], bool]:
        """What ``cls`` inherits, the last base first: methods, dataclass fields, the bases
        outside the release (unparsed), and whether a base is a dataclass."""
        methods: dict[str, MethodFacts] = {}
        fields: list[P] = []
        external: dict[str, None] = {}
        base_is_dataclass = False
        for base in reversed(cls.bases):
            found = self._resolve_expr(module, base)
            if found is None:
                text = ast.unparse(base)
                if text not in _IGNORED_BASES and not text.startswith(("Generic[", "Protocol[")):
                    external = {text: None, **external}
                continue
            binfo = self.info(*found)
            methods.update(binfo.methods)
            external = {**dict.fromkeys(binfo.external), **external}
            if binfo.fields is not None:
                base_is_dataclass = True
                names = {p.name for p in binfo.fields}
                fields = [p for p in fields if p.name not in names] + binfo.fields
        return methods, fields, external, base_is_dataclass


def _own_members(cls: ast.ClassDef) -> tuple[dict[str, MethodFacts | None], list[P]]:
    """The members ``cls`` defines itself (``None``: a plain attribute, which shadows an
    inherited method) and its own dataclass fields."""
    own: dict[str, MethodFacts | None] = {}
    own_fields: list[P] = []
    kw_only = _dataclass_kw_only(cls)
    for node in top_level(cls.body):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            decorators = {_tail(d) for d in node.decorator_list}
            if "overload" in decorators:
                continue
            if decorators & _PROPERTIES:
                own[node.name] = MethodFacts(None, kind="property")
                continue
            if decorators & _ACCESSORS:  # @x.setter keeps x a property
                continue
            own[node.name] = function_facts(node, drop_first="staticmethod" not in decorators)
        elif isinstance(node, ast.AnnAssign):
            if ast.unparse(node.annotation).endswith("KW_ONLY"):
                kw_only = True
                continue
            param = _dataclass_field(node, kw_only)
            if param is not None:
                own_fields.append(param)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    own[target.id] = None  # a plain attribute shadows an inherited method
    return own, own_fields
