"""A shipped row's capabilities, derived from what the row stores of the release's files.

A row of the release matrix (``data/releases/<version>.json``) keeps what the static scanner
read: each class's methods (``surfaces``), their defaults, annotations and return annotations
(``details``) and its properties. It stores no capability: each one is decided from those facts
by the catalog's one rule (:func:`lmcache_compat.core.surface.release_has`), the rule a scan of
the files and a live probe use, so a new catalog row needs no re-scan of any artifact.

Deciding is lazy: :class:`StoredClasses` rebuilds a member's
:class:`~lmcache_compat.core.signatures.MethodFacts` only when a rule asks for it, so one
capability of every release (``ReleaseMatrix.since``, as ``doctor`` asks it) reads one member
per release, and a release's whole set is built only when it is asked for (cached by its
:class:`~lmcache_compat.upstream.matrix.ReleaseRow`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from lmcache_compat.core.signatures import MethodFacts, from_json
from lmcache_compat.core.surface import release_capabilities, release_has

if TYPE_CHECKING:
    from lmcache_compat.core.catalog import CapabilitySpec

__all__ = ["StoredClasses", "StoredSurface", "stored_capabilities"]


class StoredSurface(Mapping[str, MethodFacts]):
    """One class of a row as a surface: its methods and properties, each member's facts
    rebuilt on first access (from ``surfaces``/``details``; a property never evaluated)."""

    __slots__ = ("_cache", "_details", "_methods", "_properties")

    def __init__(
        self,
        methods: Mapping[str, list[str]],
        details: Mapping[str, Mapping[str, Any]],
        properties: Iterable[str],
    ) -> None:
        self._methods = methods
        self._details = details
        self._properties = frozenset(properties)
        self._cache: dict[str, MethodFacts] = {}

    def __getitem__(self, name: str) -> MethodFacts:
        facts = self._cache.get(name)
        if facts is None:
            if name in self._properties:  # as ReleaseRow.facts: a property wins over a method
                facts = MethodFacts(None, kind="property")
            else:
                facts = from_json(self._methods[name], self._details.get(name))
            self._cache[name] = facts
        return facts

    def __iter__(self) -> Iterator[str]:
        yield from self._methods
        yield from (p for p in sorted(self._properties) if p not in self._methods)

    def __len__(self) -> int:
        return len(self._methods.keys() | self._properties)

    def __contains__(self, name: object) -> bool:
        return name in self._methods or name in self._properties


class StoredClasses(Mapping[str, StoredSurface]):
    """A row's classes (those it has a surface of) by upstream name, each a
    :class:`StoredSurface` built on first access."""

    __slots__ = ("_cache", "_details", "_properties", "_surfaces")

    def __init__(
        self,
        surfaces: Mapping[str, Mapping[str, list[str]]],
        details: Mapping[str, Mapping[str, Mapping[str, Any]]],
        properties: Mapping[str, Iterable[str]],
    ) -> None:
        self._surfaces = surfaces
        self._details = details
        self._properties = properties
        self._cache: dict[str, StoredSurface] = {}

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> StoredClasses:
        """The classes of a row as its file (or ``scan --json``) holds it."""
        return cls(row["surfaces"], row.get("details", {}), row.get("properties", {}))

    def __getitem__(self, name: str) -> StoredSurface:
        surface = self._cache.get(name)
        if surface is None:
            surface = StoredSurface(
                self._surfaces[name], self._details.get(name, {}), self._properties.get(name, ())
            )
            self._cache[name] = surface
        return surface

    def __iter__(self) -> Iterator[str]:
        return iter(self._surfaces)

    def __len__(self) -> int:
        return len(self._surfaces)

    def __contains__(self, name: object) -> bool:
        return name in self._surfaces

    def has(self, spec: CapabilitySpec) -> bool:
        """Whether the row carries one capability (reads only that capability's members)."""
        return release_has(spec, self)


def stored_capabilities(row: Mapping[str, Any]) -> dict[str, bool]:
    """Every catalog capability -> whether the row (as its file holds it) carries it."""
    return release_capabilities(StoredClasses.of(row))
