"""``lmcache-compat doctor``: what is installed, and what that means, without importing it.

Every fact is read from package metadata and from the installed files with ``ast``: the
installed LMCache's capabilities and where its classes live, whether vLLM's own connector can
import the LMCache module it names, whether the lmcache-compat connector finds its engine class.
:func:`doctor_report` returns a :class:`DoctorReport`; its :meth:`~DoctorReport.to_json` is the
``doctor --json`` object (:class:`DoctorJSON`), and the text is rendered from that object
(:mod:`lmcache_compat.report.doctor_text`): both say the same things.
"""

from __future__ import annotations

import ast
import platform
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from lmcache_compat import __version__
from lmcache_compat.core.catalog import CATALOG, CapabilitySpec
from lmcache_compat.errors import (
    AmbiguousLocationError,
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
from lmcache_compat.scan.budgets import Meter
from lmcache_compat.scan.modules import parse_source
from lmcache_compat.scan.sources import package_root, read_regular_file
from lmcache_compat.upstream import locations as loc
from lmcache_compat.upstream.known_issues import (
    Fix,
    Issue,
    Verdict,
    issue,
    matches,
    other,
    overall,
    use_lmcache_at_most,
    verdict,
)
from lmcache_compat.upstream.matrix import load_matrix
from lmcache_compat.upstream.resolve import clear_find_cache, where
from lmcache_compat.upstream.scanner import ScanResult, scan
from lmcache_compat.versions import (
    expectation,
    installed_distribution_version,
    installed_lmcache_version,
    parse_version,
)
from lmcache_compat.vllm.plugin import CONNECTOR_MODULE, CONNECTOR_NAME

if TYPE_CHECKING:  # TypedDict keys that may be absent (their annotations stay text at run time)
    pass

__all__ = ["DoctorReport", "doctor_report", "mp_servers_report"]


@dataclass(frozen=True, slots=True)
class CompatEngine:
    """Whether ``LMCacheCompatConnector`` finds ``LMCacheConnectorV1Impl`` in the installed
    LMCache (the same static rule it uses at run time; nothing imported)."""

    buildable: bool
    module: str | None = None
    found_by: str | None = None
    error: str | None = None
    candidates: tuple[str, ...] = ()


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
    compat = _compat_engine(lmcache_raw)
    pair = verdict(vllm_raw, lmcache_raw, compat_buildable=compat.buildable)
    issues = list(pair.issues)
    vllm_import, import_issue = _vllm_import_check(
        vllm_raw, lmcache_raw, result.modules if result is not None else {}, compat
    )
    if import_issue is not None:
        issues.insert(0, import_issue)
    if lmcache_raw is not None and vllm_raw is not None and not compat.buildable:
        issues.insert(0, _compat_issue(compat))
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
        engine_sources=tuple(_engine_sources(lmcache_raw, vllm_raw, compat)),
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


def _compat_engine(lmcache_raw: str | None) -> CompatEngine:
    if lmcache_raw is None:
        return CompatEngine(False, error="LMCache is not installed")
    clear_find_cache()
    try:
        module, how, _ = where(loc.CONNECTOR_IMPL)
    except AmbiguousLocationError as exc:
        return CompatEngine(False, error=" ".join(str(exc).split()), candidates=exc.candidates)
    except LMCacheCompatError as exc:
        return CompatEngine(False, error=" ".join(str(exc).split()))
    return CompatEngine(True, module=module, found_by=how)


def _compat_issue(compat: CompatEngine) -> Issue:
    return Issue(
        "compat-engine-not-found",
        "compat",
        "broken",
        f"{loc.CONNECTOR_IMPL.name} cannot be found in the installed LMCache: {compat.error}",
        (other("install an LMCache release that ships it"),),
        "scanned",
    )


def _vllm_import_check(
    vllm_raw: str | None,
    lmcache_raw: str | None,
    modules: dict[str, str],
    compat: CompatEngine,
) -> tuple[ImportCheckJSON | None, Issue | None]:
    """Which LMCache modules vLLM's in-tree ``LMCacheConnectorV1`` imports (read from vLLM's
    source), and whether the installed LMCache has them."""
    if vllm_raw is None or lmcache_raw is None:
        return None, None
    imported = _vllm_connector_imports()
    if imported is None:
        return {"checked": False}, None
    missing = []
    for dotted in imported:
        try:
            path = Path(str(metadata.distribution("lmcache").locate_file(loc.module_file(dotted))))
        except metadata.PackageNotFoundError:
            return {"checked": False}, None
        if not path.is_file():
            missing.append(dotted)
    out: ImportCheckJSON = {"checked": True, "imports": imported, "missing": missing}
    if not missing:
        return out, None
    found_in = modules.get(loc.CONNECTOR_IMPL.name)
    moved = f" ({loc.CONNECTOR_IMPL.name} is in {found_in} in this release)" if found_in else ""
    fixes: list[Fix] = []
    if compat.buildable:
        fixes.append(
            Fix(
                "use-compat",
                detail=": it finds the class wherever the release put it (--kv-transfer-config "
                f'\'{{"kv_connector": "{CONNECTOR_NAME}", "kv_connector_module_path": '
                f'"{CONNECTOR_MODULE}", "kv_role": "kv_both"}}\')',
            )
        )
    last = _last_release_with(missing[0])
    if last is not None:
        fixes.append(use_lmcache_at_most(last))
    return out, Issue(
        "vllm-connector-import-path",
        "vllm",
        "broken",
        f"vLLM {vllm_raw}'s LMCacheConnectorV1 imports {', '.join(missing)}, which LMCache "
        f"{lmcache_raw} does not have{moved}: ModuleNotFoundError when vLLM builds the connector",
        tuple(fixes),
        "scanned",
    )


def _vllm_connector_imports() -> list[str] | None:
    """The ``lmcache`` modules vLLM's installed ``lmcache_connector.py`` imports (any depth)."""
    try:
        dotted = where(loc.VLLM_LMCACHE_CONNECTOR).module
        root = package_root(loc.VLLM)
        if root is None:
            return None
        path = root / loc.module_file(dotted)
        meter = Meter()
        tree = parse_source(
            path.name,
            read_regular_file(path, meter.budgets.source_bytes, "source_bytes"),
            str(path.parent),
            meter,
        )
    except (ScanError, LMCacheCompatError, ImportError, ValueError):
        return None
    found: dict[str, None] = {}
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.ImportFrom)
            and node.module
            and not node.level
            and node.module.split(".")[0] == loc.LMCACHE
        ):
            found[node.module] = None
    return list(found)


