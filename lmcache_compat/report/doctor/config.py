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

    from lmcache_compat.config.check import FindingJSON

__all__ = ["ConfigJSON", "config_report"]


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
    except LMCacheCompatError as exc:  # the file: missing, unreadable, or PyYAML absent
        file_env = schema.loader.config_file_env
        path = environ.get(file_env) if file_env else None
        findings = check_environment(environ, schema, config_file=bool(path))
        what = "cannot be read" if not isinstance(exc, MissingExtraError) else "was not read"
        out["reason"] = f"the configuration file {what}: {_line(exc)}"
    out["file"] = path
    out["findings"] = [f.to_json() for f in findings]
    out["ignored"] = sum(1 for f in findings if f.ignored)
    return out
