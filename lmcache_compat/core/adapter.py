"""Bound adapters: ``ConnectorAdapter`` (over ``LMCacheConnectorV1Impl``) and the shared base
the multi-process and engine adapters build on.

Decide once, call fast: the constructor probes the engine's class (cached per class) and binds
each adapter method to the engine's own bound method, to a thin result check around it, or to
the catalog's fallback. A call through the adapter does no ``getattr``, ``callable``, ``try`` or
version check; exceptions raised by the engine propagate unchanged.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterable
from typing import Any, ClassVar, NoReturn, TypeVar, cast

from lmcache_compat.core.catalog import (
    CATALOG,
    CONNECTOR_IMPL,
    ROLE_CORE_METHODS,
    Capability,
    CapabilitySpec,
    fallback_table,
    spec_for,
)
from lmcache_compat.core.probes import Capabilities, ClassFacts, facts_for_class, probe_target
from lmcache_compat.errors import (
    LMCacheCompatError,
    MalformedResultError,
    MissingCapabilityError,
    NotAnEngineError,
)
from lmcache_compat.versions import version_or_none

__all__ = [
    "BoundAdapter",
    "ConnectorAdapter",
    "UnreadableMethodWarning",
    "first_release",
    "missing_error",
]


def _describe(value: object) -> str:
    text = repr(value)
    if len(text) > 120:
        text = text[:117] + "..."
    return f"{type(value).__name__} {text}"


def _check_block_ids(
    method: Callable[[], Any], where: str, version: str | None
) -> Callable[[], set[int]]:
    """Wrap ``get_block_ids_with_load_errors`` so a malformed result is loud.

    The engine's own set is returned as is: never copied, cached, filtered or converted.
    """

    def malformed(ids: object, detail: str) -> NoReturn:
        raise MalformedResultError(
            f"{where}.get_block_ids_with_load_errors() returned {detail}; expected a set of "
            f"non-negative int block ids (LMCache {version or 'unknown'}). The failed-load "
            "block ids cannot be trusted, so nothing was dropped or converted."
        )

    def slow_path(ids: object) -> set[int]:
        if not isinstance(ids, (set, frozenset)):
            malformed(ids, _describe(ids))
        for block in ids:
            if not isinstance(block, int) or isinstance(block, bool) or block < 0:
                malformed(ids, f"a set containing {_describe(block)}")
        return ids  # type: ignore[return-value]  # a frozenset or int subclasses: valid ids

    def get_block_ids_with_load_errors() -> set[int]:
        ids = method()
        if type(ids) is set:
            for block in ids:
                if type(block) is not int or block < 0:
                    return slow_path(ids)
            return ids
        return slow_path(ids)

    return get_block_ids_with_load_errors


def _listed_events(
    method: Callable[[], Any], where: str, version: str | None
) -> Callable[[], list[Any]]:
    """Wrap ``get_kv_events`` so it always returns a list (events themselves untouched)."""

    def slow_path(events: object) -> list[Any]:
        if (
            events is None
            or isinstance(events, (str, bytes))
            or not hasattr(type(events), "__iter__")
        ):
            raise MalformedResultError(
                f"{where}.get_kv_events() returned {_describe(events)}; expected an iterable "
                f"of KV cache events (LMCache {version or 'unknown'})."
            )
        return list(cast("Iterable[Any]", events))

    def get_kv_events() -> list[Any]:
        events = method()
        if type(events) is list:
            return events
        return slow_path(events)

    return get_kv_events


#: Result checks applied where the engine has the capability (the adapted concern).
_Check = Callable[[Callable[[], Any], str, "str | None"], Callable[..., Any]]
_CHECKS: dict[str, _Check] = {
    "get_block_ids_with_load_errors": _check_block_ids,
    "get_kv_events": _listed_events,
}


def first_release(spec: CapabilitySpec) -> str:
    """The release a ``pip install -U 'lmcache>=X'`` hint names: from the shipped release matrix
    (the first release from which on every release has it), else the catalog's ``since``."""
    from lmcache_compat.upstream.matrix import load_matrix

    try:
        return load_matrix().since(spec.capability) or spec.since
    except LMCacheCompatError:  # a broken data file must not mask the real error
        return spec.since


