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

from lmcache_compat._api import INSTEAD, INTERNAL, MOVED, supported_modules  # noqa: E402
from lmcache_compat.budgets import BUDGETS  # noqa: E402
from lmcache_compat.core.arguments import ARGUMENTS, render_arguments_markdown  # noqa: E402
from lmcache_compat.core.catalog import CATALOG, CapabilitySpec  # noqa: E402
from lmcache_compat.core.roles import (  # noqa: E402
    CONNECTOR,
    ENGINE,
    MP_SCHEDULER,
    MP_WORKER,
    SGLANG_LAYERWISE,
)
from lmcache_compat.report.cli import build_parser, command_parsers  # noqa: E402
from lmcache_compat.report.config_tables import (  # noqa: E402
    key_moves_markdown,
    loader_markdown,
    migrate_example_markdown,
    mp_flag_moves_markdown,
)
from lmcache_compat.report.doctor.schema import issue_json  # noqa: E402
from lmcache_compat.report.doctor.text import format_verdict  # noqa: E402
from lmcache_compat.report.releases import ROLES, distinct  # noqa: E402
from lmcache_compat.report.sglang_tables import (  # noqa: E402
    sglang_grid_markdown,
    variants_markdown,
)
from lmcache_compat.report.statuses import STATUSES  # noqa: E402
from lmcache_compat.report.tables import grid_markdown, matrix_markdown  # noqa: E402
from lmcache_compat.sglang.known.grid import load_sglang_grid  # noqa: E402
from lmcache_compat.upstream.grid import load_grid  # noqa: E402
from lmcache_compat.upstream.known_issues import verdict  # noqa: E402
from lmcache_compat.upstream.locations import PLACES  # noqa: E402
from lmcache_compat.upstream.matrix import load_matrix  # noqa: E402

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
    "report/doctor/__init__.py",
    "upstream/diff.py",
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
    "input_depth": "nesting levels of one YAML or JSON document (a configuration file, JSON in "
    "an `LMCACHE_*` variable, an MP front end's reply), checked before parsing",
    "number_chars": "characters of one number in a configuration file or variable, or in JSON, "
    "checked before conversion",
    "version_chars": "characters of a version or specifier text (`--lmcache`, `--to`, `grid "
    "--vllm`, `releases SPEC`, installed metadata), checked before parsing",
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


def render_provenance() -> str:
    """Each capability's ``since``, the release diff that shows it, and the upstream change."""
    from lmcache_compat.upstream.provenance import citation, moves

    rows = ["| capability | since | shown by | upstream |", "|---|---|---|---|"]
    for spec in CATALOG:
        cited = citation(spec)
        shown = f"`{cited.command}`" if cited.command else "the matrix's first release"
        upstream = ", ".join(cited.upstream) or "-"
        rows.append(f"| `{cited.capability}` | {cited.since} | {shown} | {upstream} |")
    rows += ["", "| class moved | from | to | shown by |", "|---|---|---|---|"]
    for move in moves():
        command = f"`lmcache-compat diff {move.previous} {move.since}`"
        rows.append(f"| `{move.cls}` | `{move.before}` | `{move.after}` | {command} |")
    return "\n".join(rows) + "\n"


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


#: The width the help in docs/cli.md is rendered at (a terminal's is used at run time).
HELP_WIDTH = 100


def render_cli_help() -> str:
    """Every command's ``--help``, as the parser prints it at :data:`HELP_WIDTH` columns."""
    parser = build_parser(width=HELP_WIDTH)
    parts = [
        ("lmcache-compat", parser),
        *((f"lmcache-compat {n}", p) for n, p in command_parsers(parser)),
    ]
    return "".join(f"### `{name}`\n\n```text\n{p.format_help()}```\n\n" for name, p in parts)


def module_file(module: str) -> Path:
    """The source file of ``module`` (a module or a package of this repository)."""
    path = ROOT / module.replace(".", "/")
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


def _lazy_table(tree: ast.Module) -> dict[str, str]:
    """A package's ``_LAZY`` (name -> module), its values read through module-level strings."""
    strings = {
        t.id: n.value.value
        for n in tree.body
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant)
        for t in n.targets
        if isinstance(t, ast.Name) and isinstance(n.value.value, str)
    }
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "_LAZY" for t in node.targets)
            and isinstance(node.value, ast.Dict)
        ):
            out = {}
            for key, value in zip(node.value.keys, node.value.values, strict=True):
                assert isinstance(key, ast.Constant)
                out[key.value] = (
                    value.value if isinstance(value, ast.Constant) else strings[value.id]
                )  # type: ignore[attr-defined]
            return out
    return {}


