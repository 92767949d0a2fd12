"""Where each catalog row's ``since`` comes from: the release diff that shows the change.

The same holds for the class moves that ``upstream/locations.py`` knows (:func:`moves`): each is
cited by the diff of the two releases where the shipped rows' module for the class changes.

The citation of a row is derived, not written down: the release just before the row's ``since``
in the shipped matrix, and ``lmcache-compat diff <previous> <since>``, whose changes name the
row's method (or keyword, or property) and the capability it adds. :func:`evidence` re-derives
that diff from the shipped rows, so a wrong ``since`` shows as a citation that names nothing
(``tests/upstream/test_provenance.py`` checks every row).

What cannot be derived is written once, in :data:`UPSTREAM`: the upstream pull request or
issue that made the change, where the trackers show one. LMCache's history after October 2024
is not reachable from here, so the release diff is the citation that always exists.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lmcache_compat.core.catalog import Capability, CapabilitySpec

__all__ = ["UPSTREAM", "Citation", "Move", "citation", "evidence", "moves"]

#: capability value -> the upstream changes that introduced it (only what a tracker shows).
UPSTREAM: dict[str, tuple[str, ...]] = {
    # "[core]add error handling in kv loading" (merged 2025-10): the connector's
    # get_block_ids_with_load_errors; vLLM's LMCacheConnectorV1 forwards it from vllm#27978
    "load_error_reporting": (
        "https://github.com/LMCache/LMCache/pull/1835",
        "https://github.com/vllm-project/vllm/pull/27978",
    ),
}


@dataclass(frozen=True)
class Citation:
    """The release diff that shows a capability appear, and its upstream change if known."""

    capability: str
    previous: str | None  # None: ``since`` is the first release in the matrix
    since: str
    upstream: tuple[str, ...] = ()

    @property
    def command(self) -> str | None:
        """The command that shows the change (``None`` for the matrix's first release)."""
        if self.previous is None:
            return None
        return f"lmcache-compat diff {self.previous} {self.since}"

    def __str__(self) -> str:
        shown = (
            f"`diff {self.previous} {self.since}`"
            if self.previous is not None
            else f"present in the matrix's first release ({self.since})"
        )
        return ", ".join((shown, *self.upstream))


def citation(capability: Capability | CapabilitySpec) -> Citation:
    """The citation of one catalog row, derived from its ``since`` and the shipped matrix."""
    from lmcache_compat.core.catalog import Capability
    from lmcache_compat.upstream.matrix import load_matrix

    spec = capability.spec if isinstance(capability, Capability) else capability
    versions = load_matrix().versions
    at = versions.index(spec.since)  # a since outside the matrix is a defect: ValueError
    previous = versions[at - 1] if at > 0 else None
    name = spec.capability.value
    return Citation(name, previous, spec.since, UPSTREAM.get(name, ()))


def evidence(capability: Capability | CapabilitySpec) -> list[str]:
    """The lines of the row's release diff that name it, re-derived from the shipped rows:
    ``capability added: X`` and the change of its member (method, keyword or property). Empty
    when the cited diff does not show the row: the citation (or ``since``) is wrong."""
    from lmcache_compat.core.catalog import Capability
    from lmcache_compat.upstream.diff import ChangeKind, ReleaseView, diff_releases
    from lmcache_compat.upstream.matrix import load_matrix

    spec = capability.spec if isinstance(capability, Capability) else capability
    cited = citation(spec)
    if cited.previous is None:
        return []
    matrix = load_matrix()
    old, new = matrix.row(cited.previous), matrix.row(cited.since)
    diff = diff_releases(ReleaseView.from_row(old), ReleaseView.from_row(new))
    added = [
        f"capability added: {c.member}"
        for c in diff.of_kind(ChangeKind.CAPABILITY_ADDED)
        if c.member == cited.capability
    ]
    member = spec.keyword or spec.method
    named = [
        f"{c.cls}: {c.describe()}"
        for c in diff.changes
        if c.cls is not None
        and (
            member in (c.member, c.parameter)
            or (c.kind is ChangeKind.PARAMETER_RENAMED and c.after == member)
        )
    ]
    if not named and spec.kind == "property":
        # the diff compares methods and parameters; a property that appears is read from the
        # two rows' classes directly
        owners = {spec.owner.name, *(role.name for role in spec.also)}
        before, after = old.classes(), new.classes()
        named = [
            f"{cls}: property added: {member}"
            for cls in sorted(owners)
            if member in after.get(cls, {}) and member not in before.get(cls, {})
        ]
    return [*added, *named] if added and named else []


@dataclass(frozen=True)
class Move:
    """A scanned class whose module changed between two neighbouring releases of the matrix."""

    cls: str
    previous: str
    since: str
    before: str
    after: str

    def __str__(self) -> str:
        return f"{self.cls}: {self.before} -> {self.after} (`diff {self.previous} {self.since}`)"


def moves() -> list[Move]:
    """Every module change of a scanned class, read from the shipped rows (neighbouring
    releases in the matrix's order), for the classes ``upstream/locations.py`` scans."""
    from lmcache_compat.upstream.locations import LMCACHE_SCANNED
    from lmcache_compat.upstream.matrix import load_matrix

    matrix = load_matrix()
    versions = matrix.versions
    found = []
    for place in LMCACHE_SCANNED:
        seen = [(v, matrix.row(v).modules.get(place.name)) for v in versions]
        for (old, before), (new, after) in itertools.pairwise(seen):
            if before is not None and after is not None and before != after:
                found.append(Move(place.name, old, new, before, after))
    return found