def missing_error(
    spec: CapabilitySpec, cls_name: str, version: str | None
) -> MissingCapabilityError:
    """The error for a missing capability: what, where, installed and first versions, a fix."""
    return MissingCapabilityError(
        spec.capability.value,
        member=spec.member,
        cls_name=cls_name,
        installed=version,
        since=first_release(spec),
    )


def _raiser(spec: CapabilitySpec) -> Callable[..., NoReturn]:
    """A method raising :class:`MissingCapabilityError` for ``spec``; the class name and
    version come from the adapter instance, so one generated class serves every engine."""

    def missing(self: BoundAdapter, *args: object, **kwargs: object) -> NoReturn:
        raise missing_error(spec, self.capabilities.cls_name, self.lmcache_version)

    missing.__name__ = missing.__qualname__ = spec.method
    return missing


_ShapeKey = tuple[type, frozenset[str], bool, frozenset[str]]
#: One generated subclass per (adapter class, absent methods, strict, always-raising methods):
#: bounded by the catalog's rows, whatever the number of engine classes.
_SHAPES: dict[_ShapeKey, type] = {}
_SHAPES_LOCK = threading.Lock()


def _shape_class(
    base: type[BoundAdapter],
    absent: tuple[CapabilitySpec, ...],
    strict: bool,
    always_raise: tuple[CapabilitySpec, ...] = (),
) -> type[BoundAdapter]:
    """The (cached) subclass of ``base`` whose class-level methods are the fallbacks, or the
    strict-mode raisers, of the ``absent`` capabilities.

    Fallbacks live on the class, not the instance, so calling one costs exactly a plain method
    call; the engine's own methods are bound per instance into ``__slots__``.
    """
    key: _ShapeKey = (
        base,
        frozenset(s.method for s in absent),
        strict,
        frozenset(s.method for s in always_raise),
    )
    shape = _SHAPES.get(key)
    if shape is not None:
        return shape
    namespace: dict[str, Any] = {"__slots__": (), "__module__": base.__module__}
    for spec in absent:
        namespace[spec.method] = _raiser(spec) if strict else spec.fallback
    for spec in always_raise:  # no safe fallback: calling it is always an error
        namespace[spec.method] = _raiser(spec)
    shape = type(base.__name__, (base,), namespace)
    shape.__qualname__ = base.__qualname__
    with _SHAPES_LOCK:
        return _SHAPES.setdefault(key, shape)


_A = TypeVar("_A", bound="BoundAdapter")