def definition(module: str, name: str) -> tuple[str, ast.stmt]:
    """Where ``module``'s ``name`` is defined (read, never imported: some import vLLM): the
    defining module and its statement, followed through lazy tables and imports."""
    tree = ast.parse(module_file(module).read_text(encoding="utf-8"))
    target = _lazy_table(tree).get(name)
    if target is None:
        for node in tree.body:
            if isinstance(node, (ast.ClassDef, ast.FunctionDef)) and node.name == name:
                return module, node
            targets = (
                node.targets
                if isinstance(node, ast.Assign)
                else [node.target]
                if isinstance(node, ast.AnnAssign)
                else []
            )
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                return module, node
            if (
                isinstance(node, ast.ImportFrom)
                and node.module
                and any((a.asname or a.name) == name for a in node.names)
            ):
                target = node.module
    if target is None:
        raise LookupError(f"{module}.{name}: neither defined, imported nor in its lazy table")
    return definition(target, name)


def _summary(module: str, node: ast.stmt) -> str:
    """The first sentence of a definition's docstring, or of the ``#:`` comment above it."""
    if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
        text = ast.get_docstring(node) or ""
    else:
        lines = module_file(module).read_text(encoding="utf-8").splitlines()
        above: list[str] = []
        i = node.lineno - 2
        while i >= 0 and lines[i].lstrip().startswith("#:"):
            above.insert(0, lines[i].lstrip()[2:].strip())
            i -= 1
        text = " ".join(above)
    text = " ".join(text.split("\n\n")[0].split())
    text = re.split(r"(?<!e\.g)(?<!i\.e)\.\s+(?=[A-Z])", text)[0].rstrip(".") + "."
    text = re.sub(r":\w+:`~?(?:[\w.]+\.)?([^`]+)`", r"`\1`", text).replace("``", "`")
    return "" if text == "." else text.replace("|", "\\|")


def _kind(node: ast.stmt) -> str:
    if isinstance(node, ast.ClassDef):
        return "class"
    return "function" if isinstance(node, ast.FunctionDef) else "constant"


def render_api() -> str:
    """The supported names (``lmcache_compat._api.SUPPORTED``), a table per module."""
    out: list[str] = []
    for module, names in supported_modules().items():
        out += [f"`{module}`:", "", "| name | kind | what it is |", "|---|---|---|"]
        for name in names:
            where, node = definition(module, name)
            out.append(f"| `{name}` | {_kind(node)} | {_summary(where, node) or '-'} |")
        out.append("")
    return "\n".join(out).rstrip("\n") + "\n"


def render_internal() -> str:
    rows = ["| internal | what it is |", "|---|---|"]
    rows += [f"| `{module}` | {what} |" for module, what in INTERNAL.items()]
    return "\n".join(rows) + "\n"


def _backticked_names(text: str) -> str:
    """``text`` with each dotted ``lmcache_compat`` name in backticks."""
    return re.sub(r"\b(lmcache_compat(?:\.\w+)+)", r"`\1`", text)


def render_moved() -> str:
    rows = ["| old path | use instead | its code now (internal) | removed in |", "|---|" * 4]
    rows += [
        f"| `{old}` | {_backticked_names(INSTEAD[old])} | `{new}` | {gone} |"
        for old, (new, gone) in MOVED.items()
    ]
    return "\n".join(rows) + "\n"


SECTIONS: dict[tuple[str, str], Callable[[], str]] = {
    ("docs/cli.md", "command-help"): render_cli_help,
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
    ("docs/releases.md", "provenance"): render_provenance,
    ("docs/locations.md", "locations"): render_locations,
    ("docs/cli.md", "budgets"): render_budgets,
    ("docs/cli.md", "exit-statuses"): render_statuses,
    ("docs/development.md", "where"): render_where,
    ("docs/testing.md", "distinct-releases"): render_distinct,
    ("docs/config.md", "migrate-example"): lambda: migrate_example_markdown(*MIGRATE_EXAMPLE),
    ("docs/config.md", "config-loaders"): loader_markdown,
    ("docs/config.md", "config-key-moves"): key_moves_markdown,
    ("docs/config.md", "mp-flag-moves"): mp_flag_moves_markdown,
    ("docs/api.md", "supported-api"): render_api,
    ("docs/api.md", "internal-modules"): render_internal,
    ("docs/api.md", "moved-modules"): render_moved,
}


