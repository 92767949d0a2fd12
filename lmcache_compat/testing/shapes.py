"""The one rule a fake method's result follows: the *empty value* of its return annotation.

A fake answers at once, as an engine that is healthy and holds nothing:

* no annotation, ``None``, or a type the rule does not know (a class such as
  ``KVConnectorMetadata``, ``torch.Tensor``): ``None``;
* ``int`` / ``float`` / ``complex``: zero; ``str``: ``""``; ``bytes``: ``b""``; ``bool``:
  ``False``;
* ``set``/``frozenset``/``AbstractSet``: ``set()``; ``dict``/``Mapping``...: ``{}``; ``list``
  and the other sequences and iterables (``Iterable``, ``Iterator``, ``Sequence``,
  ``Generator``): ``[]``;
* ``tuple[A, B]``: ``(empty(A), empty(B))``; ``tuple`` / ``tuple[A, ...]``: ``()``;
* ``Optional[X]`` / ``X | None``: the empty value of ``X`` (a fake answers, it does not defer);
  of several alternatives the first in normalised (sorted) order counts.

The annotation is parsed by :mod:`lmcache_compat.core.annotations` (the one annotation model),
so every spelling of one type gives one result, and a method new in a release needs no code.
The one exception, read from the catalog rather than from a name: a member that carries a
health capability answers "healthy" (see :mod:`lmcache_compat.testing.fakes`).
"""

from __future__ import annotations

from typing import Any

from lmcache_compat.core.annotations import Annotation, Type, parse

__all__ = ["empty_value"]

#: Normalised head -> a factory of its empty value (fresh per call: results are mutable).
_EMPTY: dict[str, Any] = {
    "int": int,
    "float": float,
    "complex": complex,
    "str": str,
    "bytes": bytes,
    "bool": bool,
    "set": set,
    "frozenset": set,
    "AbstractSet": set,
    "MutableSet": set,
    "dict": dict,
    "Mapping": dict,
    "MutableMapping": dict,
    "defaultdict": dict,
    "OrderedDict": dict,
    "list": list,
    "deque": list,
    "Sequence": list,
    "MutableSequence": list,
    "Iterable": list,
    "Iterator": list,
    "Collection": list,
    "Generator": list,
    "AsyncIterator": list,
    "AsyncIterable": list,
}


def empty_value(annotation: str | None) -> Any:
    """The result of a fake member whose return annotation is ``annotation`` (source text)."""
    return _of(parse(annotation)) if annotation else None


def _of(annotation: Annotation | None, depth: int = 0) -> Any:
    if annotation is None or depth > 8:
        return None
    alternatives = annotation.without_none()
    return _type(alternatives[0], depth) if alternatives else None


def _type(t: Type, depth: int) -> Any:
    if t.head == "tuple":
        if not t.args or any(a.text() == "..." for a in t.args):
            return ()
        return tuple(_of(a, depth + 1) for a in t.args)
    factory = _EMPTY.get(t.head)
    return None if factory is None else factory()
