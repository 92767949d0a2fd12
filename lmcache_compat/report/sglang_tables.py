"""The sglang x LMCache tables (``lmcache-compat grid --engine sglang``), rendered from the
shipped sglang grid and the release matrix; the documentation's copy is generated from the same
functions."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from lmcache_compat.report.tables import _spans
from lmcache_compat.sglang.decisions import plan
from lmcache_compat.sglang.known.bind import PairJSON, default_mode
from lmcache_compat.sglang.known.grid import Run, SglangGrid
from lmcache_compat.upstream.matrix import ReleaseMatrix

__all__ = [
    "plugin_spans",
    "run_summary",
    "sglang_grid_markdown",
    "sglang_grid_text",
    "variants_markdown",
]


def _group(versions: list[str], label: Callable[[str], str | None]) -> list[tuple[str, list[str]]]:
    """Consecutive ``versions`` with the same label (``None``: left out)."""
    out: list[tuple[str, list[str]]] = []
    for version in versions:
        text = label(version)
        if text is None:
            continue
        if out and out[-1][0] == text and _next(versions, out[-1][1][-1]) == version:
            out[-1][1].append(version)
        else:
            out.append((text, [version]))
    return out


def _next(versions: list[str], version: str) -> str | None:
    i = versions.index(version)
    return versions[i + 1] if i + 1 < len(versions) else None


def _span(versions: Iterable[str], ordered: list[str]) -> str:
    return _spans(versions, ordered)


def _reason(pair: PairJSON) -> str | None:
    mode = default_mode(pair["modes"])
    if mode is None:
        return None
    if mode["status"] == "works":
        return "works" + (f" ({'; '.join(mode['conditions'])})" if mode["conditions"] else "")
    return mode["reasons"][0]


def run_summary(run: Run, lmcache: list[str]) -> tuple[str, list[tuple[str, str]]]:
    """(the modes the run's caches reach, [(LMCache span, what happens)]) for the default
    mode."""
    modes = []
    for module in run.integration:
        for mode, reach in module["modes"].items():
            modes.append(f"{mode} ({reach})")
    groups = _group(lmcache, lambda v: _reason(run.pairs[v]) if v in run.pairs else None)
    return ", ".join(modes) or "no LMCache integration", [
        (_span(vs, lmcache), text) for text, vs in groups
    ]


def plugin_spans(grid: SglangGrid, matrix: ReleaseMatrix, sglang: str) -> list[tuple[str, str]]:
    """[(LMCache span, what the lmcache-compat backend does)] for one sglang release (its
    default mode: ``auto`` with an LMCache config file given)."""
    facts = grid.facts(sglang)
    ordered = matrix.versions

    def label(version: str) -> str:
        row = matrix.row(version)
        found = plan(facts, version, row.capabilities, config_file=True)
        if not found.serves:
            return f"refuses: {found.reason}"
        assert found.variant is not None
        extra = f"; {found.note}" if found.note else ""
        return f"serves ({found.mode}, {found.variant.name}{extra})"

    return [(_span(vs, ordered), text) for text, vs in _group(ordered, label)]


def _plugin_cell(grid: SglangGrid, matrix: ReleaseMatrix, run: Run) -> str:
    if not any(grid.release(r).registry for r in run.releases):
        return "no plugin mechanism (no radix-cache registry): adapter, doctor, docs"
    cells = []
    for variant, members in _group(
        list(run.releases), lambda r: grid.release(r).variant or "no variant"
    ):
        spans = plugin_spans(grid, matrix, members[0])
        served = [f"{span}: {text}" for span, text in spans if text.startswith("serves")]
        head = f"**{variant}** (sglang {_span(members, list(run.releases))})"
        cells.append(head + ": " + ("; ".join(served) or "serves nothing"))
    return "<br>".join(cells)


def sglang_grid_markdown(grid: SglangGrid, matrix: ReleaseMatrix) -> str:
    """One row per run of sglang releases: the modes its cache reaches, what its own
    integration does with each LMCache span, and what the lmcache-compat plugin serves."""
    rows = [
        f"sglang {grid.versions[0]} ... {grid.versions[-1]} ({len(grid.versions)} releases) x "
        f"LMCache {matrix.versions[0]} ... {matrix.versions[-1]}, read from the wheels.",
        "",
        "| sglang (run) | modes | sglang's own integration, default mode | lmcache-compat plugin |",
        "|---|---|---|---|",
    ]
    for run in grid.runs:
        modes, spans = run_summary(run, grid.lmcache)
        own = "<br>".join(f"{span}: {text}" for span, text in spans) or "-"
        plugin = _plugin_cell(grid, matrix, run) if run.integration else "-"
        rows.append(f"| {run.label} ({len(run.releases)}) | {modes} | {own} | {plugin} |")
    return "\n".join(rows) + "\n"


def sglang_grid_text(grid: SglangGrid, matrix: ReleaseMatrix, only: str | None = None) -> str:
    """:func:`sglang_grid_markdown` as plain text, one block per run (or the run of ``only``)."""
    lines: list[str] = []
    runs = [grid.run_of(only)] if only is not None else grid.runs
    for run in runs:
        modes, spans = run_summary(run, grid.lmcache)
        lines.append(f"sglang {run.label} ({len(run.releases)} releases): {modes}")
        lines += [f"  LMCache {span}: {text}" for span, text in spans]
        shown = [only] if only is not None else list(run.releases)
        registry = [r for r in shown if grid.release(r).registry]
        if registry:
            first = registry[0] if only is None else only
            lines.append(f"  lmcache-compat plugin (sglang {first}):")
            lines += [f"    LMCache {s}: {t}" for s, t in plugin_spans(grid, matrix, first)]
    return "\n".join(lines) + "\n"


def variants_markdown(grid: SglangGrid) -> str:
    """The backend's variants: the sglang releases each serves (from the grid), what it relies
    on, and what the sglang tier round-trips for real."""
    from lmcache_compat.sglang.variants import VARIANTS  # lazy: a light table

    rows = [
        "| variant | sglang releases (grid) | relies on | verified by the sglang tier |",
        "|---|---|---|---|",
    ]
    for variant in VARIANTS:
        served = [r.sglang for r in grid.releases if r.variant == variant.name]
        span = _spans(served, grid.versions) or "-"
        verified = "; ".join(f"{mode} over LMCache {spec}" for mode, spec in variant.verified)
        on = f" (on sglang {variant.tested_on})" if variant.tested_on else ""
        rows.append(f"| `{variant.name}` | {span} | {variant.summary} | {verified or '-'}{on} |")
    return "\n".join(rows) + "\n"
