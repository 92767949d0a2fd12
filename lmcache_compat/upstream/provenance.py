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

Known issues and version gates are cited the same way (:data:`ISSUE_SOURCES`,
:func:`argument_source`, :data:`SGLANG_GATES`): a gate a surface shows cites the release diff
where the surface changes and the name that diff must show (re-derived by
:func:`gate_evidence`); a gate no surface shows (a behaviour, a measurement, vLLM's side) says
so, and cites the upstream issue or pull request where one is known and the release range.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from lmcache_compat.core.roles import MP_WORKER

if TYPE_CHECKING:
    from lmcache_compat.core.arguments import Argument
    from lmcache_compat.core.catalog import Capability, CapabilitySpec
    from lmcache_compat.upstream.diff import Change, ChangeKind
    from lmcache_compat.upstream.known_issues import KnownIssue

__all__ = [
    "ARGUMENT_NAMES",
    "ISSUE_SOURCES",
    "SGLANG_GATES",
    "UPSTREAM",
    "Citation",
    "GateSource",
    "Move",
    "argument_source",
    "citation",
    "evidence",
    "gate_evidence",
    "issue_source",
    "moves",
]

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


# --- known issues and version gates ------------------------------------------------------------

_LMCACHE_ISSUES = "https://github.com/LMCache/LMCache/issues/"


@dataclass(frozen=True)
class GateSource:
    """Where a known issue or a version gate comes from.

    ``since`` and ``names``: the LMCache release whose diff from the release before it (in the
    shipped matrix) shows the gate, and the method, parameter or class that diff must name.
    ``capability``: the gate is a catalog row's (cited by :func:`citation`). ``invisible``: no
    scanned surface shows it (a behaviour, a measurement, vLLM's side); then ``range`` and
    ``upstream`` are the citation, and a row with neither of the others must have them.
    """

    since: str | None = None
    names: str | None = None
    #: What the diff must show happen to ``names``: it appears (a class, method or parameter
    #: added, or a parameter renamed to it), becomes required, or is removed.
    change: Literal["added", "required", "removed"] = "added"
    capability: str | None = None
    upstream: tuple[str, ...] = ()
    invisible: str = ""
    range: str = ""

    def previous(self) -> str | None:
        """The release before ``since`` in the shipped matrix."""
        from lmcache_compat.upstream.matrix import load_matrix

        if self.since is None:
            return None
        versions = load_matrix().versions
        at = versions.index(self.since)  # a since outside the matrix is a defect: ValueError
        return versions[at - 1] if at > 0 else None

    def __str__(self) -> str:
        parts = []
        if self.capability is not None:
            parts.append(f"the catalog row {self.capability} ({_capability_citation(self)})")
        if self.since is not None:
            parts.append(f"`diff {self.previous()} {self.since}` ({self.names})")
        if self.invisible:
            parts.append(f"not in any surface: {self.invisible}; releases {self.range}")
        return "; ".join((*parts, *self.upstream))


def _capability_citation(source: GateSource) -> str:
    from lmcache_compat.core.catalog import Capability

    return str(citation(Capability(source.capability)))


#: Known issue (``KnownIssue.key``) -> where it comes from. A row whose LMCache range is a
#: capability's (``Lacks``) cites that catalog row; ``since`` is the lower bound of its LMCache
#: range. vLLM's side of a range is never in LMCache's surfaces: it is cited as ``invisible``.
ISSUE_SOURCES: dict[str, GateSource] = {
    "offload-server-close-race": GateSource(
        invisible="a thread race in ZMQOffloadServer.close() (zmq_server.py, a class the matrix "
        "does not scan), read from the sources of every release and measured by the serve tier "
        "(tests/tiers/serve) on 0.4.6, 0.5.6 and 0.5.7rc2; no upstream issue known",
        range=">=0.3.6 (the offload server's first release)",
    ),
    "unguarded-get-finished": GateSource(capability="get_finished"),
    "unguarded-get-kv-events": GateSource(
        capability="kv_events",
        invisible="vLLM's side: its connector calls get_kv_events() unguarded from 0.13.0 "
        "(vLLM's sources)",
        range="vLLM >=0.13.0",
    ),
    "vllm-no-load-failure-path": GateSource(
        invisible="vLLM's side only: KVConnectorOutput.invalid_block_ids, first in vLLM 0.11.2 "
        "(vLLM's sources; verified by the grid tiers)",
        range="vLLM <=0.11.1, every LMCache",
    ),
    "no-load-error-reporting": GateSource(
        capability="load_error_reporting",
        invisible="vLLM's side: KVConnectorOutput.invalid_block_ids, the path a load error "
        "takes, first in vLLM 0.11.2 (vLLM's sources)",
        range="vLLM >=0.11.2",
    ),
    "mp-server-url-misbinding": GateSource(
        capability="mp_multi_server",  # server_url -> server_urls: list[str] in 0.5.0
        invisible="vLLM's side: its MP connector passes server_url positionally in 0.14.1 ... "
        "0.19.1 (vLLM's sources)",
        range="vLLM >=0.14.1,<=0.19.1",
    ),
    "mp-use-mla-removed": GateSource(
        since="0.4.7",
        names="actual_world_size",
        change="removed",
        invisible="vLLM's side: its MP connector builds ParallelStrategy positionally and reads "
        "use_mla in 0.20.2 ... 0.21.0 (vLLM's sources)",
        range="vLLM >=0.20.2,<=0.21.0",
    ),
    "mp-failed-retrieve-reported-loaded": GateSource(
        since="0.3.13",
        names=MP_WORKER.name,
        upstream=(f"{_LMCACHE_ISSUES}2865", f"{_LMCACHE_ISSUES}3388"),
        invisible="the fix is behaviour (retrieve results kept and reported), not a signature; "
        "the lower bound is the MP adapters' first release",
        range=">=0.3.13,<=0.5.4 (fixed in 0.5.5)",
    ),
    "native-copy-range": GateSource(
        invisible="vLLM's vendored LMCache integration imports names of LMCache modules the "
        "matrix does not scan (vLLM's sources)",
        range="importable with LMCache 0.3.9 ... 0.3.12 only",
    ),
    "shutdown-not-forwarded": GateSource(capability="shutdown"),
}

#: Argument rows whose gate keyword differs from the name callers use (``ARG.pinned_lookup``:
#: callers pass ``lookup_id``; 0.3.3 took the first pinned lookup as ``request_id``).
ARGUMENT_NAMES: dict[str, str] = {"pinned_lookup": "request_id"}
#: Argument rows whose gate is a parameter becoming required, not appearing.
ARGUMENT_CHANGES: dict[str, Literal["added", "required", "removed"]] = {
    "broadcast_required": "required"
}


def argument_source(row: Argument) -> GateSource:
    """The citation of one row of the argument table: its capability's, or (a ``first=`` row)
    the diff into its first release, which must name the argument."""
    if row.capability is not None:
        return GateSource(capability=row.capability.value)
    return GateSource(
        since=row.first,
        names=ARGUMENT_NAMES.get(row.key, row.argument),
        change=ARGUMENT_CHANGES.get(row.key, "added"),
    )


def issue_source(row: KnownIssue) -> GateSource:
    """The citation of one known issue (``KeyError``: a row without one)."""
    return ISSUE_SOURCES[row.key]


#: The version gates of the SGLang side (a module constant or a variant's ``verified`` range)
#: -> where it comes from. None of them is in a scanned surface: the tiers measured them.
SGLANG_GATES: dict[str, GateSource] = {
    "SINGLE_RANK_SHORTCUT": GateSource(
        invisible="0.3.9.post1 skips the tp_group reduction when tp_size == 1, a change no "
        "signature shows (the layerwise connector's sources); LMCache#1589 is the tp_group issue",
        upstream=(f"{_LMCACHE_ISSUES}1589",),
        range=">=0.3.9.post1",
    ),
    "CPU_IN_PROCESS_FROM": GateSource(
        invisible="the in-process SGLang connector runs without CUDA from 0.4.6 (0.3.7 ... 0.4.4 "
        "call .cuda() in store_kv, 0.4.5 torch_dev.set_device): measured by the sglang tier "
        "(tests/tiers/sglang) on CPU",
        range=">=0.4.6",
    ),
    "verified": GateSource(
        invisible="each Variant.verified range is what the sglang tier (tests/tiers/sglang) "
        "round-trips on CPU for the variant's tested_on release: in-process from "
        "CPU_IN_PROCESS_FROM; MP and unified-MP on 0.5.6, the release whose CPU server takes "
        "the connector's tensors; in-process before 0.5.7rc2, which the tier does not run",
        range="each variant's own verified rows (the Variant table of the SGLang side)",
    ),
}


def gate_evidence(source: GateSource) -> list[str]:
    """The lines of the cited release diff that name the gate, re-derived from the shipped
    rows (a class added, a method or parameter changed); empty when it names nothing (the
    citation is wrong), or when the source cites no release diff."""
    from lmcache_compat.upstream.diff import ReleaseView, diff_releases
    from lmcache_compat.upstream.matrix import load_matrix

    previous = source.previous()
    if previous is None or source.since is None or source.names is None:
        return []
    matrix = load_matrix()
    diff = diff_releases(
        ReleaseView.from_row(matrix.row(previous)), ReleaseView.from_row(matrix.row(source.since))
    )
    name = source.names
    kinds = _kinds()[source.change]
    return [
        f"{c.cls}: {c.describe()}"
        for c in diff.changes
        if c.cls is not None and c.kind in kinds and name == _subject(c)
    ]


def _subject(change: Change) -> str | None:
    """What a change is about: the class added or removed, the name a parameter is renamed to,
    else the parameter, else the method."""
    from lmcache_compat.upstream.diff import ChangeKind as K

    if change.kind in (K.CLASS_ADDED, K.CLASS_REMOVED):
        return change.cls
    if change.kind is K.PARAMETER_RENAMED:
        return change.after
    return change.parameter if change.parameter is not None else change.member


def _kinds() -> dict[str, frozenset[ChangeKind]]:
    from lmcache_compat.upstream.diff import ChangeKind as K

    return {
        "added": frozenset(
            (
                K.CLASS_ADDED,
                K.METHOD_ADDED,
                K.PARAMETER_ADDED,
                K.PARAMETER_ADDED_REQUIRED,
                K.PARAMETER_RENAMED,
            )
        ),
        "required": frozenset((K.PARAMETER_BECAME_REQUIRED, K.PARAMETER_ADDED_REQUIRED)),
        "removed": frozenset((K.CLASS_REMOVED, K.METHOD_REMOVED, K.PARAMETER_REMOVED)),
    }
