"""``lmcache-compat doctor``: what is installed, and what that means, without importing it.

Every fact is read from package metadata and from the installed files with ``ast``: the
installed LMCache's capabilities and where its classes live, whether vLLM's own connector can
import the LMCache module it names, whether the lmcache-compat connector finds its engine class.
The JSON object and the text say the same things (the text is rendered from the JSON by
:mod:`lmcache_compat.report.doctor_text`).
"""

from __future__ import annotations

import platform
import sys
from collections.abc import Sequence
from typing import Any

from lmcache_compat.core.catalog import CATALOG
from lmcache_compat.errors import LMCacheCompatError, LMCacheVersionError, MetadataError
from lmcache_compat.upstream import locations as loc
from lmcache_compat.upstream.known_issues import (
    CONNECTORS,
    USE_COMPAT,
    issue,
    matches,
    overall,
    verdict,
)
from lmcache_compat.versions import (
    expectation,
    installed_distribution_version,
    installed_lmcache_version,
)

__all__ = ["doctor_report", "mp_servers_report"]


def doctor_report() -> dict[str, Any]:
    """Everything ``doctor`` knows, as one JSON-ready object. Imports neither LMCache nor vLLM."""
    from lmcache_compat import __version__

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
    scanned, modules, basis = _scan_installed(lmcache_raw, notes)
    capabilities = []
    for row in CATALOG:
        expected = expectation(row.since, lmcache)
        present = None if scanned is None else scanned.get(row.capability.value, False)
        entry: dict[str, Any] = {
            "capability": row.capability.value,
            "member": row.member,
            "since": row.since,
            "expected": expected,
            "present": present,
            "fallback": row.fallback_result,
            "impact": row.impact,
        }
        if present is not None and expected in ("yes", "no") and present != (expected == "yes"):
            entry["note"] = (
                "its files have it although its version says otherwise"
                if present
                else "its version says it should have it, but its files do not"
            )
        capabilities.append(entry)
    disagree = [c["capability"] for c in capabilities if "note" in c]
    if disagree:
        notes.append(
            f"what this release's files offer differs from what its version suggests for "
            f"{', '.join(disagree)}: 'present' (read from the files) is what counts"
        )
    compat = _compat_engine(lmcache_raw)
    pair = verdict(vllm_raw, lmcache_raw, compat_buildable=compat["buildable"])
    issues: list[dict[str, Any]] = pair["issues"]
    vllm_import = _vllm_import_check(vllm_raw, lmcache_raw, modules, compat)
    if vllm_import is not None and vllm_import.get("issue") is not None:
        issues.insert(0, vllm_import["issue"])
    if lmcache_raw is not None and vllm_raw is not None and not compat["buildable"]:
        issues.insert(0, _compat_issue(compat))
    result = pair["verdict"] if pair["verdict"] == "unknown" else overall(issues)
    return {
        "python": platform.python_version(),
        "python_executable": sys.executable,
        "lmcache_compat": __version__,
        "lmcache": lmcache_raw,
        "vllm": vllm_raw,
        "lmcache_in_matrix": matrix,
        "engine_sources": _engine_sources(lmcache_raw, vllm_raw, compat),
        "vllm_connector_import": vllm_import,
        "capabilities_basis": basis,
        "capabilities": capabilities,
        "verdict": result,
        "issues": issues,
        "notes": notes + list(pair.get("notes", ())) + ([pair["reason"]] if pair["reason"] else []),
    }


def _version(name: str, notes: list[str]) -> str | None:
    try:
        return installed_distribution_version(name)
    except MetadataError as exc:
        notes.append(f"{exc}: {name} is treated as not installed")
        return None


def _matrix_status(lmcache_raw: str | None, notes: list[str]) -> dict[str, Any] | None:
    """Where the installed release stands against the shipped matrix."""
    if lmcache_raw is None:
        return None
    from lmcache_compat.upstream.matrix import load_matrix
    from lmcache_compat.versions import parse_version

    matrix = load_matrix()
    newest = matrix.newest.version
    try:
        version = parse_version(lmcache_raw)
    except LMCacheVersionError:
        return {"status": "unknown", "newest": newest}
    status = "listed"
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
    lmcache_raw: str | None, notes: list[str]
) -> tuple[dict[str, bool] | None, dict[str, dict[str, str]], str]:
    """Capabilities of the installed LMCache and where its classes live, read statically from
    its files (never imported)."""
    if lmcache_raw is None:
        return None, {}, "LMCache is not installed: 'expected' shows when each capability appeared"
    from lmcache_compat.errors import ScanError
    from lmcache_compat.scan.scanner import scan

    try:
        result = scan()
    except ScanError as exc:
        notes.append(
            f"could not scan the installed LMCache ({exc}); 'expected' is from its version"
        )
        return None, {}, "LMCache version (package metadata); the files could not be scanned"
    modules = {
        cls: {"module": module, "found_by": result.found_by.get(cls, "known")}
        for cls, module in result.modules.items()
    }
    return (
        result.capabilities,
        modules,
        "'present': read with ast from the installed LMCache files (nothing imported); "
        "'expected': from its version alone",
    )


def _compat_engine(lmcache_raw: str | None) -> dict[str, Any]:
    """Whether ``LMCacheCompatConnector`` finds ``LMCacheConnectorV1Impl`` in the installed
    LMCache (the same static rule it uses at run time; nothing imported)."""
    if lmcache_raw is None:
        return {"buildable": False, "error": "LMCache is not installed"}
    from lmcache_compat.upstream.resolve import clear_find_cache, where

    clear_find_cache()
    try:
        module, how = where(loc.CONNECTOR_IMPL)
    except LMCacheCompatError as exc:
        return {"buildable": False, "error": " ".join(str(exc).split())}
    return {"buildable": True, "module": module, "found_by": how}