def _last_release_with(dotted: str) -> str | None:
    """The newest release of the shipped matrix in which some class lives in ``dotted``."""
    last = None
    for row in load_matrix().rows:
        if dotted in row.modules.values():
            last = row.version
    return last


def _engine_sources(
    lmcache_raw: str | None, vllm_raw: str | None, compat: CompatEngine
) -> list[EngineSourceJSON]:
    """Where an LMCacheConnectorV1Impl would come from: LMCache's own module (the default) and
    vLLM's vendored copy (``use_native=True``)."""
    out: list[EngineSourceJSON] = []
    if lmcache_raw is not None:
        entry: EngineSourceJSON = {
            "source": "LMCache's own module (default)",
            "present": compat.buildable,
        }
        if compat.module is not None and compat.found_by is not None:
            entry["module"] = compat.module
            entry["found_by"] = compat.found_by
        if compat.candidates:
            entry["candidates"] = list(compat.candidates)
            entry["reason"] = "several modules define a matching class; none was chosen"
        out.append(entry)
    if vllm_raw is not None:
        try:
            native = loc.NATIVE_CONNECTOR_IMPL.files[0]
            path = Path(str(metadata.distribution("vllm").locate_file(native)))
        except metadata.PackageNotFoundError:
            return out
        vendored: EngineSourceJSON = {
            "source": "vLLM's vendored copy (use_native=True)",
            "path": str(path),
            "present": path.is_file(),
        }
        if lmcache_raw is not None:
            try:
                lm = parse_version(lmcache_raw)
            except LMCacheVersionError:
                lm = None
            if lm is not None:
                row = issue("native-copy-range")
                vendored["imports_with_installed_lmcache"] = not matches(lm, row.lmcache_specifiers)
        out.append(vendored)
    return out


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
