"""Checking an LMCache configuration against a release: what it would ignore, rename or read
differently, each with the fix.

:func:`check_config` judges a mapping (the file's top level) and :func:`check_file` a file read
as LMCache reads it (line numbers, duplicate keys); the environment's ``LMCACHE_*`` variables
and the configuration a process would load are :mod:`~lmcache_compat.config.envcheck`'s
(:func:`~lmcache_compat.config.envcheck.check_environment`,
:func:`~lmcache_compat.config.envcheck.check_active`). Every judgement comes from
the release's own schema and the loader model (:mod:`~lmcache_compat.config.resolver`); nothing
of LMCache is imported.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypedDict

from lmcache_compat.config.history import story
from lmcache_compat.config.resolver import CAUGHT, NameOutcome, convert, judge_value, resolve_name
from lmcache_compat.config.schema import ReleaseSchema, load_schemas, schema_for
from lmcache_compat.errors import ConfigFileError

__all__ = [
    "Finding",
    "FindingJSON",
    "check_config",
    "check_file",
    "release_schema",
]

Kind = Literal["ignored", "renamed", "retyped", "removed"]
Effect = Literal["dropped", "fails", "changed", "read"]


class FindingJSON(TypedDict):
    key: str
    line: int | None
    kind: str
    effect: str
    source: str
    target: str
    detail: str
    fix: str


@dataclass(frozen=True, slots=True)
class Finding:
    """One thing a release would do with a configuration that its author did not mean.

    ``kind``: ``ignored`` (the release drops the value: an unknown key, a duplicate that loses,
    a variable nothing reads), ``removed`` (a key of an earlier release that this one no longer
    reads), ``renamed`` (read under a new name, with a deprecation warning), ``retyped`` (read,
    but parsed into something else, or rejected). ``effect``: ``dropped`` (the value has no
    effect), ``fails`` (the loader raises: LMCache does not start), ``changed`` (read as
    something else), ``read`` (read as meant, under another name). ``fix``: the new name, or
    "removed in X, no replacement", or what to write.
    """

    key: str
    line: int | None
    kind: Kind
    target: str
    fix: str
    effect: Effect = "dropped"
    detail: str = ""
    source: Literal["file", "env"] = "file"

    @property
    def ignored(self) -> bool:
        """Whether the value is lost or the load fails (what makes ``config check`` exit 1)."""
        return self.effect in ("dropped", "fails")

    def to_json(self) -> FindingJSON:
        return {
            "key": self.key,
            "line": self.line,
            "kind": self.kind,
            "effect": self.effect,
            "source": self.source,
            "target": self.target,
            "detail": self.detail,
            "fix": self.fix,
        }

    def __str__(self) -> str:
        where = f"line {self.line}: " if self.line else ""
        return f"{where}{self.key}: {self.kind} ({self.detail}); fix: {self.fix}"


def release_schema(version: str | ReleaseSchema | None) -> ReleaseSchema:
    """A schema for a version (``None``: the installed release)."""
    return version if isinstance(version, ReleaseSchema) else schema_for(version)


def _was_key_before(name: str, target: ReleaseSchema) -> bool:
    return any(
        name in r.keys and r.parsed_version < target.parsed_version for r in load_schemas().rows
    )


def _dropped(name: str, out: NameOutcome, target: ReleaseSchema, line: int | None) -> Finding:
    deprecated = target.deprecated.get(name)
    alias = target.aliases.get(name)
    if deprecated is not None:
        detail = f"deprecated: LMCache {target.version} logs {deprecated!r} and drops the value"
    elif alias is not None and out.rule.alias_rule == "deprecated-only":
        detail = (
            f"LMCache {target.version}'s alias table names {alias}, but its loader maps only "
            "deprecated names: logged as an unknown key and dropped"
        )
    elif out.log:
        detail = f"LMCache {target.version} logs 'Unknown configuration key' and drops it"
    else:
        detail = f"LMCache {target.version} never reads it (no warning)"
    kind: Kind = "removed" if deprecated or _was_key_before(name, target) else "ignored"
    return Finding(name, line, kind, target.version, story(name, target), "dropped", detail)


def _failure(target: ReleaseSchema, error: str) -> Effect:
    """What a converter exception does in this release's file loader."""
    style = target.loader.conversion_error
    return "dropped" if style == "none" and error in CAUGHT else "fails"


def _value_finding(
    target: ReleaseSchema, name: str, key: str, value: Any, line: int | None
) -> Finding | None:
    spec = target.keys[key]
    raw = target.loader.file_values == "raw" and spec.converter is None
    conversion = convert(spec.converter, value)
    verdict = judge_value(spec, value, conversion, raw)
    if verdict is None:
        return None
    found, why = verdict
    effect: Effect = found
    if conversion.error is not None:
        effect = _failure(target, conversion.error)
        why += (
            ": the load fails (LMCache does not start)"
            if effect == "fails"
            else f": LMCache {target.version} warns and uses None"
        )
    fix = why.rsplit("(", 1)[-1].rstrip(")") if why.endswith(")") else f"write a {spec.type}"
    return Finding(name, line, "retyped", target.version, fix, effect, why)


