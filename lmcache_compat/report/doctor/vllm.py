"""doctor's vLLM-side checks, read without importing vLLM or LMCache: whether the
lmcache-compat connector finds its engine class in the installed LMCache, which LMCache modules
vLLM's own ``LMCacheConnectorV1`` imports and whether they exist, and where an engine could come
from (LMCache's module, vLLM's vendored copy)."""

from __future__ import annotations

import ast
from dataclasses import dataclass

from lmcache_compat.distributions import installed_package
from lmcache_compat.errors import (
    AmbiguousLocationError,
    LMCacheCompatError,
    LMCacheVersionError,
    ScanError,
)
from lmcache_compat.report.doctor.schema import EngineSourceJSON, ImportCheckJSON
from lmcache_compat.scan.budgets import Meter
from lmcache_compat.scan.modules import parse_source
from lmcache_compat.scan.sources import package_root, read_regular_file
from lmcache_compat.upstream import locations as loc
from lmcache_compat.upstream.known_issues import (
    Fix,
    Issue,
    issue,
    matches,
    other,
    use_lmcache_at_most,
)
from lmcache_compat.upstream.matrix import load_matrix
from lmcache_compat.upstream.resolve import clear_find_cache, where
from lmcache_compat.versions import parse_version
from lmcache_compat.vllm.plugin import CONNECTOR_MODULE, CONNECTOR_NAME

__all__ = ["CompatEngine", "compat_engine", "compat_issue", "engine_sources", "vllm_import_check"]


@dataclass(frozen=True, slots=True)
class CompatEngine:
    """Whether ``LMCacheCompatConnector`` finds ``LMCacheConnectorV1Impl`` in the installed
    LMCache (the same static rule it uses at run time; nothing imported)."""

    buildable: bool
    module: str | None = None
    found_by: str | None = None
    error: str | None = None
    candidates: tuple[str, ...] = ()


def compat_engine(lmcache_raw: str | None) -> CompatEngine:
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


def compat_issue(compat: CompatEngine) -> Issue:
    return Issue(
        "compat-engine-not-found",
        "compat",
        "broken",
        f"{loc.CONNECTOR_IMPL.name} cannot be found in the installed LMCache: {compat.error}",
        (other("install an LMCache release that ships it"),),
        "scanned",
    )


def vllm_import_check(
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
    lmcache = installed_package(loc.LMCACHE)
    for dotted in imported:
        path = lmcache.locate(loc.module_file(dotted))
        if path is None:
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


def engine_sources(
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
        path = installed_package(loc.VLLM).locate(loc.NATIVE_CONNECTOR_IMPL.files[0])
        if path is None:
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
