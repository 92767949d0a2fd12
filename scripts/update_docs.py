#!/usr/bin/env python3
"""Regenerate the generated sections of README.md and docs/*.md from the project's own data.

    python scripts/update_docs.py [--check]

A section lies between ``<!-- NAME:start -->`` and ``<!-- NAME:end -->`` in the file
:data:`SECTIONS` names. ``--check`` exits 1 when a section is stale (``tests/test_docs.py`` runs
the same check).
"""

from __future__ import annotations

import ast
import dataclasses
import re
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lmcache_compat.core.arguments import ARGUMENTS, render_arguments_markdown  # noqa: E402
from lmcache_compat.core.catalog import CATALOG, CapabilitySpec  # noqa: E402
from lmcache_compat.core.roles import (  # noqa: E402
    CONNECTOR,
    ENGINE,
    MP_SCHEDULER,
    MP_WORKER,
    SGLANG_LAYERWISE,
)
from lmcache_compat.report.config_tables import (  # noqa: E402
    key_moves_markdown,
    loader_markdown,
    migrate_example_markdown,
    mp_flag_moves_markdown,
)
from lmcache_compat.report.doctor_json import issue_json  # noqa: E402
from lmcache_compat.report.doctor_text import format_verdict  # noqa: E402
from lmcache_compat.report.releases import ROLES, distinct  # noqa: E402
from lmcache_compat.report.sglang_tables import (  # noqa: E402
    sglang_grid_markdown,
    variants_markdown,
)
from lmcache_compat.report.statuses import STATUSES  # noqa: E402
from lmcache_compat.report.tables import grid_markdown, matrix_markdown  # noqa: E402
from lmcache_compat.scan.budgets import BUDGETS  # noqa: E402
from lmcache_compat.upstream.grid import load_grid  # noqa: E402
from lmcache_compat.upstream.known_issues import verdict  # noqa: E402
from lmcache_compat.upstream.locations import PLACES  # noqa: E402
from lmcache_compat.upstream.matrix import load_matrix  # noqa: E402
from lmcache_compat.upstream.sglang_grid import load_sglang_grid  # noqa: E402

PACKAGE = ROOT / "lmcache_compat"
TESTS = ROOT / "tests"

#: Which adapter class adapts each role, and where it is defined.
ADAPTERS = {
    CONNECTOR: ("ConnectorAdapter", "core/adapter.py"),
    MP_SCHEDULER: ("MPSchedulerAdapter", "mp/adapters.py"),
    MP_WORKER: ("MPWorkerAdapter", "mp/adapters.py"),
    ENGINE: ("EngineAdapter", "engine/adapter.py"),
    SGLANG_LAYERWISE: ("SGLangLayerwiseAdapter", "sglang/adapters.py"),
}
#: Modules that state or report capabilities rather than adapt them.
_NOT_ADAPTING = {
    "core/catalog.py",
    "core/arguments.py",
    "core/surface.py",
    "core/probes.py",
    "upstream/matrix.py",
    "upstream/known_issues.py",
    "report/doctor.py",
    "report/diff.py",
    "report/cli.py",
}


def _functions_naming(path: Path, needles: tuple[str, ...]) -> list[str]:
    """``module.function`` for each top-level function or class of ``path`` whose source text
    names one of ``needles`` (code or comments), else the module if its top level does."""
    text = path.read_text(encoding="utf-8")
    tree = ast.parse(text)
    lines = text.splitlines()
    module = path.relative_to(PACKAGE).with_suffix("").as_posix().replace("/", ".")
    found: list[str] = []
    covered: set[int] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.end_lineno:
            body = "\n".join(lines[node.lineno - 1 : node.end_lineno])
            covered.update(range(node.lineno, node.end_lineno + 1))
            if any(n in body for n in needles):
                found.append(f"`{module}.{node.name}`")
    rest = "\n".join(line for i, line in enumerate(lines, 1) if i not in covered)
    if not found and any(n in rest for n in needles):
        found.append(f"`{module}`")
    return found


def _needles(spec: CapabilitySpec) -> tuple[str, ...]:
    name = spec.capability.name
    rows = [f"ARG.{row.key}" for row in ARGUMENTS if row.capability is spec.capability]
    return (f"Capability.{name}", f"C.{name}", *rows)


def _adapted(spec: CapabilitySpec) -> str:
    places: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.relative_to(PACKAGE).as_posix() not in _NOT_ADAPTING:
            places += _functions_naming(path, _needles(spec))
    if spec.passes_through:
        for owner in spec.owners:
            adapter, module = ADAPTERS[owner]
            places.insert(
                0,
                f"`{adapter}.{spec.method}` ({module}: the engine's method or the catalog "
                "fallback, bound by `core.binding.bind`)",
            )
    return "; ".join(dict.fromkeys(places)) or "-"


