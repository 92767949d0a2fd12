"""Probing a live object or class, with no side effects.

The probe reads class ``__dict__`` entries along the MRO, the way attribute lookup finds them,
and never calls ``getattr`` on the object: no engine method is called, no property or other
descriptor is evaluated, and a permissive ``__getattr__`` is never consulted. A class attribute
counts as a method only if it is a function, a static/class method, a C method, or a callable
object without ``__get__``; properties and other descriptors (``cached_property``...) never carry
a capability, and neither does a non-callable attribute such as ``shutdown = None``.

Documented results for odd objects:

* Instance attributes are not considered: capabilities belong to the class and are cached per
  class. (An adapter still binds whatever ``getattr`` returns for a method the class has.)
* ``unittest.mock`` mocks are probed as their ``spec`` class (``Mock(spec=Engine)``); a mock
  without a class spec has no capabilities and is not an engine, however permissive it is.
* A method whose signature cannot be read (some C callables) is taken to accept any call.
* Only callables whose signature binds the catalog's call count (``shutdown = len`` is not a
  ``shutdown()``: ``len()`` does not bind), and an ``async def`` never stands for a catalog
  method (calling it would return a coroutine that never runs).
* Results are cached per class, keyed by the class's identity (never by equality: a metaclass
  may make two classes equal) and held weakly (nothing pins an engine or its class alive). If
  you patch a class after probing it, call :func:`clear_probe_cache`.
"""

from __future__ import annotations

import functools
import threading
import types
import weakref
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Final, cast

from lmcache_compat.core.catalog import CATALOG, Capability, owned_by
from lmcache_compat.core.roles import ROLES, Role, role_named
from lmcache_compat.core.signatures import FUNCTION_TYPES, MethodFacts, facts_of
from lmcache_compat.core.surface import class_capabilities, missing_core

__all__ = [
    "Capabilities",
    "ClassFacts",
    "class_facts",
    "clear_probe_cache",
    "facts_for_class",
    "live_surface",
    "method_facts",
    "probe",
    "probe_target",
]


@dataclass(frozen=True, slots=True)
class Capabilities:
    """The immutable result of :func:`probe`: which catalog capabilities a class offers.

    ``Capability.KV_EVENTS in caps`` (or ``"kv_events" in caps``), iteration in catalog order over
    the capabilities present, ``len()``, and :meth:`as_dict` over the whole catalog. Equal when
    the same capabilities are present (the class name is for messages only).
    """

    present: frozenset[Capability]
    cls_name: str = field(default="<unknown>", compare=False)

    @classmethod
    def of(cls, present: Iterable[Capability | str], cls_name: str = "<unknown>") -> Capabilities:
        return cls(frozenset(Capability(c) for c in present), cls_name)

    def __contains__(self, item: object) -> bool:
        if isinstance(item, Capability):
            return item in self.present
        if isinstance(item, str):
            try:
                return Capability(item) in self.present
            except ValueError:
                return False
        return False

    def __iter__(self) -> Iterator[Capability]:
        return (c for c in Capability if c in self.present)

    def __len__(self) -> int:
        return len(self.present)

    def __repr__(self) -> str:
        names = ", ".join(c.value for c in self)
        return f"Capabilities({self.cls_name}: {names or 'none'})"

    @property
    def missing(self) -> frozenset[Capability]:
        """The catalog capabilities this class does not offer."""
        return frozenset(Capability) - self.present

    def as_dict(self, owner: Role | None = None) -> dict[str, bool]:
        """Every catalog capability's name -> whether it is present, in catalog order (only
        the rows of ``owner``, a role, if given)."""
        caps = Capability if owner is None else owned_by(owner)
        return {c.value: c in self.present for c in caps}


