"""The connector's configuration check at start-up: what the installed LMCache release would
ignore, rename or read differently in the configuration this process will load (the file
``LMCACHE_CONFIG_FILE`` names and the ``LMCACHE_*`` variables), logged once per process.

Decided here, without vLLM, so the unit tier tests it; :mod:`lmcache_compat.vllm.connector` only
calls :func:`log_startup_check` from the scheduler side's constructor (the workers load the same
configuration: one report is enough). Reading the file needs PyYAML, which vLLM brings; without
it the check is skipped and the log says so, once.
"""

from __future__ import annotations

import importlib.util
import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lmcache_compat.errors import LMCacheCompatError
from lmcache_compat.vllm.plugin import CONNECTOR_NAME

__all__ = [
    "LOGGER",
    "StartupCheck",
    "log_startup_check",
    "startup_check",
    "wants_config_check",
]

#: The configuration check's own logger (the connector's capability warning is
#: ``lmcache_compat.vllm``'s): filter or raise it apart.
LOGGER = logging.getLogger("lmcache_compat.config")

#: How many findings the start-up log lists (the rest: ``lmcache-compat config check``).
SHOWN = 20


class _Once:
    """Whether this process has logged the check."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.done = False

    def first(self) -> bool:
        with self.lock:
            first, self.done = not self.done, True
            return first

    def reset(self) -> None:
        with self.lock:
            self.done = False


ONCE = _Once()


@dataclass(frozen=True, slots=True)
class StartupCheck:
    """What to log: one level, one or more lines."""

    level: int
    lines: tuple[str, ...]


def wants_config_check(role: Any) -> bool:
    """Whether a connector of this vLLM role checks the configuration (the scheduler side; a
    role without a name, such as a test's, too)."""
    return getattr(role, "name", None) != "WORKER"


def startup_check(
    environ: Mapping[str, str] | None = None, *, yaml_installed: bool | None = None
) -> StartupCheck:
    """The check's log record (never raises: a configuration LMCache cannot read is LMCache's
    own error to raise, at its own time)."""
    from lmcache_compat.config.yamlread import extra_hint  # lazy: start-up only

    if yaml_installed is None:
        yaml_installed = importlib.util.find_spec("yaml") is not None
    if not yaml_installed:
        return StartupCheck(
            logging.INFO,
            (
                f"{CONNECTOR_NAME}: skipped checking the LMCache configuration: PyYAML is not "
                f"installed (HINT: {extra_hint()})",
            ),
        )
    from lmcache_compat.config.check import check_active  # lazy: start-up only
    from lmcache_compat.config.schema import schema_for  # lazy: start-up only

    try:
        schema = schema_for(None)
        path, findings = check_active(environ, schema)
    except LMCacheCompatError as exc:
        reason = " ".join(str(exc).split())
        text = f"{CONNECTOR_NAME}: could not check the LMCache configuration: {reason}"
        return StartupCheck(logging.WARNING, (text,))
    what = f"{path} and the LMCACHE_* environment" if path else "the LMCACHE_* environment"
    if not findings:
        return StartupCheck(
            logging.INFO,
            (f"{CONNECTOR_NAME}: LMCache {schema.version} reads {what} as written",),
        )
    lost = sum(1 for f in findings if f.ignored)
    head = (
        f"{CONNECTOR_NAME}: LMCache {schema.version} would ignore {lost} and rename or read "
        f"differently {len(findings) - lost} item(s) of {what} (lmcache-compat config check "
        "shows the fixes):"
    )
    shown = [f"  {_one(f)}" for f in findings]
    if len(shown) > SHOWN:
        shown = [*shown[:SHOWN], f"  ... and {len(shown) - SHOWN} more"]
    return StartupCheck(logging.WARNING if lost else logging.INFO, (head, *shown))


def _one(finding: Any) -> str:
    where = "env " if finding.source == "env" else ""
    if finding.line:
        where = f"line {finding.line}: "
    return f"{where}{finding.key}: {finding.kind}: {finding.detail}; fix: {finding.fix}"


def log_startup_check(
    environ: Mapping[str, str] | None = None, logger: logging.Logger = LOGGER
) -> bool:
    """Log :func:`startup_check` once per process (to :data:`LOGGER`); ``True`` when this call
    logged it."""
    if not ONCE.first():
        return False
    record = startup_check(environ)
    logger.log(record.level, "\n".join(record.lines))
    return True
