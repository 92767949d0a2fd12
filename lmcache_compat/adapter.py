"""``ConnectorAdapter``: one API over every release's ``LMCacheConnectorV1Impl``.

Decide once, call fast: the constructor probes the engine's class (cached per class) and binds
each adapter method to the engine's own bound method, to a thin result check around it, or to
the catalog's fallback. A call through the adapter does no ``getattr``, ``callable``, ``try`` or
version check; exceptions raised by the engine propagate unchanged.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any, NoReturn, cast

from lmcache_compat.catalog import (
    CATALOG,
    CONNECTOR_CORE_METHODS,
    CONNECTOR_IMPL,
    Capability,
    CapabilitySpec,
    spec_for,
)
from lmcache_compat.errors import (
    LMCacheCompatError,
    MalformedResultError,
    MissingCapabilityError,
    NotAnEngineError,
)
from lmcache_compat.probe import Capabilities, class_facts
from lmcache_compat.versions import installed_distribution_version

__all__ = ["ConnectorAdapter"]


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
_CHECKS: dict[Capability, Callable[[Callable[[], Any], str, str | None], Callable[..., Any]]] = {
    Capability.LOAD_ERROR_REPORTING: _check_block_ids,
    Capability.KV_EVENTS: _listed_events,
}


def first_release(spec: CapabilitySpec) -> str:
    """The release a ``pip install -U 'lmcache>=X'`` hint names: from the shipped release matrix
    (the first release from which on every release has it), else the catalog's ``since``."""
    from lmcache_compat.matrix import load_matrix

    try:
        return load_matrix().since(spec.capability) or spec.since
    except LMCacheCompatError:  # a broken data file must not mask the real error
        return spec.since


def _missing_error(
    spec: CapabilitySpec, cls_name: str, version: str | None
) -> MissingCapabilityError:
    return MissingCapabilityError(
        spec.capability.value,
        member=spec.member,
        cls_name=cls_name,
        installed=version,
        since=first_release(spec),
    )


def _raiser(spec: CapabilitySpec, cls_name: str, version: str | None) -> Callable[..., NoReturn]:
    error_args = (spec, cls_name, version)

    def missing(self: object, *args: object, **kwargs: object) -> NoReturn:
        raise _missing_error(*error_args)

    missing.__name__ = missing.__qualname__ = spec.method
    return missing


_ShapeKey = tuple[type, frozenset[str], bool, str, "str | None"]
_SHAPES: dict[_ShapeKey, type] = {}
_SHAPES_LOCK = threading.Lock()


def _shape_class(
    base: type[ConnectorAdapter],
    absent: tuple[CapabilitySpec, ...],
    strict: bool,
    cls_name: str,
    version: str | None,
) -> type[ConnectorAdapter]:
    """The (cached) subclass of ``base`` whose class-level methods are the fallbacks, or the
    strict-mode raisers, of the ``absent`` capabilities.

    Fallbacks live on the class, not the instance, so calling one costs exactly a plain method
    call; the engine's own methods are bound per instance into ``__slots__``.
    """
    key: _ShapeKey = (
        base,
        frozenset(spec.method for spec in absent),
        strict,
        cls_name if strict else "",
        version if strict else None,
    )
    shape = _SHAPES.get(key)
    if shape is not None:
        return shape
    namespace: dict[str, Any] = {"__slots__": (), "__module__": base.__module__}
    for spec in absent:
        namespace[spec.method] = _raiser(spec, cls_name, version) if strict else spec.fallback
    shape = type(base.__name__, (base,), namespace)
    shape.__qualname__ = base.__qualname__
    with _SHAPES_LOCK:
        return _SHAPES.setdefault(key, shape)