def _tested(spec: CapabilitySpec) -> str:
    """Test files naming the capability, or the keyword / method that carries it."""
    value, name = spec.capability.value, spec.capability.name
    carrier = re.compile(rf"\b{re.escape(spec.keyword or spec.method)}\b")
    hits = []
    for path in sorted(TESTS.rglob("test_*.py")):
        text = path.read_text(encoding="utf-8")
        named = f'"{value}"' in text or f"'{value}'" in text or f".{name}" in text
        if named or carrier.search(text):
            hits.append(f"`{path.relative_to(ROOT)}`")
    shown = ", ".join(hits[:4]) or "-"
    return shown + (f" (+{len(hits) - 4} more)" if len(hits) > 4 else "")


def _probed(spec: CapabilitySpec) -> str:
    how = "`core.surface.satisfies`"
    if spec.rule is not None:
        how += (
            f" with `{spec.rule.__module__.removeprefix('lmcache_compat.')}.{spec.rule.__name__}`"
        )
    elif spec.keyword:
        how += f" (keyword `{spec.keyword}`)"
    elif spec.kind == "property":
        how += " (a property: never evaluated)"
    return how


def render_where() -> str:
    rows = ["| capability | declared | probed | adapted | tested |", "|---|---|---|---|---|"]
    for spec in CATALOG:
        rows.append(
            f"| `{spec.capability.value}` | `core/catalog.py` `Capability.{spec.capability.name}` "
            f"| {_probed(spec)} | {_adapted(spec)} | {_tested(spec)} |"
        )
    return "\n".join(rows) + "\n"


_BUDGET_WORDS = {
    "member_bytes": "bytes of any one member or file read",
    "source_bytes": "bytes of a Python source, checked before parsing",
    "source_lines": "lines of a Python source, checked before parsing",
    "source_words": "words (`\\w+` runs) of a Python source, checked before parsing",
    "total_bytes": "bytes read (inflated) in one scan, all members together",
    "stream_bytes": "bytes of an sdist's inflated gzip stream",
    "members": "entries of an archive",
    "header_bytes": "bytes of one tar header block's extended data (pax, GNU long names)",
    "files": "Python files of a package listed for a search by class name",
    "entries": "directory entries walked in one scan (files of any kind and directories)",
    "depth": "directory depth walked below the package",
    "metadata_bytes": "bytes of `METADATA` / `PKG-INFO`",
    "classes": "class bodies read in one scan (bases included, each once)",
    "parsed_bytes": "source bytes parsed in one scan",
    "reexports": "re-exports followed to find one class",
    "config_bytes": "bytes of an LMCache configuration file (`config check`, `migrate`, doctor)",
    "config_nodes": "nodes one configuration value may expand to through YAML aliases",
}


def render_budgets() -> str:
    rows = ["| budget | limit | what it bounds |", "|---|---|---|"]
    for f in dataclasses.fields(BUDGETS):
        value = getattr(BUDGETS, f.name)
        if value >= 1024**2 and value % 1024**2 == 0:
            shown = f"{value // 1024**2} MiB"
        elif f.name.endswith("bytes") and value % 1024 == 0:
            shown = f"{value // 1024} KiB"
        else:
            shown = f"{value:,}"
        rows.append(f"| `{f.name}` | {shown} | {_BUDGET_WORDS[f.name]} |")
    return "\n".join(rows) + "\n"


def render_capabilities() -> str:
    """The connector engine's capabilities: method, first release, the adapter's fallback."""
    rows = ["| capability | method | since | fallback when absent |", "|---|---|---|---|"]
    for spec in CATALOG:
        if spec.owner is CONNECTOR:
            call = f"`{spec.method}({', '.join(spec.params)})`"
            method = f"`{spec.method}` may return `None`" if spec.returns_none else call
            rows.append(
                f"| `{spec.capability.value}` | {method} | {spec.since} | {spec.fallback_result} |"
            )
    return "\n".join(rows) + "\n"


#: The file docs/config.md migrates (in the shape of 0.3.5's documented examples), and from/to.
MIGRATE_EXAMPLE = (
    """\
# LMCache configuration written for 0.3.5
chunk_size: 256             # tokens per chunk
local_cpu: true
max_local_cpu_size: 5.0     # GB
blend_recompute_ratio: 0.15
plugin_locations: ["/opt/plugins"]
external_backends: ["my_backend"]
cufile_buffer_size: 512     # MiB
error_handling: false
""",
    "0.3.5",
    "0.5.6",
)