class BoundAdapter:
    """Shared machinery of the adapters: probe once, bind once, call fast.

    A subclass names the catalog owner it wraps (``_ROLE``) and the methods it passes through
    (``_PASS_THROUGH``, the role's core methods by default). :meth:`_build` probes the target's
    class (cached per class), checks required capabilities, binds each optional catalog method
    to the target's own bound method (behind a result check where the catalog says so), or --
    absent -- gives the adapter's class the catalog fallback as a plain method (or a raiser in
    ``strict`` mode). Subclasses then bind the methods whose arguments differ by release (see
    :mod:`lmcache_compat.mp.scheduler_calls` and :mod:`lmcache_compat.engine.calls`).
    """

    __slots__ = ("capabilities", "lmcache_version", "strict", "target")

    _ROLE: ClassVar[str] = CONNECTOR_IMPL
    _PASS_THROUGH: ClassVar[tuple[str, ...] | None] = None
    #: Rows without a fallback whose method is still offered: calling it without the
    #: capability raises (no safe fallback exists).
    _RAISE_WHEN_ABSENT: ClassVar[tuple[Capability, ...]] = ()

    target: Any
    capabilities: Capabilities
    lmcache_version: str | None
    strict: bool

    @classmethod
    def _build(
        cls: type[_A],
        target: object,
        require: Iterable[Capability | str],
        strict: bool,
    ) -> tuple[_A, ClassFacts, type]:
        """The bound adapter, the facts of the target's class, and that class."""
        if isinstance(require, (str, Capability)):
            require = (require,)
        required = [spec_for(c) for c in require]  # unknown names fail before any work
        if issubclass(type(target), type):  # isinstance() would consult a faked __class__
            raise NotAnEngineError(
                f"{cls.__name__}() got the class {getattr(target, '__qualname__', target)!s}, "
                "not an instance of it: build the engine first and pass the instance"
            )
        target_cls = probe_target(target)
        facts = facts_for_class(target_cls)
        version = version_or_none("lmcache")
        missing_core = facts.missing_core(cls._ROLE)
        if missing_core:
            raise NotAnEngineError(
                f"{facts.cls_name} is not an LMCache {cls._ROLE}: it lacks "
                f"{', '.join(m + '()' for m in missing_core)}, which every LMCache release "
                "that has the class has (found by reading its class, never by calling). For a "
                f"unittest.mock, pass spec={cls._ROLE} (or a fake class) so its methods are "
                "known."
            )
        caps = facts.capabilities_as(cls._ROLE)
        for spec in required:
            if spec.capability not in caps:
                raise missing_error(spec, facts.cls_name, version)

        optional = [
            s
            for s in CATALOG
            if cls._ROLE in s.owners and s.fallback is not None and s.keyword is None
        ]
        absent = tuple(s for s in optional if s.capability not in caps)
        _warn_opaque(facts, absent, bool(strict))
        raising = tuple(spec_for(c) for c in cls._RAISE_WHEN_ABSENT if c not in caps)
        shape = _shape_class(cls, absent, bool(strict), raising)
        self = cast(_A, object.__new__(shape))
        bind = object.__setattr__
        bind(self, "target", target)
        bind(self, "capabilities", caps)
        bind(self, "lmcache_version", version)
        bind(self, "strict", bool(strict))
        core = cls._PASS_THROUGH
        if core is None:
            core = tuple(ROLE_CORE_METHODS[cls._ROLE])
        for name in core:
            bind(self, name, getattr(target, name))
        for spec in optional:
            if spec.capability not in caps:
                continue
            method: Callable[..., Any]
            if spec.kind == "property":
                # evaluated per call, as the release's own callers do; never by the probe
                method = functools.partial(_property_getter(target_cls, spec.method), target)
            else:
                method = getattr(target, spec.method)
            check = _CHECKS.get(spec.method)
            if check is not None:
                method = check(method, facts.cls_name, version)
            bind(self, spec.method, method)
        for capability in cls._RAISE_WHEN_ABSENT:
            if capability in caps:
                bind(self, capability.spec.method, getattr(target, capability.spec.method))
        return self, facts, target_cls

    def _set(self, name: str, value: object) -> None:
        object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(
            f"{type(self).__name__} is bound once at construction; "
            f"build a new adapter instead of setting {name!r}"
        )

    def __repr__(self) -> str:
        present = ", ".join(c.value for c in self.capabilities) or "none"
        return (
            f"<{type(self).__name__} over {self.capabilities.cls_name} "
            f"(LMCache {self.lmcache_version or 'unknown'}; {present})>"
        )


def _warn_opaque(facts: ClassFacts, absent: Iterable[CapabilitySpec], strict: bool) -> None:
    """Say at construction when an absent capability's method exists but is a descriptor whose
    signature cannot be read without running it: the adapter will not call it."""
    import warnings

    for spec in absent:
        member = facts.surface.get(spec.method)
        if member is None or member.kind != "opaque":
            continue
        instead = (
            "calling it raises MissingCapabilityError (strict)"
            if strict
            else f"the adapter returns the fallback instead: {spec.fallback_result}"
        )
        warnings.warn(
            f"{facts.cls_name}.{spec.method} is a descriptor whose signature cannot be read "
            f"without running it (not a function, no __wrapped__), so lmcache-compat cannot "
            f"tell whether it is {spec.member}; {instead}. Define it as a plain method, or wrap "
            "it with functools.wraps so that its signature can be read",
            UnreadableMethodWarning,
            stacklevel=4,
        )


