"""Method surfaces and the one rule that turns a surface into capabilities.

A *surface* maps method names to :class:`MethodFacts` (parameters and return annotation text).
The live probe (:mod:`lmcache_compat.probe`) builds one from a class's ``__dict__`` entries, the
static scanner builds one from ``ast`` without importing anything; both then call
:func:`capabilities_of`, so a release's capabilities mean the same thing whichever way they were
found.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from lmcache_compat.catalog import CATALOG, Capability, CapabilitySpec

__all__ = [
    "MethodFacts",
    "Param",
    "ParamKind",
    "annotation_admits_none",
    "capabilities_of",
    "class_capabilities",
    "release_capabilities",
    "render_params",
    "render_surface",
    "satisfies",
]

ParamKind = Literal[
    "positional_only", "positional", "var_positional", "keyword_only", "var_keyword"
]


@dataclass(frozen=True)
class Param:
    """One parameter, without ``self``/``cls``."""

    name: str
    kind: ParamKind
    has_default: bool = False


@dataclass(frozen=True)
class MethodFacts:
    """What a probe learned about one method, without calling it.

    ``params`` is ``None`` when the signature could not be read (e.g. a C function); such a
    method is taken to accept any call.
    """

    params: tuple[Param, ...] | None
    returns: str | None = None
    #: ``method``, or ``property`` (known to exist; never evaluated, so no params).
    kind: Literal["method", "property"] = "method"
    #: For a dataclass's generated ``__init__`` (static scans): each field's annotation text.
    fields: tuple[tuple[str, str], ...] = ()

    def accepts_keyword(self, name: str) -> bool:
        """Whether ``name`` is an explicit parameter that can be passed by keyword (``**kw``
        does not count: an old release would swallow and ignore it)."""
        if self.params is None:
            return False
        return any(p.name == name and p.kind in ("positional", "keyword_only") for p in self.params)

    def accepts_positional(self, n: int) -> bool:
        """Whether a call with ``n`` positional arguments (and no keywords) binds."""
        if self.params is None:
            return True
        capacity = 0
        required = 0
        variadic = False
        for p in self.params:
            if p.kind in ("positional_only", "positional"):
                capacity += 1
                if not p.has_default:
                    required += 1
            elif p.kind == "var_positional":
                variadic = True
            elif p.kind == "keyword_only" and not p.has_default:
                return False
        return required <= n and (variadic or n <= capacity)


def render_surface(surface: Mapping[str, MethodFacts]) -> dict[str, list[str]]:
    """A class's methods (not properties) as ``surfaces`` JSON renders them, sorted by name."""
    return {
        name: render_params(facts.params or ())
        for name, facts in sorted(surface.items())
        if facts.kind == "method"
    }


def render_params(params: Iterable[Param]) -> list[str]:
    """Parameter names as the scanner's JSON shows them: ``*args``/``**kw`` keep their stars,
    a bare ``*`` marks where keyword-only parameters start and ``/`` ends positional-only ones."""
    out: list[str] = []
    seen_star = False
    prev_kind: str | None = None
    for p in params:
        if prev_kind == "positional_only" and p.kind != "positional_only":
            out.append("/")
        if p.kind == "var_positional":
            out.append("*" + p.name)
            seen_star = True
        elif p.kind == "var_keyword":
            out.append("**" + p.name)
        elif p.kind == "keyword_only":
            if not seen_star:
                out.append("*")
                seen_star = True
            out.append(p.name)
        else:
            out.append(p.name)
        prev_kind = p.kind
    if prev_kind == "positional_only":
        out.append("/")
    return out


_MAX_ANNOTATION = 2000


def annotation_admits_none(annotation: str | None) -> bool:
    """Whether a return annotation's source text admits ``None``.

    Understands ``Optional[X]``, ``Union[..., None]``, ``X | None`` and ``None`` (with or without
    a ``typing.``/``t.`` prefix). ``None``, unparsable or oversized text gives ``False``: a
    method whose annotation does not say it may return None is taken to return a value.
    """
    if not annotation or len(annotation) > _MAX_ANNOTATION:
        return False
    try:
        tree = ast.parse(annotation.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return _admits_none(tree.body, depth=0)


def _tail_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _admits_none(node: ast.expr, depth: int) -> bool:
    if depth > 50:
        return False
    if isinstance(node, ast.Constant):
        if node.value is None:
            return True
        if isinstance(node.value, str):  # a quoted forward reference
            return annotation_admits_none(node.value) if depth < 5 else False
        return False
    if _tail_name(node) in ("None", "NoneType"):
        return True
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _admits_none(node.left, depth + 1) or _admits_none(node.right, depth + 1)
    if isinstance(node, ast.Subscript):
        head = _tail_name(node.value)
        if head == "Optional":
            return True
        if head == "Union":
            args = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            return any(_admits_none(a, depth + 1) for a in args)
        if head == "Annotated":
            first = node.slice.elts[0] if isinstance(node.slice, ast.Tuple) else node.slice
            return _admits_none(first, depth + 1)
    return False


def satisfies(spec: CapabilitySpec, facts: MethodFacts | None) -> bool:
    """Whether one member's facts carry one catalog capability (for a ``class`` row: whether
    the class exists at all, which the caller decides)."""
    if facts is None:
        return False
    if spec.kind == "property":
        return facts.kind == "property"
    if facts.kind != "method":
        return False
    if spec.keyword is not None:  # "takes this keyword": other parameters vary by release
        return facts.accepts_keyword(spec.keyword)
    if not facts.accepts_positional(len(spec.params)):
        return False
    return not spec.returns_none or annotation_admits_none(facts.returns)


def class_capabilities(
    role: str | None, surface: Mapping[str, MethodFacts]
) -> frozenset[Capability]:
    """The capabilities a class playing ``role`` (a catalog owner name) carries."""
    if role is None:
        return frozenset()
    return frozenset(
        row.capability
        for row in CATALOG
        if role in row.owners and (row.kind == "class" or satisfies(row, surface.get(row.method)))
    )


def release_capabilities(classes: Mapping[str, Mapping[str, MethodFacts]]) -> dict[str, bool]:
    """Every catalog capability -> whether a release whose classes have these surfaces carries
    it (every owner class must exist and carry it)."""
    return {
        row.capability.value: all(
            owner in classes
            and (row.kind == "class" or satisfies(row, classes[owner].get(row.method)))
            for owner in row.owners
        )
        for row in CATALOG
    }


#: The shared rule under its older name.
capabilities_of = class_capabilities
