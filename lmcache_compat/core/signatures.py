"""The one signature model: :class:`MethodFacts` around an :class:`inspect.Signature`.

Live probes build it with :func:`facts_of` (from a function, cached per function; reading a
signature runs no engine code), the static scanner builds it from ``ast`` without importing
anything, and the shipped matrix stores it with :func:`to_json` / :func:`from_json`. Whatever
way it was made, a parameter's annotation is its **source text** (never evaluated) and a default
is only known to exist (:data:`DEFAULT`), so live and static facts compare equal.
"""

from __future__ import annotations

import functools
import inspect
import math
import sys
import threading
import types
import weakref
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from lmcache_compat.core.annotations import substitute

__all__ = [
    "DEFAULT",
    "LiteralDefault",
    "MethodFacts",
    "facts_of",
    "from_json",
    "init_facts",
    "literal_default",
    "make_signature",
    "render_params",
    "to_json",
]

P = inspect.Parameter


class _Default:
    """The default of a parameter that has one: its value is never read (nor evaluated).

    Every default compares equal to every other (the model records *whether* a default exists),
    so facts with and without a recorded literal still compare equal."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "..."

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Default)

    def __hash__(self) -> int:
        return hash(_Default)


#: Stands for "has a default" in every signature of this model.
DEFAULT: Final = _Default()


class LiteralDefault(_Default):
    """A default that is a literal constant (``None``, a bool, a finite number, a short string
    or bytes), kept as its ``repr``: the text a fake of the release writes as its default."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


#: Defaults whose literal is recorded; a longer ``repr`` is recorded as :data:`DEFAULT` only.
MAX_LITERAL = 80
_LITERAL_TYPES: Final = (type(None), bool, int, float, str, bytes)


def literal_default(value: object) -> _Default:
    """The model's default for ``value``: its literal where it is a constant, else
    :data:`DEFAULT` (never evaluated further, never a ``repr`` of an arbitrary object)."""
    if type(value) in _LITERAL_TYPES and not (
        isinstance(value, float) and not math.isfinite(value)
    ):
        text = repr(value)
        if len(text) <= MAX_LITERAL:
            return LiteralDefault(text)
    return DEFAULT


#: ``opaque``: a descriptor whose result cannot be known without running its ``__get__`` (a
#: probe never does): present, but not a capability; adapters warn about it.
Kind = Literal["method", "property", "opaque"]


@dataclass(frozen=True)
class MethodFacts:
    """What is known about one class member without calling it.

    ``signature`` is ``None`` when it could not be read (a C function without a text
    signature): such a method is taken to accept any call. It never includes ``self``.
    """

    signature: inspect.Signature | None
    kind: Kind = "method"
    #: ``async def``: calling it returns a coroutine, so it cannot stand for a sync method.
    is_async: bool = False
    #: A dataclass's generated ``__init__`` (its parameters are the fields).
    dataclass: bool = False

    @property
    def params(self) -> tuple[inspect.Parameter, ...]:
        return () if self.signature is None else tuple(self.signature.parameters.values())

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params)

    @property
    def returns(self) -> str | None:
        if self.signature is None or self.signature.return_annotation is P.empty:
            return None
        return str(self.signature.return_annotation)

    def parameter(self, name: str) -> inspect.Parameter | None:
        return None if self.signature is None else self.signature.parameters.get(name)

    def annotation(self, name: str) -> str | None:
        """The source text of parameter ``name``'s annotation (``None``: none or no such)."""
        p = self.parameter(name)
        return None if p is None or p.annotation is P.empty else str(p.annotation)

    def accepts_keyword(self, name: str) -> bool:
        """Whether ``name`` is an explicit parameter that can be passed by keyword (``**kw``
        does not count: an old release would swallow and ignore it)."""
        p = self.parameter(name)
        return p is not None and p.kind in (P.POSITIONAL_OR_KEYWORD, P.KEYWORD_ONLY)

    def required(self, name: str) -> bool:
        p = self.parameter(name)
        return (
            p is not None
            and p.default is P.empty
            and p.kind not in (P.VAR_POSITIONAL, P.VAR_KEYWORD)
        )

    def required_beyond(self, names: Iterable[str]) -> tuple[str, ...]:
        """The parameters every call must pass that are not among ``names``."""
        known = set(names)
        return tuple(p.name for p in self.params if p.name not in known and self.required(p.name))

    def binds(self, n_positional: int) -> bool:
        """Whether a call with ``n_positional`` positional arguments (and no keywords) binds."""
        if self.signature is None:
            return True
        try:
            self.signature.bind(*range(n_positional))
        except TypeError:
            return False
        return True

    def binds_keywords(self, names: Iterable[str]) -> bool:
        """Whether a call passing each of ``names`` by keyword (and nothing else) binds (every
        name an explicit parameter: ``**kwargs`` would swallow a name it does not know)."""
        names = tuple(names)
        if self.signature is None:
            return True
        if not all(self.accepts_keyword(n) for n in names):
            return False
        try:
            self.signature.bind(**dict.fromkeys(names))
        except TypeError:
            return False
        return True

    def call_shape(self, names: tuple[str, ...]) -> Literal["positional", "keyword"] | None:
        """How a call of these parameters, in this order, binds to this signature.

        ``keyword`` when every name is an explicit parameter but they are not, in this order,
        the leading positional parameters (some turned keyword-only, or the order changed):
        passing them by name is the only certain call. Otherwise ``positional`` when a call
        with that many positional arguments binds (the documented calling convention; the
        release may name them differently), else ``keyword`` when one by name binds, else
        ``None``."""
        if self.signature is None:
            return "positional"
        named = bool(names) and all(self.accepts_keyword(n) for n in names)
        positional = [
            p.name for p in self.params if p.kind in (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD)
        ]
        in_order = tuple(positional[: len(names)]) == names
        if named and not in_order:
            return "keyword" if self.binds_keywords(names) else None
        if self.binds(len(names)):
            return "positional"
        return "keyword" if self.binds_keywords(names) else None