#: The pair the README's doctor example shows.
EXAMPLE_PAIR = ("0.32.0", "0.3.9")


def render_doctor_example() -> str:
    vllm, lmcache = EXAMPLE_PAIR
    found = verdict(vllm, lmcache)
    lines = format_verdict(vllm, lmcache, found.verdict, [issue_json(i) for i in found.issues])
    return "\n".join(("    " + line).rstrip() for line in lines) + "\n"


def render_locations() -> str:
    rows = ["| symbol | from | known modules, newest first | searched under |", "|---|---|---|---|"]
    for place in PLACES:
        modules = "<br>".join(f"`{m}`" for m in place.modules)
        rows.append(f"| `{place.name}` | {place.package} | {modules} | `{place.search_under}` |")
    return "\n".join(rows) + "\n"


def render_statuses() -> str:
    rows = ["| status | meaning |", "|---|---|"]
    rows += [f"| {s.code} | {s.meaning} |" for s in STATUSES]
    return "\n".join(rows) + "\n"


#: (file, section) -> renderer.
def render_distinct() -> str:
    """Each role's distinct releases (``lmcache-compat releases --distinct``) with their changes."""
    out = []
    for role in ROLES:
        out += [f"`--role {role}`:", "", "| release | what changed at it |", "|---|---|"]
        out += [f"| {d.version} | {'; '.join(d.changes)} |" for d in distinct(role)]
        out.append("")
    return "\n".join(out).rstrip("\n")


SECTIONS: dict[tuple[str, str], Callable[[], str]] = {
    ("README.md", "capabilities"): render_capabilities,
    ("README.md", "doctor-example"): render_doctor_example,
    ("README.md", "exit-statuses"): render_statuses,
    ("docs/vllm.md", "grid"): lambda: grid_markdown(load_grid()),
    ("docs/sglang.md", "sglang-variants"): lambda: variants_markdown(load_sglang_grid()),
    ("docs/sglang.md", "sglang-grid"): lambda: sglang_grid_markdown(
        load_sglang_grid(), load_matrix()
    ),
    ("docs/mp.md", "arguments"): render_arguments_markdown,
    ("docs/releases.md", "release-matrix"): lambda: matrix_markdown(load_matrix()),
    ("docs/locations.md", "locations"): render_locations,
    ("docs/cli.md", "budgets"): render_budgets,
    ("docs/cli.md", "exit-statuses"): render_statuses,
    ("docs/development.md", "where"): render_where,
    ("docs/testing.md", "distinct-releases"): render_distinct,
    ("docs/config.md", "migrate-example"): lambda: migrate_example_markdown(*MIGRATE_EXAMPLE),
    ("docs/config.md", "config-loaders"): loader_markdown,
    ("docs/config.md", "config-key-moves"): key_moves_markdown,
    ("docs/config.md", "mp-flag-moves"): mp_flag_moves_markdown,
}


def _markers(name: str) -> tuple[str, str]:
    return f"<!-- {name}:start -->", f"<!-- {name}:end -->"


def render(path: str, text: str) -> str:
    for (file, name), make in SECTIONS.items():
        start, end = _markers(name)
        if file != path or start not in text:
            continue
        a, b = text.index(start) + len(start), text.index(end)
        text = text[:a] + "\n" + make() + text[b:]
    return text


def stale_sections() -> list[str]:
    """``file:section`` for each generated section that differs from a fresh rendering (or is
    absent)."""
    out = []
    for file in dict.fromkeys(f for f, _ in SECTIONS):
        text = ROOT.joinpath(file).read_text(encoding="utf-8")
        fresh = render(file, text)
        for f, name in SECTIONS:
            if f != file:
                continue
            start, end = _markers(name)
            if start not in text or end not in text:
                out.append(f"{file}:{name}")
                continue
            old = text[text.index(start) : text.index(end)]
            new = fresh[fresh.index(start) : fresh.index(end)]
            if old.strip() != new.strip():
                out.append(f"{file}:{name}")
    return out


def main(argv: list[str]) -> int:
    if "--check" in argv:
        stale = stale_sections()
        if stale:
            print(f"stale generated sections: {', '.join(stale)} (run scripts/update_docs.py)")
            return 1
        return 0
    for file in dict.fromkeys(f for f, _ in SECTIONS):
        path = ROOT / file
        path.write_text(render(file, path.read_text(encoding="utf-8")), encoding="utf-8")
        print(f"updated {file}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