class ClassFacts:
    """Everything an adapter needs to know about a class, computed once per class: the role it
    plays (:mod:`lmcache_compat.core.roles`), the facts of the members the catalog cares about,
    and the capabilities for that role."""

    __slots__ = ("_by_role", "capabilities", "cls_name", "role", "surface")

    def __init__(self, cls_name: str, role: Role | None, surface: dict[str, MethodFacts]) -> None:
        self.cls_name = cls_name
        self.role = role
        self.surface = surface
        self.capabilities = Capabilities.of(class_capabilities(role, surface), cls_name)
        self._by_role: dict[Role, Capabilities] = {}

    def capabilities_as(self, role: Role) -> Capabilities:
        """Capabilities if the class plays ``role`` (adapters know the role they wrap)."""
        if role == self.role:
            return self.capabilities
        caps = self._by_role.get(role)
        if caps is None:
            caps = self._by_role[role] = Capabilities.of(
                class_capabilities(role, self.surface), self.cls_name
            )
        return caps

    def missing_core(self, role: Role) -> tuple[str, ...]:
        """The methods every release of ``role`` has that this class lacks."""
        return missing_core(role, self.surface)


_MISSING: Final = object()
#: Per class, by identity (a metaclass may define ``__eq__``/``__hash__``: two equal classes are
#: still two classes): ``id(cls) -> (weak reference to cls, facts)``; an entry leaves with its
#: class.
_CACHE: dict[int, tuple[weakref.ref[type], ClassFacts]] = {}
_LOCK = threading.Lock()
_NAMES_OF_INTEREST: Final = tuple(
    dict.fromkeys(
        [row.method for row in CATALOG]
        + [name for role in ROLES for name, _ in role.core]
        + [name for role in ROLES for name in role.older]
    )
)


def qualname(cls: type) -> str:
    """``module.QualName`` of a class, read from its ``__dict__`` only."""
    module = cls.__dict__.get("__module__", "?")
    name = cls.__dict__.get("__qualname__", cls.__name__)
    return f"{module}.{name}"


def _is_mock_class(cls: type) -> bool:
    return any(
        k.__dict__.get("__module__") == "unittest.mock" and k.__name__ == "NonCallableMock"
        for k in cls.__mro__
    )


def probe_target(obj: object) -> type:
    """The class whose surface stands for ``obj``: ``obj`` itself if it is a class, the spec
    class of a ``unittest.mock`` mock, otherwise ``type(obj)`` (never ``obj.__class__``, which
    an object may fake)."""
    cls = type(obj)
    if issubclass(cls, type):  # isinstance() would consult a faked __class__
        return cast(type, obj)
    if _is_mock_class(cls):
        spec = object.__getattribute__(obj, "__dict__").get("_spec_class")
        if isinstance(spec, type):
            return spec
    return cls


def _lookup(cls: type, name: str) -> object:
    for klass in cls.__mro__:
        if klass is object:
            break
        value = klass.__dict__.get(name, _MISSING)
        if value is not _MISSING:
            return value
    return _MISSING


def method_facts(raw: object) -> MethodFacts | None:
    """Facts of one class-``__dict__`` entry, ``None`` if it is not a method.

    Functions, C method descriptors and class methods are bound on access, so their first
    parameter is dropped; static methods, builtins stored on a class (``shutdown = len``) and
    other callable objects are not bound, so every parameter counts. Properties are known to
    exist and never evaluated; any other descriptor is not a method (what attribute access
    returns is only known by running its ``__get__``, which a probe never does).
    """
    if isinstance(raw, staticmethod):
        return facts_of(raw.__func__, drop_first=False)
    if isinstance(raw, classmethod):
        return facts_of(raw.__func__)
    if isinstance(raw, FUNCTION_TYPES):
        return facts_of(raw, drop_first=not isinstance(raw, types.BuiltinFunctionType))
    if isinstance(raw, property) or type(raw).__name__ == "cached_property":
        return MethodFacts(None, kind="property")
    if isinstance(raw, functools.partialmethod):
        return _partialmethod_facts(raw)
    if hasattr(type(raw), "__get__"):
        # A wrapper that binds like the function it wraps (``functools.lru_cache``, wrapt's
        # ``FunctionWrapper``, tracing decorators): read through ``__wrapped__``. Any other
        # descriptor stays opaque: what it returns is only known by running ``__get__``.
        wrapped = _wrapped_function(raw)
        if wrapped is not None:
            return facts_of(wrapped)
        return MethodFacts(None, kind="opaque") if callable(raw) or _binds(raw) else None
    if callable(raw):
        return facts_of(raw, drop_first=False)
    return None


