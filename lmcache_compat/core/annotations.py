"""Annotations read as text, normalised to one form before any rule reads them.

Live probes and the static scanner both record an annotation as its source text (never
evaluated). :func:`parse` turns that text into an :class:`Annotation`: the union of its
alternatives, each a :class:`Type` (the last dotted name, folded to one spelling, with its
arguments). So ``Optional[bytes]``, ``Union[bytes, None]``, ``bytes | None``, ``"bytes | None"``
and ``typing.Optional[builtins.bytes]`` are one annotation, ``typing.List[int]`` is
``list[int]``, ``Annotated[X, ...]`` is ``X``, ``ForwardRef('X')`` is ``X``, and ``NoneType`` is
``None``. Text that does not
parse as an annotation (or is over the size and depth limits) gives ``None``: a rule then says it
cannot classify it, never guesses.

This is the only annotation walker of lmcache-compat: ``diff`` compares normalised texts, the
token-form rule (:mod:`lmcache_compat.core.tokens`) reads the alternatives, and
:func:`admits_none` answers "may this return None?" for the catalog and the vLLM connector.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass

__all__ = [
    "Annotation",
    "Type",
    "admits_none",
    "normalise",
    "parse",
    "substitute",
    "widens",
]

#: ``typing`` spellings folded to the builtin or ``collections.abc`` name they stand for.
_ALIASES = {
    "List": "list",
    "Dict": "dict",
    "Tuple": "tuple",
    "Set": "set",
    "FrozenSet": "frozenset",
    "Type": "type",
    "Text": "str",
    "NoneType": "None",
    "ByteString": "bytes",
    "Deque": "deque",
    "DefaultDict": "defaultdict",
}
_MAX_TEXT = 2000
_MAX_DEPTH = 30
_MAX_NODES = 400


@dataclass(frozen=True, slots=True, order=True)
class Type:
    """One alternative of an annotation: ``list[int]`` is ``Type("list", (Annotation(int),))``."""

    head: str
    args: tuple[Annotation, ...] = ()

    def text(self) -> str:
        if not self.args:
            return self.head
        return f"{self.head}[{', '.join(a.text() for a in self.args)}]"


@dataclass(frozen=True, slots=True, order=True)
class Annotation:
    """A normalised annotation: its alternatives, sorted and without duplicates."""

    alternatives: tuple[Type, ...]

    @property
    def admits_none(self) -> bool:
        return any(t.head == "None" for t in self.alternatives)

    def without_none(self) -> tuple[Type, ...]:
        return tuple(t for t in self.alternatives if t.head != "None")

    @property
    def heads(self) -> frozenset[str]:
        return frozenset(t.head for t in self.alternatives)

    def text(self) -> str:
        return " | ".join(t.text() for t in self.alternatives)


class _TooComplex(Exception):
    pass


class _Reader:
    def __init__(self) -> None:
        self.nodes = 0

    def union(self, node: ast.expr, depth: int) -> Annotation:
        types: set[Type] = set()
        for member in self._members(node, depth):
            types.update(member)
        return Annotation(tuple(sorted(types)))

    def _members(self, node: ast.expr, depth: int) -> list[tuple[Type, ...]]:
        self.nodes += 1
        if depth > _MAX_DEPTH or self.nodes > _MAX_NODES:
            raise _TooComplex
        if isinstance(node, ast.Constant):
            if node.value is None:
                return [(Type("None"),)]
            if isinstance(node.value, str):  # a quoted forward reference
                inner = _parse_expr(node.value)
                if inner is None:
                    raise _TooComplex
                return [self.union(inner, depth + 1).alternatives]
            if node.value is Ellipsis:
                return [(Type("..."),)]
            return [(Type(repr(node.value)),)]
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            return self._members(node.left, depth + 1) + self._members(node.right, depth + 1)
        if isinstance(node, (ast.Name, ast.Attribute)):
            return [(Type(_head(node)),)]
        if isinstance(node, ast.Subscript):
            head = _head(node.value)
            args = list(node.slice.elts) if isinstance(node.slice, ast.Tuple) else [node.slice]
            if head == "Optional" and len(args) == 1:
                return [*self._members(args[0], depth + 1), (Type("None"),)]
            if head == "Union":
                return [m for a in args for m in self._members(a, depth + 1)]
            if head == "Annotated" and args:
                return self._members(args[0], depth + 1)
            if head == "Literal":
                return [(Type("Literal", tuple(self._literal(a) for a in args)),)]
            return [(Type(head, tuple(self.union(a, depth + 1) for a in args)),)]
        if (  # str() of an evaluated Optional['X'] (a module without `from __future__ import
            # annotations`, probed live) prints Optional[ForwardRef('X')]: the quoted 'X'
            isinstance(node, ast.Call)
            and isinstance(node.func, (ast.Name, ast.Attribute))
            and _head(node.func) == "ForwardRef"
            and len(node.args) == 1
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            return self._members(node.args[0], depth + 1)
        if isinstance(node, ast.List):  # Callable[[int, str], None]
            return [(Type("[]", tuple(self.union(e, depth + 1) for e in node.elts)),)]
        raise _TooComplex

    def _literal(self, node: ast.expr) -> Annotation:
        self.nodes += 1
        text = ast.unparse(node) if not isinstance(node, ast.Constant) else repr(node.value)
        return Annotation((Type(text),))


def _head(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        name = node.id
    elif isinstance(node, ast.Attribute):
        name = node.attr
    else:
        raise _TooComplex
    return _ALIASES.get(name, name)


def _parse_expr(text: str) -> ast.expr | None:
    if len(text) > _MAX_TEXT:
        return None
    try:
        return ast.parse(text.strip(), mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def parse(text: str | None) -> Annotation | None:
    """The normalised annotation of ``text``; ``None`` for no text, or text that is not an
    annotation this model can read (then a rule cannot classify it)."""
    if not text:
        return None
    node = _parse_expr(text)
    if node is None:
        return None
    try:
        return _Reader().union(node, 0)
    except (_TooComplex, RecursionError):
        return None


def normalise(text: str) -> str:
    """The canonical text of an annotation (whitespace removed when it cannot be read)."""
    parsed = parse(text)
    return parsed.text() if parsed is not None else "".join(text.split())


def admits_none(text: str | None) -> bool:
    """Whether an annotation admits ``None`` (``Optional[X]``, ``Union[..., None]``,
    ``X | None``, ``None``, quoted or not). No text, or text that cannot be read, gives
    ``False``: a method that does not say it may return None returns a value."""
    parsed = parse(text)
    return parsed is not None and parsed.admits_none


#: Annotations that admit every value (``typing.Any``, ``object``).
_ANYTHING = frozenset({Type("Any"), Type("object")})


def widens(old: str, new: str) -> bool:
    """Whether ``new`` accepts every value ``old`` does: its alternatives are a strict superset
    (``bytes`` -> ``bytes | memoryview``, ``int`` -> ``int | None``), or it admits anything
    (``Any``, ``object``: ``int`` -> ``object``, ``Any`` -> ``object``)."""
    a, b = parse(old), parse(new)
    if a is None or b is None:
        return False
    return set(a.alternatives) < set(b.alternatives) or bool(_ANYTHING & set(b.alternatives))


def substitute(text: str, alias: Callable[[str], str | None], depth: int = 3) -> str:
    """``text`` with each bare name that ``alias`` knows replaced by what it stands for (a
    module's ``TokenIds = list[int]``), ``depth`` times at most; the text unchanged when it does
    not parse or names no alias."""
    node = _parse_expr(text)
    if node is None:
        return text
    changed = False
    for _ in range(depth):
        swapped = False

        def swap(n: ast.expr) -> ast.expr:
            nonlocal swapped
            if isinstance(n, ast.Name):
                replacement = alias(n.id)
                parsed = _parse_expr(replacement) if replacement else None
                if parsed is not None:
                    swapped = True
                    return parsed
                return n
            for field, value in ast.iter_fields(n):
                if isinstance(value, ast.expr):
                    setattr(n, field, swap(value))
                elif isinstance(value, list):
                    setattr(n, field, [swap(v) if isinstance(v, ast.expr) else v for v in value])
            return n

        try:
            node = swap(node)
        except RecursionError:
            return text
        if not swapped:
            break
        changed = True
    return ast.unparse(node) if changed else text