class ConnectorAdapter:
    """Uniform adapter over an LMCache ``LMCacheConnectorV1Impl`` of any release (0.3.0 on).

    ``require``: capabilities that must be present, else :class:`MissingCapabilityError` here.
    ``strict``: absent optional methods raise :class:`MissingCapabilityError` when called
    instead of returning their documented fallback:

    ============================== ===========================================================
    method                          fallback when the release lacks it
    ============================== ===========================================================
    get_finished(ids)               ``(None, None)``
    request_finished(req, blocks)   ``(False, None)``
    get_inference_info()            ``{}``
    get_block_ids_with_load_errors  ``set()`` (a new empty set per call)
    shutdown()                      no-op
    get_kv_events()                 ``[]`` (a new empty list per call)
    register_kv_caches(kv_caches)   no-op (the release reads KV caches from the forward context)
    ============================== ===========================================================

    The seven methods every release has (``start_load_kv``, ``wait_for_layer_load``,
    ``save_kv_layer``, ``wait_for_save``, ``get_num_new_matched_tokens``,
    ``update_state_after_alloc``, ``build_connector_meta``) are the engine's own bound methods.
    An object lacking one of them raises :class:`NotAnEngineError`.
    """

    __slots__ = (
        "build_connector_meta",
        "capabilities",
        "engine",
        "get_block_ids_with_load_errors",
        "get_finished",
        "get_inference_info",
        "get_kv_events",
        "get_num_new_matched_tokens",
        "lmcache_version",
        "register_kv_caches",
        "request_finished",
        "save_kv_layer",
        "shutdown",
        "start_load_kv",
        "strict",
        "update_state_after_alloc",
        "wait_for_layer_load",
        "wait_for_save",
    )

    engine: Any
    capabilities: Capabilities
    lmcache_version: str | None
    strict: bool
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

    def __new__(
        cls,
        engine: object,
        *,
        require: Iterable[Capability | str] = (),
        strict: bool = False,
    ) -> ConnectorAdapter:
        if isinstance(require, (str, Capability)):
            require = (require,)
        required = [spec_for(c) for c in require]  # unknown names fail before any work
        facts = class_facts(engine)
        version = installed_distribution_version("lmcache")
        missing_core = facts.missing_core(CONNECTOR_IMPL)
        caps = facts.capabilities_as(CONNECTOR_IMPL)
        if missing_core:
            raise NotAnEngineError(
                f"{facts.cls_name} is not an LMCache {CONNECTOR_IMPL}: it lacks "
                f"{', '.join(m + '()' for m in missing_core)}, which every LMCache release "
                "has (found by reading its class, never by calling). For a unittest.mock, pass "
                f"spec={CONNECTOR_IMPL} (or a fake class) so its methods are known."
            )
        for spec in required:
            if spec.capability not in caps:
                raise _missing_error(spec, facts.cls_name, version)

        optional = [s for s in CATALOG if s.owner == CONNECTOR_IMPL and s.fallback is not None]
        absent = tuple(s for s in optional if s.capability not in caps)
        shape = _shape_class(cls, absent, bool(strict), facts.cls_name, version)
        self = object.__new__(shape)
        bind = object.__setattr__
        bind(self, "engine", engine)
        bind(self, "capabilities", caps)
        bind(self, "lmcache_version", version)
        bind(self, "strict", bool(strict))
        for name in CONNECTOR_CORE_METHODS:
            bind(self, name, getattr(engine, name))
        for spec in optional:
            if spec.capability in caps:
                method: Callable[..., Any] = getattr(engine, spec.method)
                check = _CHECKS.get(spec.capability)
                bind(
                    self,
                    spec.method,
                    method if check is None else check(method, facts.cls_name, version),
                )
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

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(
            f"{type(self).__name__} is bound once at construction; "
            f"build a new adapter instead of setting {name!r}"
        )

    def __repr__(self) -> str:
        present = ", ".join(c.value for c in self.capabilities) or "none"
        return (
            f"<ConnectorAdapter over {self.capabilities.cls_name} "
            f"(LMCache {self.lmcache_version or 'unknown'}; {present})>"
        )
