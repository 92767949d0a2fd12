"""Migrating an LMCache configuration file from one release to another, keeping its comments
and key order.

:func:`plan_migration` decides, key by key: the name the source release reads it as (its own
deprecation table or code fallback), then the moves from release to release
(:mod:`~lmcache_compat.config.history`: the alias tables, the diff-only renames), each move
naming its source. A key with no safe mapping is left in place with the reason, never dropped.
:func:`migrate_text` edits the text itself (each renamed key respelled where it is written, a
reshaped value written in its place), so every other character is kept: comments, order,
quoting, anchors, line endings and a byte order mark; then it proves the rewrite: the result,
read as LMCache reads it, must hold every value unchanged but the moved ones. :func:`migrate_file`
writes atomically (:func:`write_atomic`), only over regular files, following a symlink to its
target, and never over its input unless asked. Reading needs PyYAML
(``pip install 'lmcache-compat[config]'``).
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

from lmcache_compat.config.check import Finding, check_config
from lmcache_compat.config.history import Transform, apply_transform, backward, forward, story
from lmcache_compat.config.resolver import resolve_name
from lmcache_compat.config.schema import ReleaseSchema, load_schemas, release_schema
from lmcache_compat.config.yamlread import (
    YamlDocument,
    read_config_bytes,
    read_config_file,
    require,
)
from lmcache_compat.errors import MigrationError, OutputError
from lmcache_compat.scan.sources import describe_mode

__all__ = [
    "Left",
    "MigrationPlan",
    "MigrationResult",
    "Rewrite",
    "infer_source",
    "migrate_file",
    "migrate_text",
    "plan_migration",
    "write_atomic",
]


@dataclass(frozen=True, slots=True)
class Rewrite:
    """One key renamed (and its value reshaped), with the source of each step."""

    old: str
    new: str
    line: int | None
    transforms: tuple[Transform, ...]
    sources: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Left:
    """A key left in place: the target release will not read it, and why."""

    key: str
    line: int | None
    reason: str


class PlanJSON(TypedDict):
    source: str
    target: str
    inferred: str | None
    rewrites: list[dict[str, Any]]
    left: list[dict[str, Any]]
    notes: list[str]
    findings: list[dict[str, Any]]


@dataclass(frozen=True)
class MigrationPlan:
    source: str
    target: str
    rewrites: tuple[Rewrite, ...]
    left: tuple[Left, ...]
    notes: tuple[str, ...] = ()
    #: How ``source`` was chosen when ``--from`` was not given.
    inferred: str | None = None
    #: What the target still finds in the migrated file (values it reads differently...).
    findings: tuple[Finding, ...] = field(default=())

    def same_outcome(self, other: MigrationPlan) -> bool:
        key = [(r.old, r.new, r.transforms) for r in self.rewrites]
        return key == [(r.old, r.new, r.transforms) for r in other.rewrites] and [
            x.key for x in self.left
        ] == [x.key for x in other.left]

    def to_json(self) -> PlanJSON:
        return {
            "source": self.source,
            "target": self.target,
            "inferred": self.inferred,
            "rewrites": [
                {
                    "old": r.old,
                    "new": r.new,
                    "line": r.line,
                    "transforms": [t for t in r.transforms if t != "same"],
                    "sources": list(r.sources),
                }
                for r in self.rewrites
            ],
            "left": [{"key": x.key, "line": x.line, "reason": x.reason} for x in self.left],
            "notes": list(self.notes),
            "findings": [dict(f.to_json()) for f in self.findings],
        }


def _follow(
    name: str, source: ReleaseSchema, target: ReleaseSchema
) -> tuple[str | None, tuple[Transform, ...], tuple[str, ...], str]:
    """``(final name, transforms, sources, reason it stopped)`` for ``name``, a key of
    ``source``, followed to ``target``."""
    rows = load_schemas().between(source, target)
    if source.parsed_version <= target.parsed_version:
        chain = forward(name, rows)
        if chain.final is None:
            stop = chain.stop
            release = stop.release if stop else target.version
            reason = f"removed in {release}, no replacement"
            if stop is not None and stop.hint:
                reason = f"removed in {release}, no one-to-one replacement: {stop.hint}"
            return None, (), (), reason
    else:
        chain = backward(name, rows)
        if chain.final is None:
            added = chain.added_in or source.version
            return None, (), (), f"added in {added}: LMCache {target.version} has no equivalent"
    sources = tuple(f"{m.release}: {m.old} -> {m.new} ({m.evidence})" for m in chain.moves)
    transforms = tuple(m.transform for m in chain.moves)
    return chain.final, transforms, sources, ""


def _canonical(name: str, source: ReleaseSchema) -> tuple[str | None, str | None]:
    """The key of ``source`` that ``name`` is read as, and the source of that reading."""
    out = resolve_name(source, name, "file")
    if out.key is None or out.key == name:
        return out.key, None
    how = "its code fallback" if out.rule.reads_as == "fallback" else "its deprecation table"
    return (
        out.key,
        f"{source.version}: {name} -> {out.key} (LMCache {source.version} reads it so: {how})",
    )


def plan_migration(
    doc: YamlDocument, target: ReleaseSchema, source: ReleaseSchema, inferred: str | None = None
) -> MigrationPlan:
    """What migrating ``doc`` from ``source`` to ``target`` rewrites and leaves (see module)."""
    if doc.duplicates:
        key, on = next(iter(doc.duplicates.items()))
        raise MigrationError(
            f"{doc.where}: {key!r} is on lines {', '.join(map(str, on))} (LMCache keeps line "
            f"{on[-1]}, silently): remove the others, then migrate"
        )
    rewrites: list[Rewrite] = []
    left: list[Left] = []
    notes: list[str] = []
    taken: dict[str, str] = {}  # final key -> the file key that gives it
    mapping = doc.mapping or {}
    for raw, _value in mapping.items():
        line = doc.lines.get(raw)
        if not isinstance(raw, str):
            left.append(Left(str(raw), line, "not a string key: no release reads it"))
            continue
        final, transforms, sources, reason = _plan_key(raw, source, target)
        if final is None:
            left.append(Left(raw, line, reason))
            continue
        if final in taken:
            other = taken[final]
            left.append(Left(raw, line, f"{other} also gives {final}: keep one of them"))
            continue
        if final != raw and raw in doc.merged:
            why = f"comes from a merge key (<<): rename it to {final} where the anchor is"
            left.append(Left(raw, line, why + " defined"))
            continue
        taken[final] = raw
        if final != raw:
            rewrites.append(Rewrite(raw, final, line, transforms, sources))
        alias = target.aliases.get(final)
        if alias is not None and final in target.keys and alias in target.keys:
            notes.append(
                f"{final} stays (a key of LMCache {target.version}); its alias table also maps "
                f"it to {alias}, which the loader does not apply: set {alias} too if {final} "
                f"meant that"
            )
    renamed = {r.old: r.new for r in rewrites}
    kept = {x.key for x in left}
    migrated = {
        renamed.get(k, k): v for k, v in mapping.items() if isinstance(k, str) and k not in kept
    }
    lines = {renamed.get(k, k): n for k, n in doc.lines.items() if isinstance(k, str)}
    findings = tuple(f for f in check_config(migrated, target, lines=lines) if f.kind == "retyped")
    return MigrationPlan(
        source.version,
        target.version,
        tuple(rewrites),
        tuple(left),
        tuple(notes),
        inferred,
        findings,
    )


def _plan_key(
    name: str, source: ReleaseSchema, target: ReleaseSchema
) -> tuple[str | None, tuple[Transform, ...], tuple[str, ...], str]:
    canonical, how = _canonical(name, source)
    if canonical is None:
        if name in target.keys:
            return name, (), (), ""
        return (
            None,
            (),
            (),
            f"LMCache {source.version} does not read it either: {story(name, target)}",
        )
    final, transforms, sources, reason = _follow(canonical, source, target)
    if final is None:
        return None, (), (), reason
    return final, transforms, ((how,) if how else ()) + sources, ""


def _accepts(release: ReleaseSchema, keys: list[str], strict: bool) -> bool:
    for key in keys:
        out = resolve_name(release, key, "file")
        if out.key is None or (strict and out.key != key):
            return False
    return True


def infer_source(doc: YamlDocument, target: ReleaseSchema) -> tuple[ReleaseSchema, str]:
    """The release the file was written for: the only release that reads every key as it is
    written, or any of several that all migrate it the same way (said so); otherwise a
    :class:`~lmcache_compat.errors.MigrationError` asking for ``--from``."""
    rows = load_schemas().rows
    # a key no release reads says nothing about which release the file was written for
    keys = [
        k
        for k in (doc.mapping or {})
        if isinstance(k, str) and any(resolve_name(r, k, "file").key for r in rows)
    ]
    candidates = [r for r in rows if _accepts(r, keys, strict=True)] or [
        r for r in rows if _accepts(r, keys, strict=False)
    ]
    if not candidates:
        raise MigrationError(
            f"{doc.where}: no LMCache release reads every key of this file: pass --from VERSION "
            "(the release it was written for)"
        )
    if len(candidates) == 1:
        only = candidates[0]
        return only, f"LMCache {only.version} is the only release that reads every key"
    plans = [plan_migration(doc, target, r) for r in candidates]
    if all(p.same_outcome(plans[0]) for p in plans):
        newest = candidates[-1]
        return newest, (
            f"{len(candidates)} releases ({candidates[0].version} ... {newest.version}) read "
            f"every key, and all migrate it the same way: from {newest.version}"
        )
    raise MigrationError(
        f"{doc.where}: {len(candidates)} releases read every key ({candidates[0].version} ... "
        f"{candidates[-1].version}) and migrate it differently: pass --from VERSION"
    )


def _reshape(value: Any, transforms: tuple[Transform, ...]) -> Any:
    for transform in transforms:
        value = apply_transform(transform, value)
    return value


def migrate_text(text: str, plan: MigrationPlan, where: str = "<text>") -> str:
    """``text`` with ``plan``'s rewrites applied as edits of the text itself: each renamed key
    is respelled where it is written (its quoting kept), a reshaped value is written in flow
    style in its place, and the spaces before a comment on that line keep the comment's
    column where they can. Every other character is kept as it was: comments, key order,
    quoting, anchors, line endings (``\\r\\n`` included) and a byte order mark. The result is
    proven against the original as LMCache reads both; unchanged text when nothing moves."""
    if not plan.rewrites:
        return text
    doc = read_config_bytes(text.encode("utf-8"), where)
    mapping = doc.mapping or {}
    edits: list[tuple[int, int, str]] = []
    for rw in plan.rewrites:
        span = doc.spans.get(rw.old)
        if span is None:
            raise MigrationError(
                f"{where}: {rw.old} is not written in the top-level mapping itself: nothing "
                "written (please report this file)"
            )
        key_start, key_end, value_start, value_end = span
        line_edits = [(key_start, key_end, _respell(text[key_start:key_end], rw.old, rw.new))]
        value = mapping[rw.old]
        reshaped = _reshape(value, rw.transforms)
        end = value_end if value_start >= key_end else key_end
        if reshaped is not value:
            edit = _value_edit(text, key_end, (value_start, value_end), value, reshaped)
            line_edits.append(edit)
            end = edit[1]
        line_edits += _keep_comment_column(text, end, line_edits)
        edits += line_edits
    result = _apply(text, edits, where)
    _prove(text, result, plan, where)
    return result


_QUOTES = ("'", '"')
#: A scalar that means the same inside a flow collection as in the block context.
_FLOW_SAFE = re.compile(r"[-+.\w]+|'[^'\n]*'|\"[^\"\\\n]*\"")
_ALIAS = re.compile(r"[ \t]*:[ \t]*(\*[^\s,\[\]{}]+)")


def _respell(source: str, old: str, new: str) -> str:
    """A key's source text (``old``, ``"old"``, ``&a old``...) with the name ``new`` instead,
    written the same way."""
    for q in ("", *_QUOTES):
        if source.endswith(f"{q}{old}{q}"):
            return source[: len(source) - len(old) - 2 * len(q)] + f"{q}{new}{q}"
    return new  # an escaped spelling: the plain name (the proof reads it back)


def _flow_text(value: Any) -> str:
    """``value`` as one line of YAML flow text, as PyYAML writes it."""
    yaml = require("yaml", "rewriting a YAML configuration")
    out: str = yaml.safe_dump(value, default_flow_style=True, width=1 << 30, allow_unicode=True)
    return out.split("\n", 1)[0]


def _value_edit(
    text: str, key_end: int, span: tuple[int, int], value: Any, reshaped: Any
) -> tuple[int, int, str]:
    """The edit that writes ``reshaped`` (a one-element list of ``value``, or ``[]``) where
    ``value`` is written (``span``); an alias (``*name``) stays an alias inside the list."""
    start, end = span
    if start < key_end:  # the value is an alias: its node is the anchor's, written earlier
        found = _ALIAS.match(text, key_end)
        if found is None:
            return key_end, key_end, ""  # nothing safe to edit: the proof refuses the result
        start, end = found.span(1)
    source = text[start:end]
    if reshaped == [] and isinstance(reshaped, list):
        return start, end, "[]"
    if isinstance(reshaped, list) and len(reshaped) == 1 and reshaped[0] is value:
        inner = source if source.startswith("*") or _FLOW_SAFE.fullmatch(source) else None
        return start, end, f"[{inner if inner is not None else _flow_text(value)}]"
    return start, end, _flow_text(reshaped)


def _keep_comment_column(
    text: str, end: int, edits: list[tuple[int, int, str]]
) -> list[tuple[int, int, str]]:
    """Spaces before a comment that follows the edited key and value on the same line, resized
    so the comment stays in its column (at least one space is kept)."""
    found = re.compile(r"[ \t]+(?=#)").match(text, end)
    if found is None:
        return []
    grown = sum(len(new) - (b - a) for a, b, new in edits)
    spaces = found.group()
    if grown == 0 or "\t" in spaces:
        return []
    return [(found.start(), found.end(), " " * max(1, len(spaces) - grown))]


def _apply(text: str, edits: list[tuple[int, int, str]], where: str) -> str:
    out = text
    last = len(text) + 1
    for start, end, new in sorted(edits, key=lambda e: e[0], reverse=True):
        if end > last:
            raise MigrationError(f"{where}: overlapping rewrites: nothing written (please report)")
        out = out[:start] + new + out[end:]
        last = start
    return out


def _prove(before: str, after: str, plan: MigrationPlan, where: str) -> None:
    old = read_config_bytes(before.encode(), where).mapping or {}
    new = read_config_bytes(after.encode(), f"{where} (migrated)").mapping or {}
    moved = {r.old: r for r in plan.rewrites}
    expected = {
        (moved[k].new if k in moved else k): (_reshape(v, moved[k].transforms) if k in moved else v)
        for k, v in old.items()
    }
    if new != expected or list(new) != list(expected):
        differ = sorted(str(k) for k in set(new) | set(expected) if new.get(k) != expected.get(k))
        raise MigrationError(
            f"{where}: the rewrite would change {', '.join(differ) or 'the key order'} beyond "
            "the planned moves: nothing written (please report this file)"
        )


@dataclass(frozen=True)
class MigrationResult:
    plan: MigrationPlan
    text: str
    #: Where it was written (``None``: not written; the caller prints ``text``).
    written: str | None = None


def _destination(path: Path) -> Path:
    """The file a write to ``path`` replaces: a symlink's target (the link itself is kept),
    which must be a regular file or not exist yet. Anything else is refused before a byte is
    written: a directory, a FIFO, a device (``-o /dev/null`` would replace the machine's
    ``/dev/null``), a socket, a link loop."""
    real = Path(os.path.realpath(path))
    try:
        mode = os.stat(real).st_mode
    except FileNotFoundError:
        return real  # a new file (its directory must exist: checked when it is created)
    except OSError as exc:
        reason = "a symlink loop" if exc.errno == errno.ELOOP else (exc.strerror or str(exc))
        raise MigrationError(f"{path}: {reason}: nothing written") from None
    if stat.S_ISDIR(mode):
        raise MigrationError(
            f"{path}: a directory: give the file to write in it (-o {path / 'NAME.yaml'}); "
            "nothing written"
        )
    if not stat.S_ISREG(mode):
        raise MigrationError(
            f"{path}: {describe_mode(mode)}, not a regular file: migrate writes only regular "
            "files (a new copy renamed over the old one); print to standard output instead (no "
            "-o) and redirect it; nothing written"
        )
    return real


def write_atomic(path: Path, text: str, mode_from: Path | None = None) -> Path:
    """Write ``text`` (as UTF-8 bytes, exactly: its line endings and byte order mark kept) to
    ``path`` through a temporary file in the destination's own directory, flushed to disk,
    then renamed over it: a reader, a crash or a Ctrl-C sees the old file or the new one,
    never half of one, and never a temporary file left behind. A symlink is followed (its
    target is replaced; the link stays); only a regular file is ever replaced. A failure to
    write is one :class:`~lmcache_compat.errors.OutputError` line (exit status 7). Returns the
    file written."""
    dest = _destination(path)
    data = text.encode("utf-8")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
    except OSError as exc:
        raise OutputError(
            f"{path}: cannot write into {dest.parent} ({exc.strerror or exc}): nothing written"
        ) from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        source = dest if dest.exists() else mode_from
        if source is not None and source.exists():
            os.chmod(tmp, stat.S_IMODE(source.stat().st_mode))
        os.replace(tmp, dest)
    except BaseException as exc:  # Ctrl-C included: the destination is as it was
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise OutputError(
                f"{path}: cannot write ({exc.strerror or exc}): left as it was"
            ) from None
        raise
    return dest


def migrate_file(
    path: str | os.PathLike[str],
    to: str | ReleaseSchema,
    *,
    source: str | ReleaseSchema | None = None,
    out: str | os.PathLike[str] | None = None,
    in_place: bool = False,
) -> MigrationResult:
    """Migrate the file ``path`` to release ``to`` (``source``: the release it was written for;
    inferred when ``None``). Written to ``out``, or over ``path`` with ``in_place``, atomically
    (:func:`write_atomic`: a symlink's target is written and the link kept; only regular files
    are replaced); otherwise not written (the result's ``text``). ``out`` naming the input
    itself (through a link too) without ``in_place`` is refused."""
    path = Path(path)
    target = release_schema(to)
    doc = read_config_file(path)
    if source is None:
        found, how = infer_source(doc, target)
    else:
        found, how = release_schema(source), None
    plan = plan_migration(doc, target, found, how)
    text = migrate_text(doc.text, plan, str(path))
    dest: Path | None = path if in_place else (Path(out) if out is not None else None)
    if dest is None:
        return MigrationResult(plan, text)
    if not in_place and _same_file(dest, path):
        raise MigrationError(f"{dest}: -o names the input file: pass --in-place to overwrite it")
    written = write_atomic(dest, text, mode_from=path)
    return MigrationResult(plan, text, f"{dest} -> {written}" if dest.is_symlink() else str(dest))


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)
