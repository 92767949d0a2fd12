"""Markdown tables of the configuration across releases, from the shipped schema (the
generated sections of ``docs/config.md``; ``scripts/update_docs.py`` writes them)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

from lmcache_compat.config.history import moves_between
from lmcache_compat.config.resolver import resolve_name
from lmcache_compat.config.schema import ReleaseSchema, load_schemas
from lmcache_compat.upstream.locations import MP_COMMANDS

__all__ = [
    "key_moves_markdown",
    "loader_markdown",
    "migrate_example_markdown",
    "mp_flag_moves_markdown",
]


def _ranges(
    rows: Sequence[ReleaseSchema], cells: Callable[[ReleaseSchema], tuple[str, ...]]
) -> list[tuple[str, tuple[str, ...]]]:
    """Consecutive releases with the same cells, as ``("A ... B", cells)``."""
    out = []
    for value, group in itertools.groupby(rows, key=cells):
        members = list(group)
        first, last = members[0].version, members[-1].version
        out.append((first if first == last else f"{first} ... {last}", value))
    return out


def _names(names: Sequence[str]) -> str:
    return ", ".join(f"`{n}`" for n in names) or "-"


def _source(evidence: str) -> str:
    if "alias table" in evidence:
        return "alias table" + (", not applied" if "does not apply" in evidence else "")
    return "diff"


def key_moves_markdown() -> str:
    """Per release: the keys it added, renamed (and the source of the rename) and removed."""
    rows = load_schemas().rows
    lines = [
        "| release | keys | renamed (source) | removed (no replacement) | added |",
        "|---|---|---|---|---|",
        f"| {rows[0].version} | {len(rows[0].keys)} | - | - | (first release) |",
    ]
    for a, b in itertools.pairwise(rows):
        moves = moves_between(a, b)
        renamed = [
            f"`{m.old}` -> `{m.new}` ({_source(m.evidence)})" for m in moves.values() if m.new
        ]
        removed = [m.old for m in moves.values() if m.new is None]
        new_names = {m.new for m in moves.values() if m.new}
        added = [k for k in b.keys if k not in a.keys and k not in new_names]
        if not (renamed or removed or added):
            continue
        lines.append(
            f"| {b.version} | {len(b.keys)} | {'; '.join(renamed) or '-'} | {_names(removed)} "
            f"| {_names(added)} |"
        )
    return "\n".join(lines) + "\n"


def _alias_cells(schema: ReleaseSchema) -> tuple[str, ...]:
    applied, listed = [], []
    for old, new in schema.aliases.items():
        key = resolve_name(schema, old).key
        if key == new:
            applied.append(f"`{old}` -> `{new}`")
        elif key == old:
            listed.append(f"`{old}` (still a key: read as itself)")
        else:
            listed.append(f"`{old}`")
    fallbacks = [f"`{o}` -> `{n}` (code fallback)" for o, n in schema.file_fallbacks.items()]
    facts = schema.loader
    return (
        facts.alias_rule,
        "; ".join([*applied, *fallbacks]) or "-",
        ", ".join(listed) or "-",
        facts.unknown_file_key,
        {"raw": "as written", "converted": "converted"}[facts.file_values],
        {"raise": "the load fails", "none": "a warning, None", "raw": "-"}[facts.conversion_error],
        {"overrides": "override the file", "ignored": "not read", "unknown": "?"}[
            facts.env_with_file
        ],
        facts.empty_file,
    )


def loader_markdown() -> str:
    """What each release's loader does (the loader facts), grouped by ranges of releases."""
    lines = [
        "| releases | alias rule | old names it maps | listed in its alias table, not applied "
        "| unknown key | file values | a value its converter rejects | `LMCACHE_<KEY>` once a "
        "file is named | empty file |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for span, cells in _ranges(load_schemas().rows, _alias_cells):
        lines.append(f"| {span} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def mp_flag_moves_markdown() -> str:
    """Per release and MP command line: flags removed, added, and defaults changed."""
    names = {c.key: c.command for c in MP_COMMANDS}
    lines = [
        "| release | command | removed | added | default changed |",
        "|---|---|---|---|---|",
    ]
    for a, b in itertools.pairwise(load_schemas().rows):
        for key, flags in b.mp_commands.items():
            if key != "http_server" and flags == b.mp_commands.get("http_server"):
                continue  # the same flags as http_server (lmcache server)
            old = a.mp_commands.get(key)
            if old is None:
                lines.append(
                    f"| {b.version} | `{names[key]}` | - | (new: {len(flags)} flags) | - |"
                )
                continue
            removed = [f for f in old if f not in flags]
            added = [f for f in flags if f not in old]
            changed = [
                f"`{f}` {old[f].default!r} -> {flags[f].default!r}"
                for f in flags
                if f in old and old[f].default != flags[f].default
            ]
            if removed or added or changed:
                lines.append(
                    f"| {b.version} | `{names[key]}` | {_names(removed)} | {_names(added)} | "
                    f"{'; '.join(changed) or '-'} |"
                )
    return "\n".join(lines) + "\n"


def migrate_example_markdown(example: str, source: str, target: str) -> str:
    """``config migrate`` of the text ``example`` from release ``source`` to ``target``: the
    file before, after, and the report."""
    from lmcache_compat.config.migrate import migrate_text, plan_migration  # lazy: PyYAML
    from lmcache_compat.config.yamlread import read_config_bytes  # lazy: PyYAML

    schemas = load_schemas()
    before = f"lmcache-{source}.yaml"
    doc = read_config_bytes(example.encode(), before)
    plan = plan_migration(doc, schemas.row(target), schemas.row(source))
    after = migrate_text(example, plan)
    report = []
    for r in plan.rewrites:
        report += [f"line {r.line}: {r.old} -> {r.new}", *(f"    source: {s}" for s in r.sources)]
    report += [f"line {x.line}: {x.key} LEFT IN PLACE: {x.reason}" for x in plan.left]
    return (
        "\n".join(
            [
                f"Before (`{before}`):",
                "",
                "```yaml",
                example.rstrip(),
                "```",
                "",
                f"`lmcache-compat config migrate {before} --from {source} --to {target} -o "
                f"lmcache-{target}.yaml` writes:",
                "",
                "```yaml",
                after.rstrip(),
                "```",
                "",
                "and reports"
                + (
                    f" (exit status 1: a key is left that {target} will not read):"
                    if plan.left
                    else ":"
                ),
                "",
                "```",
                *report,
                "```",
            ]
        )
        + "\n"
    )
