#!/usr/bin/env python3
"""Regenerate the README's generated sections from the project's own data and code.

    python scripts/update_readme.py [--check]

Sections (between ``<!-- NAME:start -->`` and ``<!-- NAME:end -->``): ``locations`` (where
upstream symbols live), ``capabilities`` (the connector engine's capabilities),
``doctor-example`` (doctor's verdict for one measured pair), ``grid`` (the measured vLLM x
LMCache grid), ``release-matrix`` (the shipped release matrix), ``arguments`` (the argument
policy table), ``where`` (where each capability is declared, probed, adapted and tested, found
by reading the sources), ``budgets`` (the scan budgets). ``--check`` exits 1 when a section is
stale (``tests/test_readme.py`` runs the same check).
"""

from __future__ import annotations

import ast
import dataclasses
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lmcache_compat.core.arguments import ARGUMENTS, render_arguments_markdown  # noqa: E402
from lmcache_compat.core.catalog import CATALOG, CapabilitySpec  # noqa: E402
from lmcache_compat.report.doctor_text import format_verdict  # noqa: E402
from lmcache_compat.scan.budgets import BUDGETS  # noqa: E402
from lmcache_compat.upstream.grid import load_grid  # noqa: E402
from lmcache_compat.upstream.grid import render_markdown as render_grid  # noqa: E402
from lmcache_compat.upstream.known_issues import verdict  # noqa: E402
from lmcache_compat.upstream.matrix import load_matrix, render_markdown  # noqa: E402

README = ROOT / "README.md"
PACKAGE = ROOT / "lmcache_compat"
TESTS = ROOT / "tests"

#: Which adapter class adapts each catalog owner, and where it is defined.
ADAPTERS = {
    "LMCacheConnectorV1Impl": ("ConnectorAdapter", "adapter.py"),
    "LMCacheMPSchedulerAdapter": ("MPSchedulerAdapter", "mp.py"),
    "LMCacheMPWorkerAdapter": ("MPWorkerAdapter", "mp.py"),
    "LMCacheEngine": ("EngineAdapter", "engine.py"),
}


def _functions_naming(path: Path, needles: tuple[str, ...]) -> list[str]:
    """``module.function`` for each top-level function or class of ``path`` whose source text
    names one of ``needles`` (code or comments), else the module if its top level does."""
    text = path.read_text(encoding="utf-8")
    tree = ast.parse(text)
    lines = text.splitlines()
    found: list[str] = []
    covered: set[int] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.end_lineno:
            body = "\n".join(lines[node.lineno - 1 : node.end_lineno])
            covered.update(range(node.lineno, node.end_lineno + 1))
            if any(n in body for n in needles):
                found.append(f"`{path.stem}.{node.name}`")
    rest = "\n".join(line for i, line in enumerate(lines, 1) if i not in covered)
    if not found and any(n in rest for n in needles):
        found.append(f"`{path.stem}`")
    return found


def _needles(spec: CapabilitySpec) -> tuple[str, ...]:
    name = spec.capability.name
    rows = [f"ARG.{row.key}" for row in ARGUMENTS if row.capability is spec.capability]
    return (f"Capability.{name}", f"C.{name}", *rows)


def _adapted(spec: CapabilitySpec) -> str:
    places: list[str] = []
    skip = {
        "catalog.py",
        "arguments.py",
        "surface.py",
        "matrix.py",
        "doctor.py",
        "known_issues.py",
        "probes.py",
        "diff.py",
        "cli.py",
    }
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name not in skip:
            places += _functions_naming(path, _needles(spec))
    if spec.fallback is not None and spec.keyword is None and spec.rule is None:
        for owner in spec.owners:
            adapter, module = ADAPTERS[owner]
            places.insert(
                0,
                f"`{adapter}.{spec.method}` ({module}: the engine's method or the "
                "catalog fallback, bound by `adapter.BoundAdapter._build`)",
            )
    return "; ".join(dict.fromkeys(places)) or "-"


def _tested(spec: CapabilitySpec) -> str:
    """Test files naming the capability, or the keyword / method that carries it."""
    import re

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
    how = "`surface.satisfies`"
    if spec.rule is not None:
        how += f" with `{spec.rule.__module__.rsplit('.', 1)[-1]}.{spec.rule.__name__}`"
    elif spec.keyword:
        how += f" (keyword `{spec.keyword}`)"
    elif spec.kind == "property":
        how += " (a property: never evaluated)"
    return how


