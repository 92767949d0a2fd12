"""The tables users read, rendered from the shipped data: the release matrix
(``lmcache-compat matrix``), where each class lived, and the measured vLLM x LMCache grid
(``lmcache-compat grid``). The documentation's copies are generated from the same functions."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from packaging.version import Version

from lmcache_compat.core.catalog import CATALOG
from lmcache_compat.core.roles import Role
from lmcache_compat.upstream.grid import (
    ADAPTER_MODULE,
    ASPECTS,
    CONNECTOR_KEYS,
    MP_ASPECTS,
    MP_CONNECTOR_KEYS,
    Grid,
    VllmTier,
)
from lmcache_compat.upstream.matrix import ReleaseMatrix, ReleaseRow

__all__ = [
    "connector_problems",
    "grid_markdown",
    "grid_text",
    "matrix_markdown",
    "matrix_text",
    "module_history",
]


def _owners() -> list[Role]:
    return list(dict.fromkeys(row.owner for row in CATALOG))


def _label(row: ReleaseRow) -> str:
    return f"{row.version} (pre-release)" if row.prerelease else row.version


def matrix_text(matrix: ReleaseMatrix) -> str:
    """A plain-text table per owning class: releases down, capabilities across."""
    out: list[str] = []
    for owner in _owners():
        caps = [row.capability.value for row in CATALOG if row.owner == owner]
        out.append(owner.name)
        header = ["release", *caps]
        labels = [_label(r) for r in matrix.rows]
        widths = [
            max(len(h), 12, *map(len, labels)) if i == 0 else len(h) for i, h in enumerate(header)
        ]
        out.append("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
        for r, label in zip(matrix.rows, labels, strict=True):
            cells = [label] + ["yes" if r.has(c) else "-" for c in caps]
            out.append("  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip())
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def matrix_markdown(matrix: ReleaseMatrix) -> str:
    """Markdown tables (one per owning class) for the README, plus where the classes live."""
    out: list[str] = []
    for owner in _owners():
        caps = [row.capability.value for row in CATALOG if row.owner == owner]
        out.append(f"`{owner.name}`:")
        out.append("")
        out.append("| release | " + " | ".join(f"`{c}`" for c in caps) + " |")
        out.append("|---" * (len(caps) + 1) + "|")
        for r in matrix.rows:
            cells = ["yes" if r.has(c) else "-" for c in caps]
            out.append(f"| {_label(r)} | " + " | ".join(cells) + " |")
        out.append("")
    out.append("Where each class is defined (a move breaks code that imports it by path):")
    out.append("")
    out.append("| class | module | releases |")
    out.append("|---|---|---|")
    for cls, module, first, last in module_history(matrix):
        span = first if first == last else f"{first} ... {last}"
        out.append(f"| `{cls}` | `{module}` | {span} |")
    out.append("")
    return "\n".join(out).rstrip() + "\n"


def module_history(matrix: ReleaseMatrix) -> list[tuple[str, str, str, str]]:
    """``(class, module, first release, last release)`` for each run of releases in which a
    class lives in one module, in class and release order."""
    runs: list[tuple[str, str, str, str]] = []
    classes = list(dict.fromkeys(c for r in matrix.rows for c in r.modules))
    for cls in classes:
        current: list[str] | None = None
        for r in matrix.rows:
            module = r.modules.get(cls)
            if module is None:
                if current is not None:
                    runs.append((cls, current[0], current[1], current[2]))
                    current = None
                continue
            if current is not None and current[0] == module:
                current[2] = r.version
            else:
                if current is not None:
                    runs.append((cls, current[0], current[1], current[2]))
                current = [module, r.version, r.version]
        if current is not None:
            runs.append((cls, current[0], current[1], current[2]))
    return runs


def _spans(chosen: Iterable[str], ordered: list[str]) -> str:
    """``chosen`` (a subset of ``ordered``) as runs of neighbours: ``0.3.9 ... 0.3.12, 0.5.6``."""
    picked = set(chosen)
    runs: list[list[str]] = []
    for previous, version in zip([None, *ordered], ordered, strict=False):
        if version not in picked:
            continue
        if runs and previous == runs[-1][-1]:
            runs[-1].append(version)
        else:
            runs.append([version])
    return ", ".join(r[0] if len(r) == 1 else f"{r[0]} ... {r[-1]}" for r in runs)


def connector_problems(tier: VllmTier, connector: str) -> list[str]:
    """``"<aspect> <status>: <releases>"`` for each aspect and status the connector showed
    over ``tier``'s measured pairs, in :data:`ASPECTS` order (``[]``: none)."""
    ordered = sorted(tier.pairs, key=Version)
    found: dict[tuple[str, str], list[str]] = {}
    for version in ordered:
        run = tier.pairs[version].connectors.get(connector)
        for aspect, cell in run.problems() if run is not None else ():
            found.setdefault((aspect, cell.status), []).append(version)
    keys = sorted(found, key=lambda k: (ASPECTS.index(k[0]), k[1]))
    return [
        f"{aspect} {status}: {_spans(found[aspect, status], ordered)}" for aspect, status in keys
    ]


