"""The one factory every adapter is built by: probe once, decide once, bind once.

:class:`Options` normalises what a caller asks for (``require=``, ``strict=``, ``allow=``) once;
:func:`bind` then runs, top to bottom:

1. a class passed instead of an instance is refused (:class:`~lmcache_compat.errors.
   NotAnEngineError`);
2. the target's class is probed (cached per class; nothing is called or evaluated);
3. an object lacking a method every release of the role has is refused
   (:class:`~lmcache_compat.errors.NotAnEngineError`);
4. a missing required capability is refused (:class:`~lmcache_compat.errors.
   MissingCapabilityError`: what, where, installed and first releases, a fix);
5. each core method the adapter passes through is bound to the engine's own bound method, or
   -- where its parameters are no longer positional in the documented order -- to a call by
   keyword;
6. each optional method (the catalog's pass-through rows for the role) is bound to the engine's
   own bound method (behind the row's result check, if any); an absent one is left to the
   adapter class, whose method of that name is the row's fallback (:func:`install_fallbacks`),
   or in strict mode bound to a raiser; a member that exists but cannot be read is named in a
   warning;
7. each method with no safe fallback is bound to the engine's own or to a raiser.

The :class:`Binding` holds the result; an adapter stores the engine's methods as plain instance
attributes, so a call through the adapter is one attribute load and the engine's own call, and a
fallback is a plain method of the adapter class, so calling it costs exactly a method call: no
``getattr``, ``try`` or version check per call. Engine errors propagate unchanged.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, NoReturn

from lmcache_compat.core.arguments import Allow, Downgrades, normalise_allow
from lmcache_compat.core.catalog import Capability, CapabilitySpec, pass_through, spec_for
from lmcache_compat.core.probes import Capabilities, ClassFacts, facts_for_class, probe_target
from lmcache_compat.core.roles import Role
from lmcache_compat.core.signatures import MethodFacts
from lmcache_compat.errors import MissingCapabilityError, NotAnEngineError
from lmcache_compat.versions import version_or_none

__all__ = [
    "Binding",
    "Options",
    "UnreadableMethodWarning",
    "bind",
    "install_fallbacks",
    "missing_error",
    "property_getter",
]


class UnreadableMethodWarning(UserWarning):
    """An engine method whose signature lmcache-compat cannot read: the adapter uses the
    capability's fallback (or, strict, raises) instead of calling it."""


@dataclass(frozen=True, slots=True)
class Options:
    """What the caller asked an adapter for, normalised once."""

    #: Capabilities that must be present (unknown names fail here, before any work).
    require: tuple[CapabilitySpec, ...] = ()
    #: Absent optional methods raise instead of returning their fallback.
    strict: bool = False
    #: Argument downgrades the caller accepts (:func:`~lmcache_compat.core.arguments.
    #: normalise_allow`).
    allow: Allow = frozenset()

    @classmethod
    def of(
        cls,
        require: Iterable[Capability | str] | Capability | str = (),
        strict: bool = False,
        allow: Iterable[str] | str | bool = (),
    ) -> Options:
        if isinstance(require, (str, Capability)):
            require = (require,)
        return cls(tuple(spec_for(c) for c in require), bool(strict), normalise_allow(allow))


@dataclass(frozen=True, slots=True)
class Binding:
    """What :func:`bind` decided for one target."""

    target: Any
    target_cls: type
    facts: ClassFacts
    capabilities: Capabilities
    lmcache_version: str | None
    options: Options
    #: Adapter method name -> the callable a call runs.
    methods: dict[str, Callable[..., Any]]

    def downgrades(self, member: str) -> Downgrades:
        """The caller's ``allow=`` for ``member`` of the target (error messages name it)."""
        return Downgrades(
            self.options.allow, f"{self.capabilities.cls_name}.{member}", self.lmcache_version
        )

    @property
    def engine(self) -> Any:
        """The target, typed for calls (its methods are read from its class)."""
        return self.target

    def surface(self, name: str) -> MethodFacts:
        return self.facts.surface[name]


def install_fallbacks(cls: type, role: Role) -> None:
    """Give an adapter class, as plain methods, the fallback of every pass-through row of
    ``role`` (a release without the capability calls it; one that has it shadows it with the
    engine's own method). Run once per adapter class, at its creation."""
    for spec in pass_through(role):
        if spec.method not in cls.__dict__:
            setattr(cls, spec.method, spec.fallback)


def missing_error(
    spec: CapabilitySpec, cls_name: str, version: str | None
) -> MissingCapabilityError:
    """The error for a missing capability: what, where, installed and first versions, a fix
    (the catalog's first release, which equals the shipped matrix's)."""
    return MissingCapabilityError(
        spec.capability.value,
        member=spec.member,
        cls_name=cls_name,
        installed=version,
        since=spec.since,
        removed=spec.removed,
    )


def _raiser(spec: CapabilitySpec, cls_name: str, version: str | None) -> Callable[..., NoReturn]:
    def missing(*args: object, **kwargs: object) -> NoReturn:
        raise missing_error(spec, cls_name, version)

    missing.__name__ = missing.__qualname__ = spec.method
    return missing


