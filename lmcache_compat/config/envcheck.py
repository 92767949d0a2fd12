"""The environment's ``LMCACHE_*`` variables against a release, and the configuration a
process would load (its file, then the variables on top where the release applies them).

A variable counts as read when the release's engine configuration reads it (``LMCACHE_<KEY>``,
an alias name, a code fallback), when some other part of the release spells it
(``LMCACHE_CONFIG_FILE``, ``LMCACHE_LOG_LEVEL``, the MP coordinator's...), or when it is under a
prefix the release reads (the EC overrides' ``LMCACHE_EC_``, the cache controller's); any other
``LMCACHE_*`` variable is never read, silently.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from lmcache_compat.config.check import (
    Effect,
    Finding,
    Kind,
    _dropped,
    _was_key_before,
    check_file,
    release_schema,
)
from lmcache_compat.config.history import story
from lmcache_compat.config.resolver import base_type, convert, judge_value, resolve_name
from lmcache_compat.config.schema import ReleaseSchema

__all__ = ["check_active", "check_environment"]


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
    target = release_schema(version)
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
            if _read_elsewhere(target, var) is None:
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
    kind: Kind = "removed" if _was_key_before(name, target) else "ignored"
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
    conversion = convert(spec.env_converter, value)
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
    target = release_schema(version)
    file_env = target.loader.config_file_env
    path = environ.get(file_env) if file_env else None
    findings: list[Finding] = []
    if path:
        findings += check_file(path, target)
    env_findings = check_environment(environ, target, config_file=bool(path))
    findings += env_findings
    if path and target.loader.env_with_file == "overrides":
        findings += _overridden(path, environ, target, env_findings)
    return path, findings


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