def _compat_issue(compat: dict[str, Any]) -> dict[str, Any]:
    return {
        "key": "compat-engine-not-found",
        "connector": CONNECTORS["compat"],
        "connector_key": "compat",
        "severity": "broken",
        "problem": f"{loc.CONNECTOR_IMPL.name} cannot be found in the installed LMCache: "
        f"{compat['error']}",
        "fix": "install an LMCache release that ships it",
        "fixes": ["install an LMCache release that ships it"],
        "source": "scanned",
    }


def _vllm_import_check(
    vllm_raw: str | None,
    lmcache_raw: str | None,
    modules: dict[str, dict[str, str]],
    compat: dict[str, Any],
) -> dict[str, Any] | None:
    """Which LMCache modules vLLM's in-tree ``LMCacheConnectorV1`` imports (read from vLLM's
    source), and whether the installed LMCache has them."""
    if vllm_raw is None or lmcache_raw is None:
        return None
    imported = _vllm_connector_imports()
    if imported is None:
        return {"checked": False}
    from importlib import metadata
    from pathlib import Path

    missing = []
    for dotted in imported:
        try:
            path = Path(str(metadata.distribution("lmcache").locate_file(loc.module_file(dotted))))
        except metadata.PackageNotFoundError:
            return {"checked": False}
        if not path.is_file():
            missing.append(dotted)
    out: dict[str, Any] = {"checked": True, "imports": imported, "missing": missing}
    if missing:
        where = modules.get(loc.CONNECTOR_IMPL.name, {}).get("module")
        moved = f" ({loc.CONNECTOR_IMPL.name} is in {where} in this release)" if where else ""
        fixes = []
        if compat["buildable"]:
            fixes.append(
                f"{USE_COMPAT}: it finds the class wherever the release put it "
                '(--kv-transfer-config \'{"kv_connector": "LMCacheCompatConnector", '
                '"kv_connector_module_path": "lmcache_compat.vllm", "kv_role": "kv_both"}\')'
            )
        last = _last_release_with(missing[0])
        if last is not None:
            fixes.append(f"use LMCache <= {last}")
        out["issue"] = {
            "key": "vllm-connector-import-path",
            "connector": CONNECTORS["vllm"],
            "connector_key": "vllm",
            "severity": "broken",
            "problem": f"vLLM {vllm_raw}'s LMCacheConnectorV1 imports {', '.join(missing)}, "
            f"which LMCache {lmcache_raw} does not have{moved}: ModuleNotFoundError when vLLM "
            "builds the connector",
            "fix": ", or ".join(fixes) or "none known",
            "fixes": fixes,
            "source": "scanned",
        }
    return out


def _vllm_connector_imports() -> list[str] | None:
    """The ``lmcache`` modules vLLM's installed ``lmcache_connector.py`` imports (any depth)."""
    import ast

    from lmcache_compat.errors import ScanError
    from lmcache_compat.scan.budgets import Meter
    from lmcache_compat.scan.classreader import parse_source
    from lmcache_compat.scan.sources import read_regular_file
    from lmcache_compat.upstream.resolve import where

    try:
        dotted, _ = where(loc.VLLM_LMCACHE_CONNECTOR)
        import importlib.util

        spec = importlib.util.find_spec(loc.VLLM)
        if spec is None or not spec.submodule_search_locations:
            return None
        from pathlib import Path

        root = Path(next(iter(spec.submodule_search_locations))).parent
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
    from lmcache_compat.upstream.matrix import load_matrix

    last = None
    for row in load_matrix().rows:
        if dotted in row.modules.values():
            last = row.version
    return last


def _engine_sources(
    lmcache_raw: str | None, vllm_raw: str | None, compat: dict[str, Any]
) -> list[dict[str, Any]]:
    """Where an LMCacheConnectorV1Impl would come from: LMCache's own module (the default) and
    vLLM's vendored copy (``use_native=True``)."""
    from importlib import metadata
    from pathlib import Path

    from lmcache_compat.versions import parse_version

    out: list[dict[str, Any]] = []
    if lmcache_raw is not None:
        entry: dict[str, Any] = {
            "source": "LMCache's own module (default)",
            "present": bool(compat["buildable"]),
        }
        if compat["buildable"]:
            entry["module"] = compat["module"]
            entry["found_by"] = compat["found_by"]
        out.append(entry)
    if vllm_raw is not None:
        try:
            native = loc.NATIVE_CONNECTOR_IMPL.files[0]
            path = Path(str(metadata.distribution("vllm").locate_file(native)))
        except metadata.PackageNotFoundError:
            return out
        entry = {
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
                entry["imports_with_installed_lmcache"] = not matches(lm, row.lmcache_specifiers)
        out.append(entry)
    return out


# --- doctor --mp-server URL: a running LMCache MP server's release (its HTTP front end) ---------


def mp_servers_report(urls: Sequence[str], installed: str | None) -> list[dict[str, Any]]:
    """For each HTTP front end URL: the release its server reports beside the installed LMCache
    (``matches``: ``None`` when either is unknown), or ``error`` when it cannot be reached."""
    from lmcache_compat.errors import MPServerError
    from lmcache_compat.mp.server import server_release

    out: list[dict[str, Any]] = []
    for url in urls:
        try:
            out.append(server_release(url, client=installed).to_json())
        except MPServerError as exc:
            out.append({"url": url, "error": " ".join(str(exc).split())})
    return out
