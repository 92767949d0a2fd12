"""The configuration part of ``lmcache-compat doctor``: what the installed LMCache would ignore,
rename or read differently in the active configuration (the file its file variable names, and
the ``LMCACHE_*`` variables of doctor's own environment), as ``config check`` reports it."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, TypedDict

from lmcache_compat.errors import LMCacheCompatError, MissingExtraError

if TYPE_CHECKING:
    from typing import NotRequired

    from lmcache_compat.config.check import Finding, FindingJSON

__all__ = ["ConfigJSON", "config_report", "config_verdict"]


class ConfigJSON(TypedDict):
    """``doctor --json``'s ``config`` object."""

    checked: bool
    release: NotRequired[str]
    #: ``shipped`` (the release's schema from lmcache-compat's data) or ``scanned``.
    schema: NotRequired[str]
    file: NotRequired[str | None]
    findings: NotRequired[list[FindingJSON]]
    ignored: NotRequired[int]
    #: Why the check was not made, or what it could not read.
    reason: NotRequired[str]


def _line(exc: Exception) -> str:
    return " ".join(str(exc).split())


def _unreadable(release: str, file_env: str, path: str, exc: LMCacheCompatError) -> Finding:
    """The file variable names a file that cannot be read (not UTF-8, not YAML, control
    characters, a directory, over a budget): nothing in it was checked, and ``config check``
    fails on it too. LMCache's own loader fails on what is not UTF-8 YAML and on a directory
    (``fails``); what lmcache-compat refuses for safety or over a budget is ``unchecked``."""
    from lmcache_compat.config.check import Finding  # lazy: doctor
    from lmcache_compat.errors import ConfigFileError, UnsafeConfigError

    # refused for safety or over a budget (UnsafeConfigError, a ConfigFileError): not known
    safety = isinstance(exc, UnsafeConfigError) or not isinstance(exc, ConfigFileError)
    return Finding(
        key=file_env,
        line=None,
        kind="unreadable",
        target=release,
        fix=f"fix {path} (lmcache-compat config check {path} says what it cannot read), or "
        f"point {file_env} at a readable configuration file",
        effect="unchecked" if safety and not os.path.isdir(path) else "fails",
        detail=f"names {path}, which cannot be read, so the file was not checked: {_line(exc)}",
        source="env",
    )


def config_report(lmcache: str | None, environ: Mapping[str, str] | None = None) -> ConfigJSON:
    """The active configuration against the installed release ``lmcache``."""
    from lmcache_compat.config.check import check_active, check_environment  # lazy: doctor
    from lmcache_compat.config.schema import schema_for  # lazy: doctor

    environ = os.environ if environ is None else environ
    if lmcache is None:
        return {
            "checked": False,
            "reason": "no LMCache release to check against (not installed, or its version "
            "cannot be read)",
        }
    try:
        schema = schema_for(lmcache)
    except LMCacheCompatError as exc:
        return {"checked": False, "reason": _line(exc)}
    out: ConfigJSON = {"checked": True, "release": schema.version, "schema": schema.source}
    try:
        path, findings = check_active(environ, schema)
    except LMCacheCompatError as exc:  # the file: unreadable, or PyYAML absent
        file_env = schema.loader.config_file_env or "LMCACHE_CONFIG_FILE"
        path = environ.get(file_env)
        findings = check_environment(environ, schema, config_file=bool(path))
        what = "cannot be read" if not isinstance(exc, MissingExtraError) else "was not read"
        out["reason"] = f"the configuration file {what}: {_line(exc)}"
        if not isinstance(exc, MissingExtraError):  # config check exits 5 or 6 on it: a finding
            findings.insert(0, _unreadable(schema.version, file_env, str(path), exc))
    out["file"] = path
    out["findings"] = [f.to_json() for f in findings]
    out["ignored"] = sum(1 for f in findings if f.ignored)
    return out


def config_verdict(config: ConfigJSON) -> bool:
    """Whether the active configuration is a finding of doctor's status 1: a key or variable
    it drops, a missing file (both counted in ``ignored``), or a file that cannot be read."""
    unreadable = any(f["kind"] == "unreadable" for f in config.get("findings", []))
    return config.get("ignored", 0) > 0 or unreadable
