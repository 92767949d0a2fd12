"""``lmcache-compat doctor``: what is installed, and what that means, without importing it.

Every fact is read from package metadata and from the installed files with ``ast``: the
installed LMCache's capabilities and where its classes live, whether vLLM's own connector can
import the LMCache module it names, whether the lmcache-compat connector finds its engine class.
:func:`doctor_report` returns a :class:`DoctorReport`; its :meth:`~DoctorReport.to_json` is the
``doctor --json`` object (:class:`DoctorJSON`), and the text is rendered from that object
(:mod:`lmcache_compat.report.doctor_text`): both say the same things. The vLLM-side checks
are in :mod:`~lmcache_compat.report.doctor_vllm`, SGLang's in
:mod:`~lmcache_compat.report.doctor_sglang` and the configuration's in
:mod:`~lmcache_compat.report.doctor_config`.
"""

from __future__ import annotations

import platform
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from lmcache_compat import __version__
from lmcache_compat.core.catalog import CATALOG, CapabilitySpec
from lmcache_compat.errors import (
    LMCacheCompatError,
    LMCacheVersionError,
    MetadataError,
    MPServerError,
    ScanError,
)
from lmcache_compat.mp.server import server_release
from lmcache_compat.report.doctor_config import ConfigJSON, config_report
from lmcache_compat.report.doctor_json import (
    CapabilityJSON,
    DoctorJSON,
    EngineSourceJSON,
    ImportCheckJSON,
    MatrixStatusJSON,
    ServerJSON,
    issue_json,
)
from lmcache_compat.report.doctor_sglang import (
    SglangCheck,
    sglang_check,
)
from lmcache_compat.report.doctor_vllm import (
    CompatEngine,
    compat_engine,
    compat_issue,
    engine_sources,
    vllm_import_check,
)
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
    installed_distribution_version,
    installed_lmcache_version,
    parse_version,
)

__all__ = ["DoctorReport", "doctor_report", "mp_servers_report"]


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

    def with_servers(self, servers: Sequence[ServerJSON]) -> DoctorReport:

        return replace(self, servers=tuple(servers))

    def to_json(self) -> DoctorJSON:

        out: DoctorJSON = {
            "python": platform.python_version(),
            "python_executable": sys.executable,
            "lmcache_compat": __version__,
            "lmcache": self.lmcache,
            "vllm": self.vllm,
            "sglang": self.sglang,
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
    lmcache_raw = _version("lmcache", notes)
    try:
        lmcache = installed_lmcache_version()
    except (LMCacheVersionError, MetadataError) as exc:
        lmcache = None
        notes.append(f"{exc}; capability expectations are unknown.")
    if lmcache_raw is None:
        notes.append(
            "LMCache is not installed: the table shows when each capability appeared "
            "(pip install lmcache to use it)."
        )
    vllm_raw = _version("vllm", notes)
    matrix = _matrix_status(lmcache_raw, notes)
    result, basis = _scan_installed(lmcache_raw, notes)
    capabilities = tuple(_capability(row, lmcache, result) for row in CATALOG)
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
    if pair.reason and not (vllm_raw is None and sglang_raw is not None):
        vllm_notes = (*vllm_notes, pair.reason)
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
    )


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
    try:
        return installed_distribution_version(name)
    except MetadataError as exc:
        notes.append(f"{exc}: {name} is treated as not installed")
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


def _scan_installed(lmcache_raw: str | None, notes: list[str]) -> tuple[ScanResult | None, str]:
    """The installed LMCache's classes, read statically from its files (never imported)."""
    if lmcache_raw is None:
        return None, "LMCache is not installed: 'expected' shows when each capability appeared"
    try:
        result = scan()
    except ScanError as exc:
        notes.append(
            f"could not scan the installed LMCache ({exc}); 'expected' is from its version"
        )
        return None, "LMCache version (package metadata); the files could not be scanned"
    return (
        result,
        "'present': read with ast from the installed LMCache files (nothing imported); "
        "'expected': from its version alone",
    )


# --- doctor --mp-server URL: a running LMCache MP server's release (its HTTP front end) ---------


def mp_servers_report(urls: Sequence[str], installed: str | None) -> list[ServerJSON]:
    """For each HTTP front end URL: the release its server reports beside the installed LMCache
    (``matches``: ``None`` when either is unknown), or ``error`` when it cannot be reached."""
    out: list[ServerJSON] = []
    for url in urls:
        try:
            found = server_release(url, client=installed)
        except MPServerError as exc:
            out.append({"url": url, "error": " ".join(str(exc).split())})
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