def _binds(raw: object) -> bool:
    """A non-data descriptor (``__get__`` without ``__set__``): attribute access may well
    return a callable, but only running ``__get__`` would tell."""
    return not hasattr(type(raw), "__set__") and not hasattr(type(raw), "__delete__")


def _wrapped_function(raw: object, depth: int = 8) -> types.FunctionType | None:
    """The plain function a method wrapper wraps (its ``__wrapped__`` chain, at most ``depth``
    links, read from the wrapper object, never from an engine), or ``None``."""
    current = raw
    for _ in range(depth):
        try:
            current = object.__getattribute__(current, "__wrapped__")
        except AttributeError:
            try:  # wrapt and other C proxies keep it as a type attribute
                current = current.__wrapped__  # type: ignore[attr-defined]
            except Exception:  # a proxy that refuses: cannot be read
                return None
        except Exception:
            return None
        if isinstance(current, types.FunctionType):
            return current
    return None


def _partialmethod_facts(raw: functools.partialmethod[Any]) -> MethodFacts | None:
    """``functools.partialmethod(func, *args, **keywords)``: the signature of ``func`` with
    ``self`` and the bound arguments taken (keywords keep a default, as a call sees them)."""
    func = raw.func
    if not isinstance(func, types.FunctionType):
        return MethodFacts(None, kind="opaque")
    return facts_of(functools.partial(func, None, *raw.args, **raw.keywords), drop_first=False)


def live_surface(cls: type, names: Iterable[str] | None = None) -> dict[str, MethodFacts]:
    """The methods of ``cls`` (public ones and ``__init__``, or just ``names``) with their facts,
    read from class ``__dict__`` entries without evaluating anything."""
    if names is None:
        seen: dict[str, None] = {}
        for klass in cls.__mro__:
            if klass is object:
                break
            for name in klass.__dict__:
                if not name.startswith("_") or name == "__init__":
                    seen.setdefault(name, None)
        names = seen
    surface: dict[str, MethodFacts] = {}
    for name in names:
        raw = _lookup(cls, name)
        if raw is _MISSING:
            continue
        facts = method_facts(raw)
        if facts is not None:
            surface[name] = facts
    return surface


def _role_of(cls: type, surface: dict[str, MethodFacts]) -> Role | None:
    """The role ``cls`` plays: by class name along the MRO, else by the core methods it has (a
    fake or third-party engine)."""
    for klass in cls.__mro__:
        role = role_named(klass.__name__)
        if role is not None:
            return role
    for role in ROLES:
        if role.by_members and not missing_core(role, surface):
            return role
    return None


def _compute(cls: type) -> ClassFacts:
    surface = live_surface(cls, _NAMES_OF_INTEREST)
    return ClassFacts(qualname(cls), _role_of(cls, surface), surface)


def class_facts(obj: object) -> ClassFacts:
    """Cached :class:`ClassFacts` of ``obj``'s probe target. Thread-safe."""
    return facts_for_class(probe_target(obj))


def facts_for_class(cls: type) -> ClassFacts:
    """Cached :class:`ClassFacts` of ``cls`` itself (a probe target already). Thread-safe."""
    key = id(cls)
    entry = _CACHE.get(key)
    if entry is not None and entry[0]() is cls:
        return entry[1]
    facts = _compute(cls)
    try:
        ref = weakref.ref(cls, functools.partial(_forget, key))
    except TypeError:  # a class that cannot be weakly referenced: computed each time
        return facts
    with _LOCK:
        entry = _CACHE.get(key)
        if entry is not None and entry[0]() is cls:
            return entry[1]
        _CACHE[key] = (ref, facts)
    return facts


def _forget(key: int, ref: weakref.ref[type]) -> None:
    with _LOCK:
        entry = _CACHE.get(key)
        if entry is not None and entry[0] is ref:
            del _CACHE[key]


def probe(obj: object) -> Capabilities:
    """The catalog capabilities of ``obj`` (an instance or a class), without side effects."""
    return class_facts(obj).capabilities


def clear_probe_cache() -> None:
    """Forget every cached probe result (after patching a probed class)."""
    with _LOCK:
        _CACHE.clear()