def make_signature(
    params: Iterable[inspect.Parameter], returns: str | None = None
) -> inspect.Signature:
    """A signature of this model (raises ``ValueError`` for an impossible parameter list)."""
    return inspect.Signature(
        list(params), return_annotation=P.empty if returns is None else returns
    )


# --- live functions -------------------------------------------------------------------------------

# Python 3.14 evaluates annotations lazily (PEP 649/749); ask for their source text there so a
# probe never runs annotation code. Earlier versions store strings or objects as written.
_SIGNATURE_KW: dict[str, Any] = {}
if sys.version_info >= (3, 14):  # pragma: no cover - exercised on 3.14 only
    import annotationlib

    _SIGNATURE_KW["annotation_format"] = annotationlib.Format.STRING


def _text(annotation: object, namespace: Mapping[str, Any]) -> object:
    """An annotation's text. A string (quoted, or PEP 563) names aliases by name: each name
    that is a typing alias in the function's module (``TokenIds = list[int]``) is read as what
    it stands for (a dictionary read: nothing is evaluated)."""
    if annotation is P.empty:
        return annotation
    if isinstance(annotation, str):
        return substitute(annotation, functools.partial(_alias_text, namespace))
    return inspect.formatannotation(annotation)


def _alias_text(namespace: Mapping[str, Any], name: str) -> str | None:
    value = namespace.get(name)
    if isinstance(value, (types.GenericAlias, types.UnionType)) or (
        type(value).__module__ == "typing" and hasattr(value, "__origin__")
    ):
        return inspect.formatannotation(value)
    return None


def _namespace(func: Any) -> Mapping[str, Any]:
    target = func.func if isinstance(func, functools.partial) else func
    found = getattr(target, "__globals__", None)
    return found if isinstance(found, dict) else {}


_CACHES: dict[bool, weakref.WeakKeyDictionary[Any, MethodFacts]] = {
    True: weakref.WeakKeyDictionary(),
    False: weakref.WeakKeyDictionary(),
}
_LOCK = threading.Lock()


def _compute(func: Any, drop_first: bool) -> MethodFacts:
    is_async = inspect.iscoroutinefunction(func) or inspect.isasyncgenfunction(func)
    try:
        sig = inspect.signature(func, **_SIGNATURE_KW)
    except Exception:  # C callables without text signatures, broken __signature__ ...
        return MethodFacts(None, is_async=is_async)
    params = list(sig.parameters.values())
    namespace = _namespace(func)
    if drop_first and params and params[0].kind in (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD):
        params = params[1:]
    model = [
        p.replace(
            annotation=_text(p.annotation, namespace),
            default=P.empty if p.default is P.empty else literal_default(p.default),
        )
        for p in params
    ]
    returns = _text(sig.return_annotation, namespace)
    signature = make_signature(model, None if returns is P.empty else str(returns))
    return MethodFacts(signature, is_async=is_async)


