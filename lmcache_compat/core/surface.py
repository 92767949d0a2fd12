"""The one rule that turns a class's surface into capabilities.

A *surface* maps member names to :class:`~lmcache_compat.core.signatures.MethodFacts`. The live
probe
(:mod:`lmcache_compat.core.probes`) builds one from a class's ``__dict__`` entries, the static
scanner
(:mod:`lmcache_compat.scan.scanner`) from ``ast`` without importing anything; both then ask
:func:`satisfies`, so a release's capabilities mean the same thing whichever way they were found.
"""

from __future__ import annotations

from collections.abc import Mapping

from lmcache_compat.core.catalog import CATALOG, ROLE_CORE_METHODS, Capability, CapabilitySpec
from lmcache_compat.core.signatures import MethodFacts, annotation_admits_none, render_params

__all__ = [
    "class_capabilities",
    "missing_core",
    "release_capabilities",
    "render_surface",
    "satisfies",
]


def render_surface(surface: Mapping[str, MethodFacts]) -> dict[str, list[str]]:
    """A class's methods (not properties) as ``surfaces`` JSON renders them, sorted by name."""
    return {
        name: render_params(facts)
        for name, facts in sorted(surface.items())
        if facts.kind == "method"
    }


def satisfies(spec: CapabilitySpec, facts: MethodFacts | None) -> bool:
    """Whether one member's facts carry one catalog capability (for a ``class`` row: whether
    the class exists at all, which the caller decides).

    A method carries a capability only if a call of the catalog's shape binds to its signature;
    an ``async def`` never carries one (every catalog method is called synchronously, and a
    coroutine that is never awaited does nothing).
    """
    if facts is None:
        return False
    if spec.kind == "property":
        return facts.kind == "property"
    if facts.kind != "method" or facts.is_async:
        return False
    if spec.rule is not None:
        return spec.rule(facts)
    if spec.keyword is not None:  # "takes this keyword": other parameters vary by release
        return facts.accepts_keyword(spec.keyword)
    if not facts.binds(len(spec.params)):
        return False
    return not spec.returns_none or annotation_admits_none(facts.returns)


def missing_core(role: str, surface: Mapping[str, MethodFacts]) -> tuple[str, ...]:
    """The methods every release of ``role`` has that this surface lacks (or cannot call)."""
    out = []
    for name, params in ROLE_CORE_METHODS[role].items():
        facts = surface.get(name)
        if facts is None or facts.kind != "method" or not facts.binds(len(params)):
            out.append(name)
    return tuple(out)


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
