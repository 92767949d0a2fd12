"""Signature probes, cached per function (never per bound method or instance).

The version-specific implementations ask "does this release's method take ``cache_salt``?" of
the function itself: ``signature_facts(Adapter.maybe_submit_lookup_request)`` and
``signature_facts(adapter.maybe_submit_lookup_request)`` share one cache entry (the bound
method's ``__func__``), computed once per process. Reading a signature runs no engine code.
"""

from __future__ import annotations

import sys
import threading
import weakref
from typing import Any

from lmcache_compat.surface import MethodFacts

__all__ = ["field_annotation", "init_facts", "signature_facts"]

_CACHE: weakref.WeakKeyDictionary[Any, MethodFacts] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def _function_of(func: Any) -> Any:
    return getattr(func, "__func__", func)  # a bound method's function (a C method stays)


def signature_facts(func: Any) -> MethodFacts:
    """:class:`MethodFacts` of a function (or bound method: its function), without ``self``."""
    from lmcache_compat.probe import method_facts

    key = _function_of(func)
    try:
        cached = _CACHE.get(key)
    except TypeError:  # not weak-referenceable: compute each time
        return method_facts(key) or MethodFacts(None)
    if cached is not None:
        return cached
    facts = method_facts(key) or MethodFacts(None)
    with _LOCK:
        _CACHE[key] = facts
    return facts


def init_facts(cls: type) -> MethodFacts:
    """Constructor parameters of ``cls`` (its ``__init__`` function, dataclass-generated ones
    included), read from the class ``__dict__`` along the MRO."""
    for klass in cls.__mro__:
        raw = klass.__dict__.get("__init__")
        if raw is not None:
            if klass is object:
                return MethodFacts(())
            return signature_facts(raw)
    return MethodFacts(())


def field_annotation(cls: type, name: str) -> str | None:
    """The source text of a (dataclass) field's annotation, without evaluating it."""
    for klass in cls.__mro__:
        if sys.version_info >= (3, 14):  # pragma: no cover - lazy annotations (PEP 649)
            import annotationlib

            annotations = annotationlib.get_annotations(klass, format=annotationlib.Format.STRING)
        else:
            annotations = klass.__dict__.get("__annotations__", {})  # noqa: RUF063 - no eval
        if name in annotations:
            ann = annotations[name]
            if isinstance(ann, str):
                return ann
            import inspect

            return inspect.formatannotation(ann)
    return None
