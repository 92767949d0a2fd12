"""The one rule that turns a class's surface into capabilities.

A *surface* maps member names to :class:`~lmcache_compat.core.signatures.MethodFacts`. The live
probe (:mod:`lmcache_compat.core.probes`) builds one from a class's ``__dict__`` entries, the
static scanner (:mod:`lmcache_compat.upstream.scanner`) from ``ast`` without importing anything;
both then ask :func:`satisfies`, so a release's capabilities mean the same thing whichever way
they were found.
"""

from __future__ import annotations

from collections.abc import Mapping

from lmcache_compat.core.annotations import admits_none
from lmcache_compat.core.catalog import CATALOG, Capability, CapabilitySpec
from lmcache_compat.core.roles import Role
from lmcache_compat.core.signatures import MethodFacts, render_params

__all__ = [
    "class_capabilities",
    "missing_core",
    "release_capabilities",
    "release_has",
    "render_surface",
    "satisfies",
    "undecided",
]

Surface = Mapping[str, MethodFacts]


def render_surface(surface: Surface) -> dict[str, list[str]]:
    """A class's methods (not properties) as ``surfaces`` JSON renders them, sorted by name."""
    return {
        name: render_params(facts)
        for name, facts in sorted(surface.items())
        if facts.kind == "method"
    }


def _decide(spec: CapabilitySpec, facts: MethodFacts | None) -> bool | None:
    """``True``/``False``, or ``None`` when the member's facts cannot be classified."""
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
    if facts.call_shape(spec.params) is None:
        return False
    return not spec.returns_none or admits_none(facts.returns)


def satisfies(spec: CapabilitySpec, facts: MethodFacts | None) -> bool:
    """Whether one member's facts carry one catalog capability (for a ``class`` row: whether
    the class exists at all, which the caller decides).

    A method carries a capability only if a call of the catalog's shape binds to its signature
    (a parameter turning keyword-only still binds by keyword; ``**kwargs`` never counts for a
    keyword); an ``async def`` never carries one (every catalog method is called
    synchronously). Facts a rule cannot classify do not carry it (:func:`undecided` says so).
    """
    return _decide(spec, facts) is True


def undecided(classes: Mapping[str, Surface]) -> dict[str, str]:
    """Capability -> why it could not be decided from these surfaces (a member whose
    annotation no rule can classify), for the capabilities reported absent for that reason."""
    out: dict[str, str] = {}
    for row in CATALOG:
        for owner in row.owners:
            surface = classes.get(owner.name)
            if surface is None or row.kind == "class":
                continue
            facts = surface.get(row.method)
            if facts is not None and _decide(row, facts) is None:
                out[row.capability.value] = (
                    f"{owner.name}.{row.method}: its token parameter's annotation is none of "
                    "the forms lmcache-compat knows"
                )
    return out


def missing_core(role: Role, surface: Surface) -> tuple[str, ...]:
    """The methods every release of ``role`` has that this surface lacks (absent, or not a
    synchronous method). How each is called is the adapters' decision, from its signature."""
    return tuple(
        name
        for name, _ in role.core
        if (facts := surface.get(name)) is None or facts.kind != "method" or facts.is_async
    )


def class_capabilities(role: Role | None, surface: Surface) -> frozenset[Capability]:
    """The capabilities a class playing ``role`` carries."""
    if role is None:
        return frozenset()
    return frozenset(
        row.capability
        for row in CATALOG
        if role in row.owners and (row.kind == "class" or satisfies(row, surface.get(row.method)))
    )


def release_has(spec: CapabilitySpec, classes: Mapping[str, Surface]) -> bool:
    """Whether a release whose classes (by upstream name) have these surfaces carries one
    catalog capability: every owner class exists and carries it. The one rule a scan, a shipped
    row and a live probe share (a row asks it per capability, reading only that member)."""
    return all(
        owner.name in classes
        and (spec.kind == "class" or satisfies(spec, classes[owner.name].get(spec.method)))
        for owner in spec.owners
    )


def release_capabilities(classes: Mapping[str, Surface]) -> dict[str, bool]:
    """Every catalog capability -> whether a release whose classes (by upstream name) have
    these surfaces carries it (:func:`release_has`), in the catalog's order."""
    return {row.capability.value: release_has(row, classes) for row in CATALOG}