class UnreadableMethodWarning(UserWarning):
    """An engine method whose signature lmcache-compat cannot read: the adapter uses the
    capability's fallback (or, strict, raises) instead of calling it."""


def _property_getter(cls: type, name: str) -> Callable[[Any], Any]:
    for klass in cls.__mro__:
        raw = klass.__dict__.get(name)
        if raw is not None:
            getter = getattr(raw, "fget", None) or getattr(raw, "func", None)
            if getter is None:
                raise NotAnEngineError(f"{cls.__qualname__}.{name} is not a readable property")
            return cast(Callable[[Any], Any], getter)
    raise NotAnEngineError(f"{cls.__qualname__} has no property {name!r}")


_C = TypeVar("_C", bound="ConnectorAdapter")


class ConnectorMethods:
    """The connector engine's methods as lmcache-compat binds them (declarations only: shared by
    :class:`ConnectorAdapter` and :class:`lmcache_compat.vllm.decisions.PartialEngine`, so the
    connector binds from either the same way)."""

    __slots__ = ()

    # always present: the engine's own bound methods
    start_load_kv: Callable[..., None]
    wait_for_layer_load: Callable[[str], None]
    save_kv_layer: Callable[..., None]
    wait_for_save: Callable[[], None]
    get_num_new_matched_tokens: Callable[[Any, int], int | None]
    update_state_after_alloc: Callable[[Any, int], None]
    build_connector_meta: Callable[[Any], Any]
    # optional: the engine's method or the catalog's fallback
    get_finished: Callable[[set[str]], tuple[set[str] | None, set[str] | None]]
    request_finished: Callable[[Any, list[int]], tuple[bool, dict[str, Any] | None]]
    get_inference_info: Callable[[], dict[str, Any]]
    get_block_ids_with_load_errors: Callable[[], set[int]]
    shutdown: Callable[[], None]
    get_kv_events: Callable[[], list[Any]]
    register_kv_caches: Callable[[Any], None]


class ConnectorAdapter(BoundAdapter, ConnectorMethods):
    """Uniform adapter over an LMCache ``LMCacheConnectorV1Impl`` of any release (0.3.0 on).

    ``require``: capabilities that must be present, else :class:`MissingCapabilityError` here.
    ``strict``: absent optional methods raise :class:`MissingCapabilityError` when called
    instead of returning their documented fallback.

    The seven methods every release has (``start_load_kv``, ``wait_for_layer_load``,
    ``save_kv_layer``, ``wait_for_save``, ``get_num_new_matched_tokens``,
    ``update_state_after_alloc``, ``build_connector_meta``) are the engine's own bound methods.
    An object lacking one of them raises :class:`NotAnEngineError`. ``.engine`` is the wrapped
    engine.
    """

    __slots__ = (
        "build_connector_meta",
        "get_block_ids_with_load_errors",
        "get_finished",
        "get_inference_info",
        "get_kv_events",
        "get_num_new_matched_tokens",
        "register_kv_caches",
        "request_finished",
        "save_kv_layer",
        "shutdown",
        "start_load_kv",
        "update_state_after_alloc",
        "wait_for_layer_load",
        "wait_for_save",
    )
    _ROLE = CONNECTOR_IMPL

    def __new__(
        cls: type[_C],
        engine: object,
        *,
        require: Iterable[Capability | str] = (),
        strict: bool = False,
    ) -> _C:
        self, _, _ = cls._build(engine, require, strict)
        return self

    def __init__(
        self,
        engine: object,
        *,
        require: Iterable[Capability | str] = (),
        strict: bool = False,
    ) -> None:
        """Everything is decided and bound in ``__new__`` (which picks the class whose methods
        are the right fallbacks); there is nothing left to do here."""

    @property
    def engine(self) -> Any:
        """The wrapped ``LMCacheConnectorV1Impl``."""
        return self.target


ConnectorAdapter.__doc__ = (ConnectorAdapter.__doc__ or "") + fallback_table(CONNECTOR_IMPL)