def _ec_findings(
    target: ReleaseSchema, name: str, value: Any, line: int | None
) -> list[Finding] | None:
    """Keys of the encoder-cache overrides (``ec_<key>``, an ``ec:`` mapping): ``None`` when
    ``name`` is not one."""
    ec = target.loader.ec
    if ec is None or not isinstance(name, str):
        return None
    if name.lower() == ec.nested_key and isinstance(value, dict):
        names = [(str(k), f"{name}.{k}") for k in value]
    elif name.lower().startswith(ec.file_prefix):
        names = [(name.lower()[len(ec.file_prefix) :], name)]
    else:
        return None
    out = []
    for inner, shown in names:
        if resolve_name(target, inner, alias_rule="always").key is None:
            out.append(
                Finding(
                    shown,
                    line,
                    "ignored",
                    target.version,
                    story(inner, target),
                    "dropped",
                    f"LMCache {target.version}'s EC overrides log 'Unknown EC config key'",
                )
            )
    return out


def check_config(
    mapping: Mapping[Any, Any],
    version: str | ReleaseSchema | None = None,
    *,
    lines: Mapping[Any, int] | None = None,
) -> list[Finding]:
    """What release ``version`` (``None``: the installed one) does with the configuration
    ``mapping`` (a file's top level, in file order): keys it ignores, renames or parses
    differently, each with the fix. ``lines``: key -> its line in the file."""
    target = release_schema(version)
    lines = lines or {}
    findings: list[Finding] = []
    #: key -> (name, line, is a fallback): who sets it last.
    setters: dict[str, tuple[str, int | None, bool]] = {}
    for raw_name, value in mapping.items():
        line = lines.get(raw_name)
        name = raw_name if isinstance(raw_name, str) else str(raw_name)
        ec = _ec_findings(target, name, value, line)
        if ec is not None:
            findings += ec
            continue
        out = resolve_name(target, name, "file")
        if out.key is None:
            findings.append(_dropped(name, out, target, line))
            continue
        fallback = out.rule.reads_as == "fallback"
        if out.effect == "renamed":
            how = "falls back to it when unset" if fallback else "maps it, with a warning"
            findings.append(
                Finding(
                    name,
                    line,
                    "renamed",
                    target.version,
                    f"use {out.key}",
                    "read",
                    f"LMCache {target.version} reads it as {out.key} ({how})",
                )
            )
        earlier = setters.get(out.key)
        if earlier is not None and not (fallback and not earlier[2]):
            findings.append(_shadowed(target, earlier[:2], (name, line), out.key))
        elif earlier is not None:  # a fallback never overrides the key itself
            findings.append(_shadowed(target, (name, line), earlier[:2], out.key))
            continue
        setters[out.key] = (name, line, fallback)
        finding = _value_finding(target, name, out.key, value, line)
        if finding is not None:
            findings.append(finding)
    return sorted(findings, key=lambda f: f.line or 0)


def _shadowed(
    target: ReleaseSchema, lost: tuple[str, int | None], wins: tuple[str, int | None], key: str
) -> Finding:
    where = f"line {wins[1]} ({wins[0]})" if wins[1] else wins[0]
    return Finding(
        lost[0],
        lost[1],
        "ignored",
        target.version,
        f"keep one of {lost[0]} and {wins[0]}",
        "dropped",
        f"{where} also sets {key} and wins",
    )


def check_file(
    path: str | os.PathLike[str], version: str | ReleaseSchema | None = None
) -> list[Finding]:
    """:func:`check_config` over a file read as LMCache reads it (PyYAML ``safe_load``), with
    line numbers; the earlier lines of a duplicate key are findings too (the last one wins)."""
    from lmcache_compat.config.yamlread import read_config_file  # lazy: optional dependency

    target = release_schema(version)
    doc = read_config_file(path)
    if doc.mapping is None:
        if target.loader.empty_file == "fails":
            raise ConfigFileError(
                f"{path}: empty: LMCache {target.version}'s loader fails on an empty file "
                "(AttributeError: 'NoneType' object has no attribute 'get'): write at least one key"
            )
        return []
    findings = check_config(doc.mapping, target, lines=doc.lines)
    for key, seen in doc.duplicates.items():
        for line in seen[:-1]:
            findings.append(
                Finding(
                    str(key),
                    line,
                    "ignored",
                    target.version,
                    f"remove one of lines {', '.join(map(str, seen))}",
                    "dropped",
                    f"also on line {seen[-1]}, which wins (PyYAML keeps the last duplicate, "
                    "silently)",
                )
            )
    return sorted(findings, key=lambda f: f.line or 0)
