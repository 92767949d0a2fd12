"""Checking an LMCache configuration against a release: what it would ignore, rename or read
differently, each with the fix. One module answers it for a file, for the environment and for
the configuration a process would load.

:func:`check_config` judges a mapping (the file's top level) and :func:`check_file` a file read
as LMCache reads it (line numbers, duplicate keys); :func:`check_environment` the environment's
``LMCACHE_*`` variables, and :func:`check_active` the configuration a process would load (its
file, then the variables on top where the release applies them). Every judgement comes from
the release's own schema and the loader model (:mod:`~lmcache_compat.config.resolver`); the
fixes from where each key lived (:mod:`~lmcache_compat.config.history`); nothing of LMCache is
imported.

A variable counts as read when the release's engine configuration reads it (``LMCACHE_<KEY>``,
an alias name, a code fallback), when some other part of the release spells it
(``LMCACHE_CONFIG_FILE``, ``LMCACHE_LOG_LEVEL``, the MP coordinator's...), or when it is under a
prefix the release reads (the EC overrides' ``LMCACHE_EC_``, the cache controller's); any other
``LMCACHE_*`` variable is never read, silently.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypedDict

from lmcache_compat.config.history import story, was_key_before
from lmcache_compat.config.resolver import (
    CAUGHT,
    NameOutcome,
    base_type,
    convert,
    judge_value,
    resolve_name,
)
from lmcache_compat.config.schema import ReleaseSchema, release_schema
from lmcache_compat.errors import ConfigFileError

__all__ = [
    "OWN_PREFIX",
    "Finding",
    "FindingJSON",
    "check_active",
    "check_config",
    "check_environment",
    "check_file",
]

Kind = Literal["ignored", "renamed", "retyped", "removed", "missing", "unreadable"]
Effect = Literal["dropped", "fails", "changed", "read", "unchecked"]


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
    but parsed into something else, or rejected), ``missing`` (the file variable names a file
    that does not exist), ``unreadable`` (the file variable names a file lmcache-compat cannot
    read: doctor's finding where ``config check`` exits 5 or 6). ``effect``: ``dropped`` (the
    value has no effect), ``fails`` (the loader raises: LMCache does not start), ``changed``
    (read as something else), ``read`` (read as meant, under another name), ``unchecked``
    (what the release does with it is not known: a file over a budget). ``fix``: the new name,
    or "removed in X, no replacement", or what to write.
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


def _schema(version: str | ReleaseSchema | None) -> ReleaseSchema:
    """:func:`release_schema`, without a call into the schema module for a schema already
    read (``check_file`` hands its own to :func:`check_config`)."""
    return version if isinstance(version, ReleaseSchema) else release_schema(version)


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
    kind: Kind = "removed" if deprecated or was_key_before(name, target) else "ignored"
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
    conversion = convert(spec.converter, value, f"{name} (line {line})" if line else name)
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
    fix = (
        why.rsplit("(", 1)[-1].rstrip(")")
        if why.endswith(")")
        else f"write {'an' if str(spec.type)[:1] in 'aeiou' else 'a'} {spec.type}"
    )
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
    target = _schema(version)
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

    target = _schema(version)
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


# --- the environment, and the configuration a process would load ------------------------------

#: lmcache-compat's own variables (``LMCACHE_COMPAT_SGLANG_MODE``, the test tiers' settings):
#: they share LMCache's prefix but are read by this library, so none is reported as dropped
#: unless the release itself reads that name.
OWN_PREFIX = "LMCACHE_COMPAT_"


def _env_key(target: ReleaseSchema, var: str) -> tuple[str, str] | None:
    """``(how, name)`` for a variable the engine configuration reads: ``key``, ``alias`` or
    ``fallback`` and the configuration name it stands for."""
    prefix = target.loader.env_prefix
    if not prefix or not var.startswith(prefix):
        return None
    name = var[len(prefix) :].lower()
    if name in target.keys and target.keys[name].env == var:
        return "key", name
    if name in target.aliases and target.loader.env_reads_aliases:
        return "alias", name
    if name in target.env_fallbacks:
        return "fallback", name
    return None


def _read_elsewhere(target: ReleaseSchema, var: str) -> str | None:
    """Who else reads ``var``: a literal name, a prefix (the EC overrides, the controller)."""
    if var in target.env_names:
        return "read by LMCache itself (not a configuration key)"
    ec = target.loader.ec
    if ec is not None and var.startswith(ec.env_prefix):
        inner = var[len(ec.env_prefix) :].lower()
        if resolve_name(target, inner, alias_rule="always").key is not None:
            return "read by the EC overrides"
        return None
    controller = target.controller
    if controller is not None and controller.env_prefix and var.startswith(controller.env_prefix):
        if var[len(controller.env_prefix) :].lower() in controller.keys:
            return "read by the cache controller's configuration"
        return None
    for prefix in target.env_prefixes:
        owned = (ec and prefix == ec.env_prefix) or (controller and prefix == controller.env_prefix)
        if var.startswith(prefix) and not owned:
            return f"read under the prefix {prefix}"
    return None


def _env_story(target: ReleaseSchema, var: str) -> str:
    prefix = target.loader.env_prefix or ""
    if not var.startswith(prefix):
        return "not read by LMCache"
    name = var[len(prefix) :].lower()
    text = story(name, target)
    if text.startswith("use "):
        new, _, rest = text[len("use ") :].partition(" ")
        return f"set {target.env_name(new)} instead {rest}".rstrip()
    if "not a key of any" in text:
        return f"unset it: no part of LMCache {target.version} reads it"
    return text.replace("remove the line", "unset it").replace("remove it:", "unset it:")


def check_environment(
    environ: Mapping[str, str],
    version: str | ReleaseSchema | None = None,
    *,
    config_file: bool | None = None,
) -> list[Finding]:
    """What release ``version`` does with the ``LMCACHE_*`` variables of ``environ``.
    ``config_file``: whether a configuration file is named (default: whether ``environ`` sets
    the release's file variable); releases that read no variable once a file is named
    (0.3.0 ... 0.3.5) then ignore every ``LMCACHE_<KEY>``."""
    target = _schema(version)
    prefix = target.loader.env_prefix or "LMCACHE_"
    file_env = target.loader.config_file_env
    if config_file is None:
        config_file = bool(file_env and environ.get(file_env))
    findings: list[Finding] = []
    setters: dict[str, tuple[str, str]] = {}  # key -> (variable, how)
    for var in sorted(environ):
        if not var.startswith(prefix) or var == file_env:
            continue
        found = _env_key(target, var)
        if found is None:
            if _read_elsewhere(target, var) is None and not var.startswith(OWN_PREFIX):
                findings.append(_env_dropped(target, var))
            continue
        how, name = found
        if config_file and target.loader.env_with_file == "ignored":
            detail = (
                f"LMCache {target.version} reads no {prefix}<KEY> variable once {file_env} names "
                "a file"
            )
            findings.append(
                _env(var, "ignored", target, f"put {name} in the file instead", detail=detail)
            )
            continue
        out = resolve_name(target, name, "env")
        if out.key is None:
            finding = _dropped(name, out, target, None)
            fix = _env_story(target, var)
            findings.append(_env(var, finding.kind, target, fix, detail=finding.detail))
            continue
        if out.effect == "renamed":
            fix = f"set {target.env_name(out.key)} instead"
            detail = f"LMCache {target.version} reads it as {out.key}"
            findings.append(_env(var, "renamed", target, fix, effect="read", detail=detail))
        findings += _env_precedence(target, setters, out.key, var, how)
        value = _env_value_finding(target, var, out.key, environ[var], config_file)
        if value is not None:
            findings.append(value)
    return findings


def _env(
    var: str,
    kind: Kind,
    target: ReleaseSchema,
    fix: str,
    *,
    effect: Effect = "dropped",
    detail: str = "",
) -> Finding:
    return Finding(var, None, kind, target.version, fix, effect, detail, "env")


def _env_precedence(
    target: ReleaseSchema, setters: dict[str, tuple[str, str]], key: str, var: str, how: str
) -> list[Finding]:
    """Old and new variables for one key: the alias wins (the loaders read the alias names
    after the keys' own); a fallback never wins over the key."""
    earlier = setters.get(key)
    order = {"fallback": 0, "key": 1, "alias": 2}
    if earlier is None:
        setters[key] = (var, how)
        return []
    loser, winner = (earlier[0], var) if order[how] >= order[earlier[1]] else (var, earlier[0])
    setters[key] = (winner, how if winner == var else earlier[1])
    fix = f"unset one of {loser} and {winner}"
    return [_env(loser, "ignored", target, fix, detail=f"{winner} also sets {key} and wins")]


def _env_dropped(target: ReleaseSchema, var: str) -> Finding:
    fix = _env_story(target, var)
    prefix = target.loader.env_prefix or ""
    name = var[len(prefix) :].lower()
    kind: Kind = "removed" if was_key_before(name, target) else "ignored"
    return _env(var, kind, target, fix, detail=f"no part of LMCache {target.version} reads it")


def _unquote(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


def _env_value_finding(
    target: ReleaseSchema, var: str, key: str, text: str, config_file: bool
) -> Finding | None:
    spec = target.keys[key]
    value = _unquote(text) if target.loader.env_unquotes else text
    if spec.env_converter is None:
        if target.style == "table" and config_file:
            detail = (
                f"LMCache {target.version} has no converter for {key}: reading the variable "
                "over a file raises KeyError('env_converter')"
            )
            fix = f"set {key} in the file instead"
            return _env(var, "retyped", target, fix, effect="fails", detail=detail)
        return None
    conversion = convert(spec.env_converter, value, var)
    verdict = judge_value(spec, value, conversion, raw_mode=False, env=True)
    if verdict is None:
        return None
    found, why = verdict
    effect: Effect = found
    if conversion.error is not None:
        effect = "fails" if target.style == "fields" else "dropped"
        why += ": the load fails" if effect == "fails" else ": a warning, and the value is not set"
        if "list" in (spec.type or "") and value.lstrip().startswith("["):
            why += " (lists are comma-separated, not JSON)"
    elif "list" in (spec.type or "") and value.lstrip().startswith("["):
        why += " (lists are comma-separated, not JSON)"
    return _env(var, "retyped", target, _env_fix(var, spec.type), effect=effect, detail=why)


def _env_fix(var: str, declared: str | None) -> str:
    base, _ = base_type(declared)
    if base == "bool":
        return f"{var}=true or {var}=false"
    if base.startswith("list["):
        return f"{var}=a,b,c (comma-separated, no brackets)"
    return f"set {var} to a {base} value"


def check_active(
    environ: Mapping[str, str] | None = None, version: str | ReleaseSchema | None = None
) -> tuple[str | None, list[Finding]]:
    """The configuration a process with ``environ`` (default: this one's) would load: the file
    its file variable names, and the variables (on top of the file where the release applies
    them; a file value a variable overrides is a finding too). Returns ``(file, findings)``."""
    environ = os.environ if environ is None else environ
    target = _schema(version)
    file_env = target.loader.config_file_env
    path = environ.get(file_env) if file_env else None
    findings: list[Finding] = []
    missing = bool(path) and not os.path.exists(str(path))
    if path and missing:
        findings.append(_missing_file(target, str(file_env), str(path)))
    elif path:
        findings += check_file(path, target)
    env_findings = check_environment(environ, target, config_file=bool(path))
    findings += env_findings
    if path and not missing and target.loader.env_with_file == "overrides":
        findings += _overridden(path, environ, target, env_findings)
    return path, findings


def _missing_file(target: ReleaseSchema, file_env: str, path: str) -> Finding:
    """The file variable names a file that is not there (or a link to nothing): LMCache's
    ``from_file`` opens it at start-up and the engine does not start."""
    link = " (a link to nothing)" if os.path.lexists(path) else ""
    return _env(
        file_env,
        "missing",
        target,
        f"create {path}, point {file_env} at the configuration file, or unset {file_env} to "
        "configure LMCache from LMCACHE_* variables alone",
        effect="fails",
        detail=f"names {path}, which does not exist{link}: LMCache {target.version} opens it at "
        "start-up (from_file) and fails with FileNotFoundError",
    )


def _overridden(
    path: str, environ: Mapping[str, str], target: ReleaseSchema, env: list[Finding]
) -> list[Finding]:
    from lmcache_compat.config.yamlread import read_config_file  # lazy: optional dependency

    doc = read_config_file(path)
    lost = {f.key for f in env if f.ignored}
    out = []
    for name, line in (doc.lines or {}).items():
        out_name = resolve_name(target, str(name), "file")
        if out_name.key is None:
            continue
        var = target.keys[out_name.key].env
        if var and var in environ and var not in lost:
            detail = f"{var} is set and overrides it (the environment wins in {target.version})"
            out.append(
                Finding(
                    key=str(name),
                    line=line,
                    kind="ignored",
                    target=target.version,
                    fix=f"unset {var}, or drop the line",
                    detail=detail,
                )
            )
    return out
