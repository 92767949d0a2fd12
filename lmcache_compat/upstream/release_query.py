"""Which LMCache releases a SPEC names, and the distinct surfaces of a role: the query over the
shipped release matrix that ``lmcache-compat releases`` prints and the test kit's
``--lmcache-release`` option reads (:mod:`lmcache_compat.testing.pytest_plugin`), below the
command line.

:func:`select` reads a release SPEC (``all``, a version, a PEP 440 specifier set such as
``>=0.3.9.post1,<0.5``, ``distinct`` or ``distinct:ROLE``) against the shipped release matrix.
:func:`distinct` is the smallest set of releases covering every distinct surface of a role: one
release per run of identical surfaces, each with what changed at it. A class's surface is its
module (a move is a change a connector must survive), members, parameter names, kinds and
defaults, annotations and return annotations, and properties: everything the matrix records.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypedDict

from lmcache_compat.errors import LMCacheVersionError, NotInMatrixError

if TYPE_CHECKING:
    from lmcache_compat.upstream.matrix import ReleaseMatrix, ReleaseRow

__all__ = ["Distinct", "DistinctJSON", "RoleName", "distinct", "select"]

RoleName = Literal["connector", "mp", "engine"]


def _role_classes() -> dict[str, tuple[str, ...]]:
    """Role -> the classes whose surfaces a connector of that role depends on."""
    from lmcache_compat.core import roles  # lazy: start-up time of the command line
    from lmcache_compat.upstream import locations as loc  # lazy: start-up time

    return {
        "connector": (roles.CONNECTOR.name,),
        "mp": (
            roles.MP_SCHEDULER.name,
            roles.MP_WORKER.name,
            loc.LOAD_STORE_OP.name,
            loc.PARALLEL_STRATEGY.name,
        ),
        "engine": (roles.ENGINE.name, loc.ENGINE_BUILDER.name),
    }


@dataclass(frozen=True, slots=True)
class Distinct:
    """A release that starts a run of identical surfaces, and what changed at it."""

    version: str
    changes: tuple[str, ...]


class DistinctJSON(TypedDict):
    version: str
    changes: list[str]


def _matrix() -> ReleaseMatrix:
    from lmcache_compat.upstream.matrix import load_matrix  # lazy: start-up time

    return load_matrix()


def select(spec: str = "all") -> list[str]:
    """The shipped releases ``spec`` names, oldest first (``installed`` is not a list of
    releases: the pytest plugin handles it). A version the data does not know raises
    :class:`NotInMatrixError` naming the closest known releases; a specifier set matching
    nothing raises it too; text that is none of these raises :class:`LMCacheVersionError`."""
    from lmcache_compat.inputs import check_version_text  # lazy: start-up time
    from lmcache_compat.versions import parse_specifier  # lazy: start-up time

    matrix = _matrix()
    spec = spec.strip()
    if spec == "all":
        return list(matrix.versions)
    if spec == "distinct" or spec.startswith("distinct:"):
        role = spec.partition(":")[2] or "connector"
        return [d.version for d in distinct(role)]
    if spec[:1].isdigit() or spec[:1] in "vV":
        return [matrix.known_row(spec).version]
    check_version_text(spec, "a release SPEC", LMCacheVersionError)
    try:
        wanted = parse_specifier(spec)
    except LMCacheVersionError:
        raise LMCacheVersionError(
            f"{spec!r} is not a release SPEC (all, a version, a PEP 440 specifier set such "
            f"as '>={matrix.versions[0]},<{matrix.newest.version}', distinct or "
            f"distinct:{'|'.join(_role_classes())})"
        ) from None
    found = [v for v in matrix.versions if wanted.contains(v)]
    if not found:
        raise NotInMatrixError(
            f"no shipped LMCache release matches {spec!r} "
            f"(known: {matrix.versions[0]} ... {matrix.versions[-1]})"
        )
    return found


def _surface(row: ReleaseRow, cls: str) -> dict[str, Any] | None:
    if cls not in row.surfaces:
        return None
    details = row.details.get(cls, {})
    return {
        "module": row.modules.get(cls),
        "members": {
            name: {"params": list(params), **details.get(name, {})}
            for name, params in row.surfaces[cls].items()
        },
        "properties": sorted(row.properties.get(cls, ())),
    }


def _changes(cls: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> list[str]:
    if old is None and new is None:
        return []
    if old is None:
        return [f"{cls} added"]
    if new is None:
        return [f"{cls} removed"]
    out = []
    if old["module"] != new["module"]:
        out.append(f"{cls} moved from {old['module']} to {new['module']}")
    before, after = old["members"], new["members"]
    out += [f"{cls}.{m} added" for m in after if m not in before]
    out += [f"{cls}.{m} removed" for m in before if m not in after]
    for m in after:
        if m in before and before[m] != after[m]:
            keys = sorted(k for k in {*before[m], *after[m]} if before[m].get(k) != after[m].get(k))
            out.append(f"{cls}.{m} changed ({', '.join(keys)})")
    props = set(new["properties"]) ^ set(old["properties"])
    out += [
        f"{cls}.{p} property {'added' if p in new['properties'] else 'removed'}"
        for p in sorted(props)
    ]
    return out


def distinct(role: str = "connector", versions: Sequence[str] | None = None) -> list[Distinct]:
    """The releases (of ``versions``, default every shipped one) that start a run of identical
    surfaces of ``role``'s classes, each with what changed at it (the first: ``first``). A
    release without any of the role's classes is left out."""
    classes = _role_classes().get(role)
    if classes is None:
        raise LMCacheVersionError(f"unknown role {role!r} (one of: {', '.join(_role_classes())})")
    matrix = _matrix()
    rows = matrix.rows if versions is None else [matrix.row(v) for v in versions]
    out: list[Distinct] = []
    previous: dict[str, dict[str, Any] | None] | None = None
    for row in rows:
        current = {cls: _surface(row, cls) for cls in classes}
        if all(s is None for s in current.values()):
            continue
        if previous is None:
            out.append(Distinct(row.version, ("first",)))
        elif current != previous:
            changes = [c for cls in classes for c in _changes(cls, previous[cls], current[cls])]
            out.append(Distinct(row.version, tuple(changes)))
        previous = current
    return out