def facts_of(func: Any, *, drop_first: bool = True) -> MethodFacts:
    """:class:`MethodFacts` of a function (a bound method: its function), without its first
    parameter when ``drop_first``. Cached per function object (weakly: nothing is pinned)."""
    key = getattr(func, "__func__", func)  # a bound method's function (a C method stays)
    cache = _CACHES[drop_first]
    try:
        cached = cache.get(key)
    except TypeError:  # not weak-referenceable (or unhashable): computed each time
        return _compute(key, drop_first)
    if cached is not None:
        return cached
    facts = _compute(key, drop_first)
    with _LOCK:
        return cache.setdefault(key, facts)


def init_facts(cls: type) -> MethodFacts:
    """Constructor parameters of ``cls`` (its ``__init__``, dataclass-generated ones included),
    read from the class ``__dict__`` along the MRO (never ``getattr``)."""
    for klass in cls.__mro__:
        raw = klass.__dict__.get("__init__")
        if raw is not None:
            if klass is object:
                return MethodFacts(make_signature(()))
            return facts_of(raw)
    return MethodFacts(make_signature(()))


# --- JSON (the shipped matrix, ``scan --json``) ---------------------------------------------------


def render_params(facts: MethodFacts) -> list[str]:
    """Parameter names as ``surfaces`` JSON shows them: ``*args``/``**kw`` keep their stars, a
    bare ``*`` marks where keyword-only parameters start and ``/`` ends positional-only ones."""
    out: list[str] = []
    star = False
    prev: Any = None
    for p in facts.params:
        if prev is P.POSITIONAL_ONLY and p.kind is not P.POSITIONAL_ONLY:
            out.append("/")
        if p.kind is P.VAR_POSITIONAL:
            out.append("*" + p.name)
            star = True
        elif p.kind is P.VAR_KEYWORD:
            out.append("**" + p.name)
        elif p.kind is P.KEYWORD_ONLY:
            if not star:
                out.append("*")
                star = True
            out.append(p.name)
        else:
            out.append(p.name)
        prev = p.kind
    if prev is P.POSITIONAL_ONLY:
        out.append("/")
    return out


def to_json(facts: MethodFacts) -> tuple[list[str], dict[str, Any]]:
    """``(surface entry, details entry)``: the names (with markers), and what they leave out
    (parameters with defaults, annotations' source text, the return annotation)."""
    detail: dict[str, Any] = {}
    optional = [p.name for p in facts.params if p.default is not P.empty]
    if optional:
        detail["optional"] = optional
    literals = {
        p.name: p.default.text for p in facts.params if isinstance(p.default, LiteralDefault)
    }
    if literals:
        detail["defaults"] = literals
    annotations = {p.name: str(p.annotation) for p in facts.params if p.annotation is not P.empty}
    if annotations:
        detail["annotations"] = annotations
    if facts.returns is not None:
        detail["returns"] = facts.returns
    if facts.dataclass:
        detail["dataclass"] = True
    if facts.is_async:
        detail["async"] = True
    return render_params(facts), detail


def from_json(names: list[str], detail: Mapping[str, Any] | None = None) -> MethodFacts:
    """Rebuild :class:`MethodFacts` from a ``surfaces`` entry and its ``details`` entry."""
    detail = detail or {}
    optional = set(detail.get("optional", ()))
    literals: Mapping[str, str] = detail.get("defaults", {})
    annotations: Mapping[str, str] = detail.get("annotations", {})
    params: list[inspect.Parameter] = []
    keyword_only = False
    for token in names:
        if token == "/":
            params = [p.replace(kind=P.POSITIONAL_ONLY) for p in params]
            continue
        if token == "*":
            keyword_only = True
            continue
        kind: inspect._ParameterKind
        if token.startswith("**"):
            name, kind = token[2:], P.VAR_KEYWORD
        elif token.startswith("*"):
            name, kind = token[1:], P.VAR_POSITIONAL
            keyword_only = True
        else:
            name = token
            kind = P.KEYWORD_ONLY if keyword_only else P.POSITIONAL_OR_KEYWORD
        params.append(
            P(
                name,
                kind,
                default=(
                    (LiteralDefault(literals[name]) if name in literals else DEFAULT)
                    if name in optional
                    else P.empty
                ),
                annotation=annotations.get(name, P.empty),
            )
        )
    return MethodFacts(
        make_signature(params, detail.get("returns")),
        is_async=bool(detail.get("async")),
        dataclass=bool(detail.get("dataclass")),
    )


#: Raw class-``__dict__`` entries that are plain functions for :func:`facts_of`.
FUNCTION_TYPES: Final = (
    types.FunctionType,
    types.BuiltinFunctionType,
    types.MethodDescriptorType,
    types.WrapperDescriptorType,
)