#: The MP connectors' names, as the grid's texts show them.
MP_NAMES = {"vllm-mp": "vLLM's LMCacheMPConnector", "compat-mp": "LMCacheCompatMPConnector"}


def mp_statuses(tier: VllmTier, connector: str) -> list[str]:
    """``"<aspect> <status>: <releases>"`` for each aspect and non-ok status of one MP
    connector over ``tier``'s MP releases (``n/a`` included: a release whose adapter needs a
    running server to build), in :data:`MP_ASPECTS` order (``[]``: every cell ok)."""
    ordered = sorted(tier.mp, key=Version)
    found: dict[tuple[str, str], list[str]] = {}
    for version in ordered:
        run = tier.mp[version].connectors.get(connector)
        for aspect, cell in run.cells.items() if run is not None else ():
            if cell.status != "ok":
                found.setdefault((aspect, cell.status), []).append(version)
    keys = sorted(found, key=lambda k: (MP_ASPECTS.index(k[0]), k[1]))
    return [
        f"{aspect} {status}: {_spans(found[aspect, status], ordered)}" for aspect, status in keys
    ]


def mp_words(tier: VllmTier, connector: str) -> str:
    if not tier.mp:
        return "not measured"
    statuses = mp_statuses(tier, connector)
    return "; ".join(statuses) if statuses else "builds on every MP release"


def importing_releases(tier: VllmTier) -> tuple[str, int, int]:
    """The releases whose vLLM adapter module imports beside ``tier``'s vLLM, as spans, with
    their number and the number measured."""
    ordered = sorted(tier.imports, key=Version)
    good = [v for v in ordered if tier.imports[v].get(ADAPTER_MODULE) == "ok"]
    return _spans(good, ordered), len(good), len(ordered)


def unit_test_words(tier: VllmTier) -> str:
    if not tier.unit_tests:
        return "not shipped in the sdist"
    outcomes = ("passed", "failed", "error", "skipped")
    counts = {
        key: f"{run.get('passed', 0)}/{sum(int(run.get(k, 0)) for k in outcomes)}"
        for key, run in tier.unit_tests.items()
        if key in CONNECTOR_KEYS and isinstance(run, Mapping)
    }
    return ", ".join(f"{key} {count}" for key, count in counts.items())


def grid_markdown(grid: Grid) -> str:
    """One row per measured vLLM: the LMCache releases whose adapter imports, and each
    connector's degraded or broken aspects over the seed-scenario releases."""
    scenario = sorted({v for t in grid.tiers for v in t.pairs}, key=Version)
    rows = [
        f"Seed scenario over LMCache {', '.join(scenario)}; imports over every wheel release.",
        "",
        "| vLLM | LMCache adapter imports | vLLM's `LMCacheConnectorV1` | "
        "`LMCacheCompatConnector` | vLLM's connector tests (passed/run) |",
        "|---|---|---|---|---|",
    ]
    mp_rows = [
        "",
        "MP connectors, built and bound over every MP release whose adapter imports (no server; "
        "n/a: the release's adapter needs a running server to be built):",
        "",
        "| vLLM | MP releases | vLLM's `LMCacheMPConnector` | `LMCacheCompatMPConnector` |",
        "|---|---|---|---|",
    ]
    for tier in grid.tiers:
        spans, good, total = importing_releases(tier)
        cols = [
            "<br>".join(connector_problems(tier, key)) or "no problem measured"
            for key in CONNECTOR_KEYS
        ]
        rows.append(
            f"| {tier.vllm} | {spans} ({good} of {total}) | {cols[0]} | {cols[1]} | "
            f"{unit_test_words(tier)} |"
        )
        if tier.mp:
            mp = _spans(tier.mp, sorted(tier.mp, key=Version))
            words = " | ".join(mp_words(tier, key) for key in MP_CONNECTOR_KEYS)
            mp_rows.append(f"| {tier.vllm} | {mp} | {words} |")
    if len(mp_rows) > 5:
        rows += mp_rows
    return "\n".join(rows) + "\n"


def grid_text(grid: Grid) -> str:
    """:func:`grid_markdown` as plain text, one block per vLLM."""
    lines: list[str] = []
    for tier in grid.tiers:
        spans, good, total = importing_releases(tier)
        lines.append(f"vLLM {tier.vllm} (torch {tier.torch or '?'})")
        lines.append(f"  LMCache adapter imports: {spans} ({good} of {total} releases)")
        for key, name in (
            ("vllm", "vLLM's LMCacheConnectorV1"),
            ("compat", "LMCacheCompatConnector"),
        ):
            problems = connector_problems(tier, key)
            lines.append(f"  {name}: {'no problem measured' if not problems else ''}".rstrip())
            lines += [f"    {p}" for p in problems]
        lines.append(f"  vLLM's connector tests: {unit_test_words(tier)}")
        mp = _spans(tier.mp, sorted(tier.mp, key=Version)) or "none measured"
        lines.append(f"  MP connectors (built and bound, no server) over {mp}:")
        lines += [f"    {MP_NAMES[key]}: {mp_words(tier, key)}" for key in MP_CONNECTOR_KEYS]
    return "\n".join(lines) + "\n"