def property_getter(cls: type, name: str) -> Callable[[Any], Any]:
    """The getter of property ``name`` of ``cls`` (read from the class, never evaluated)."""
    for klass in cls.__mro__:
        raw = klass.__dict__.get(name)
        if raw is not None:
            getter = getattr(raw, "fget", None) or getattr(raw, "func", None)
            if getter is None:
                raise NotAnEngineError(f"{cls.__qualname__}.{name} is not a readable property")
            return getter  # type: ignore[no-any-return]
    raise NotAnEngineError(f"{cls.__qualname__} has no property {name!r}")


def _by_keyword(method: Callable[..., Any], names: tuple[str, ...]) -> Callable[..., Any]:
    """A positional call of ``names`` made by keyword (the release turned them keyword-only,
    or reordered them)."""

    def call_by_keyword(*args: Any, **kwargs: Any) -> Any:
        return method(**dict(zip(names, args, strict=False)), **kwargs)

    return call_by_keyword


def _engine_method(
    target: Any, name: str, params: tuple[str, ...], facts: MethodFacts | None, cls_name: str
) -> Callable[..., Any]:
    bound: Callable[..., Any] = getattr(target, name)
    if facts is None or facts.call_shape(params) != "keyword":
        return bound
    return _by_keyword(bound, params)


def _warn_unreadable(facts: ClassFacts, spec: CapabilitySpec, strict: bool) -> None:
    member = facts.surface.get(spec.method)
    if member is None or member.kind != "opaque":
        return
    instead = (
        "calling it raises MissingCapabilityError (strict)"
        if strict
        else f"the adapter returns the fallback instead: {spec.fallback_result}"
    )
    warnings.warn(
        f"{facts.cls_name}.{spec.method} is a descriptor whose signature cannot be read without "
        f"running it (not a function, no __wrapped__), so lmcache-compat cannot tell whether it "
        f"is {spec.member}; {instead}. Define it as a plain method, or wrap it with "
        "functools.wraps so that its signature can be read",
        UnreadableMethodWarning,
        stacklevel=4,
    )


def bind(
    target: object,
    role: Role,
    options: Options,
    *,
    adapter: str,
    core: Iterable[str] | None = None,
    raise_absent: Iterable[Capability] = (),
) -> Binding:
    """Decide and bind everything an adapter of ``role`` needs over ``target`` (see the module
    docstring for the steps). ``adapter`` names the adapter class for messages; ``core``: the
    role's core methods it passes through (default: all); ``raise_absent``: capabilities
    without a safe fallback whose method is still offered."""
    if issubclass(type(target), type):  # isinstance() would consult a faked __class__
        raise NotAnEngineError(
            f"{adapter}() got the class {getattr(target, '__qualname__', target)!s}, not an "
            "instance of it: build the engine first and pass the instance"
        )
    target_cls = probe_target(target)
    facts = facts_for_class(target_cls)
    version = version_or_none("lmcache")
    lacking = facts.missing_core(role)
    if lacking:
        raise NotAnEngineError(
            f"{facts.cls_name} is not an LMCache {role.name}: it lacks "
            f"{', '.join(m + '()' for m in lacking)}, which every LMCache release that has the "
            "class has (found by reading its class, never by calling). For a unittest.mock, "
            f"pass spec={role.name} (or a fake class) so its methods are known."
        )
    caps = facts.capabilities_as(role)
    for spec in options.require:
        if spec.capability not in caps:
            raise missing_error(spec, facts.cls_name, version)
    methods: dict[str, Callable[..., Any]] = {}
    core_params = role.core_methods
    for name in core_params if core is None else core:
        methods[name] = _engine_method(
            target, name, core_params.get(name, ()), facts.surface.get(name), facts.cls_name
        )
    for spec in pass_through(role):
        bound = _pass_through(target, target_cls, facts, caps, spec, options, version)
        if bound is not None:
            methods[spec.method] = bound
    for capability in raise_absent:
        spec = capability.spec
        methods[spec.method] = (
            getattr(target, spec.method)
            if capability in caps
            else _raiser(spec, facts.cls_name, version)
        )
    return Binding(target, target_cls, facts, caps, version, options, methods)


def _pass_through(  # noqa: PLR0917 (bind's own step, over what it decided)
    target: object,
    target_cls: type,
    facts: ClassFacts,
    caps: Capabilities,
    spec: CapabilitySpec,
    options: Options,
    version: str | None,
) -> Callable[..., Any] | None:
    """What one catalog pass-through row binds: the engine's method (a property read per
    call), wrapped by the row's check; for an absent capability nothing (the adapter class's
    own method is the fallback), or a raiser when ``strict``."""
    if spec.capability not in caps:
        _warn_unreadable(facts, spec, options.strict)
        return _raiser(spec, facts.cls_name, version) if options.strict else None
    method: Callable[..., Any]
    if spec.kind == "property":
        # evaluated per call, as the release's own callers do; never by the probe
        method = functools.partial(property_getter(target_cls, spec.method), target)
    else:
        method = _engine_method(
            target, spec.method, spec.params, facts.surface.get(spec.method), facts.cls_name
        )
    if spec.check is not None:
        method = spec.check(method, f"{facts.cls_name}.{spec.method}", version)
    return method