#: The long description on the package index: a short readme generated from README.md, whose
#: links are relative to the repository (no public repository location is recorded to make them
#: absolute). pyproject.toml's ``readme`` names it.
PYPI_README = "docs/pypi.md"

#: The README's opening (up to its first section), as the package index shows it instead; the
#: install lines are the README's, in their published form.
PYPI_OPENING = """\
<!-- Generated from README.md by scripts/update_docs.py: edit README.md, then run it. -->
# lmcache-compat

One stable API over every LMCache release, for KV-cache connectors (vLLM, SGLang and others)
and for operators upgrading LMCache. `lmcache-compat doctor` says what the installed LMCache
and vLLM offer and whether the pair is known to break, read from package metadata and files
without importing either. The extras are `vllm`, `sglang` and `config` (PyYAML, for `config
check` and `migrate`):

<!-- install-lines -->
{install_lines}

The source distribution (sdist) holds the reference pages (`docs/`), the worked example
(`examples/connector`), the tests and their `tox.ini`.

"""

#: ``[text](target)`` with a target relative to the repository.
_RELATIVE_LINK = re.compile(r"\[([^\]]+)\]\((?!https?://|#)([^)\s]+)\)")
#: A command from a clone, with what it will be once published (the install lines' marker).
_PUBLISHED = re.compile(r"^(\s*)\S.*?\s+# from a clone; published: (.+?)\s*$")


def _off_the_repository(match: re.Match[str]) -> str:
    text, target = match.group(1), match.group(2).split("#")[0]
    if text.strip("`") == target:
        return f"`{target}` (in the sdist)"
    return f"{text} (`{target}` in the sdist)"


def render_pypi(readme: str) -> str:
    """The long description: the README's sections with the published install lines, and its
    links to repository files named as files of the source distribution."""
    opening, marked = readme[: readme.index("\n## ")], "<!-- install-lines -->\n"
    block = opening[opening.index(marked) + len(marked) :].split("\n\n")[0]
    install_lines = "\n".join(_PUBLISHED.sub(r"\1\2", line) for line in block.splitlines())
    body = readme[readme.index("\n## ") + 1 :]
    body = body[: body.index("\n## Links")] + "\n" if "\n## Links" in body else body
    body = "\n".join(_PUBLISHED.sub(r"\1\2", line) for line in body.splitlines()) + "\n"
    opening = PYPI_OPENING.format(install_lines=install_lines)
    return opening + _RELATIVE_LINK.sub(_off_the_repository, body)


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
    absent), and the generated long description (``docs/pypi.md``) if it is stale."""
    readme = render("README.md", ROOT.joinpath("README.md").read_text(encoding="utf-8"))
    pypi = ROOT / PYPI_README
    out = (
        []
        if pypi.is_file() and pypi.read_text(encoding="utf-8") == render_pypi(readme)
        else [PYPI_README]
    )
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


def _goldens(write: bool) -> list[str]:
    """doctor's golden texts (tests/report/goldens), which show the catalog too: the stale ones,
    rewritten when ``write`` (scripts/update_doctor_goldens.py writes them alone)."""
    from tools.doctor_scenarios import GOLDENS, golden_files

    stale = []
    for name, make in golden_files().items():
        path, text = GOLDENS / name, make()
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            stale.append(str(path.relative_to(ROOT)))
            if write:
                path.write_text(text, encoding="utf-8")
                print(f"updated {path.relative_to(ROOT)}")
    return stale


def main(argv: list[str]) -> int:
    if "--check" in argv:
        stale = stale_sections() + _goldens(write=False)
        if stale:
            print(f"stale generated sections: {', '.join(stale)} (run scripts/update_docs.py)")
            return 1
        return 0
    for file in dict.fromkeys(f for f, _ in SECTIONS):
        path = ROOT / file
        path.write_text(render(file, path.read_text(encoding="utf-8")), encoding="utf-8")
        print(f"updated {file}")
    readme = ROOT.joinpath("README.md").read_text(encoding="utf-8")
    ROOT.joinpath(PYPI_README).write_text(render_pypi(readme), encoding="utf-8")
    print(f"updated {PYPI_README}")
    _goldens(write=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