def render_where() -> str:
    rows = [
        "| capability | declared | probed | adapted | tested |",
        "|---|---|---|---|---|",
    ]
    for spec in CATALOG:
        rows.append(
            f"| `{spec.capability.value}` | `catalog.py` `Capability.{spec.capability.name}` | "
            f"{_probed(spec)} | {_adapted(spec)} | {_tested(spec)} |"
        )
    return "\n".join(rows) + "\n"


def render_budgets() -> str:
    words = {
        "member_bytes": "bytes of any one member or file read",
        "source_bytes": "bytes of a Python source, checked before parsing",
        "source_lines": "lines of a Python source, checked before parsing",
        "source_words": "words (`\\w+` runs) of a Python source, checked before parsing",
        "total_bytes": "bytes read (inflated) in one scan, all members together",
        "stream_bytes": "bytes of an sdist's inflated gzip stream",
        "members": "entries of an archive",
        "files": "Python files of a package listed for a search by class name",
        "metadata_bytes": "bytes of `METADATA` / `PKG-INFO`",
        "classes": "class bodies read in one scan (bases included, each once)",
        "parsed_bytes": "source bytes parsed in one scan",
    }
    rows = ["| budget | limit | what it bounds |", "|---|---|---|"]
    for f in dataclasses.fields(BUDGETS):
        value = getattr(BUDGETS, f.name)
        shown = (
            f"{value // 1024**2} MiB"
            if value >= 1024**2 and value % 1024**2 == 0
            else (
                f"{value // 1024} KiB"
                if f.name.endswith("bytes") and value % 1024 == 0
                else f"{value:,}"
            )
        )
        rows.append(f"| `{f.name}` | {shown} | {words[f.name]} |")
    return "\n".join(rows) + "\n"


def render_capabilities() -> str:
    """The connector engine's capabilities: method, first release, the adapter's fallback."""
    rows = ["| capability | method | since | fallback when absent |", "|---|---|---|---|"]
    for spec in CATALOG:
        if spec.owner == "LMCacheConnectorV1Impl":
            call = f"`{spec.method}({', '.join(spec.params)})`"
            method = f"`{spec.method}` may return `None`" if spec.returns_none else call
            rows.append(
                f"| `{spec.capability.value}` | {method} | {spec.since} | {spec.fallback_result} |"
            )
    return "\n".join(rows) + "\n"


#: The pair the README's doctor example shows.
EXAMPLE_PAIR = ("0.32.0", "0.3.9")


def render_doctor_example() -> str:
    vllm, lmcache = EXAMPLE_PAIR
    lines = format_verdict(vllm, lmcache, verdict(vllm, lmcache))
    return "\n".join(("    " + line).rstrip() for line in lines) + "\n"


def render_locations() -> str:
    from lmcache_compat.upstream.locations import PLACES

    rows = ["| symbol | from | known modules, newest first | searched under |", "|---|---|---|---|"]
    for place in PLACES:
        modules = "<br>".join(f"`{m}`" for m in place.modules)
        rows.append(f"| `{place.name}` | {place.package} | {modules} | `{place.search_under}` |")
    return "\n".join(rows) + "\n"


SECTIONS: dict[str, Callable[[], str]] = {
    "locations": render_locations,
    "doctor-example": render_doctor_example,
    "grid": lambda: render_grid(load_grid()),
    "capabilities": render_capabilities,
    "release-matrix": lambda: render_markdown(load_matrix()),
    "arguments": render_arguments_markdown,
    "where": render_where,
    "budgets": render_budgets,
}


def _markers(name: str) -> tuple[str, str]:
    return f"<!-- {name}:start -->", f"<!-- {name}:end -->"


def render(text: str) -> str:
    for name, make in SECTIONS.items():
        start, end = _markers(name)
        if start not in text:
            continue
        a, b = text.index(start) + len(start), text.index(end)
        text = text[:a] + "\n" + make() + text[b:]
    return text


def stale_sections(text: str) -> list[str]:
    """The generated sections whose text differs from a fresh rendering (or that are absent)."""
    fresh = render(text)
    out = []
    for name in SECTIONS:
        start, end = _markers(name)
        if start not in text:
            out.append(name)
            continue
        old = text[text.index(start) : text.index(end)]
        new = fresh[fresh.index(start) : fresh.index(end)]
        if old.strip() != new.strip():
            out.append(name)
    return out


def main(argv: list[str]) -> int:
    text = README.read_text(encoding="utf-8")
    if "--check" in argv:
        stale = stale_sections(text)
        if stale:
            print(f"README sections stale: {', '.join(stale)} (run scripts/update_readme.py)")
            return 1
        return 0
    README.write_text(render(text), encoding="utf-8")
    print("updated README.md")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
