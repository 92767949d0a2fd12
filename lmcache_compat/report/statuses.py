"""The command line's exit statuses, as data: :data:`STATUSES` (each status and what it means;
``docs/cli.md`` and the README's table are generated from it) and :data:`EXIT_STATUS` (which
error ends in which status), read by :func:`exit_status` in ``lmcache_compat.report.cli``."""

from __future__ import annotations

from dataclasses import dataclass

from lmcache_compat.errors import (
    AmbiguousLocationError,
    ConfigFileError,
    DataFileError,
    InvalidSourceError,
    LMCacheCompatError,
    LMCacheVersionError,
    MigrationError,
    MissingExtraError,
    MPFlagsError,
    NotInMatrixError,
    NotLMCacheError,
    SourceNotFoundError,
    UnreadableArchiveError,
    UnsafeConfigError,
)

__all__ = ["EXIT_STATUS", "PIPE_CLOSED", "STATUSES", "WRITE_FAILED", "Status", "exit_status"]


@dataclass(frozen=True, slots=True)
class Status:
    """One exit status of the command line and what it means."""

    code: int
    meaning: str


#: Every exit status, in order.
STATUSES: tuple[Status, ...] = (
    Status(0, "success"),
    Status(
        1,
        "a verdict: `doctor` found a known-broken pair (or an MP server of another release), "
        "`diff --fail-on-breaking` found a breaking change, `config check` found a key or "
        "variable the release would ignore (or a value that makes its loader fail), `config "
        "migrate` left a key the target will not read, `config mp-flags` cannot say a flag to "
        "the target",
    ),
    Status(
        2,
        "usage error (`config migrate` without a `--from` it cannot infer, `-o` naming the "
        "input), or a malformed shipped data file",
    ),
    Status(
        3,
        "target not found, LMCache not installed, a version not in the shipped data, or not a "
        "PEP 440 version",
    ),
    Status(4, "not an LMCache release, or a class defined in several places (none chosen)"),
    Status(
        5,
        "unreadable, unsafe (`../` or absolute names, links, special files) or over a budget "
        "(bombs, too many members, files or directories); a configuration file with a YAML tag "
        "that would construct an object, an alias bomb, or over its budget",
    ),
    Status(
        6,
        "Python source that cannot be decoded or parsed, or over a source budget; a "
        "configuration file that is not UTF-8, not YAML, not a mapping, or that the release's "
        "loader fails on (an empty file, where the loader expects a mapping)",
    ),
    Status(7, "the output could not be written (a full disk, an I/O error): one line on stderr"),
    Status(
        8,
        "an optional dependency is missing: the message names the extra to install (`pip "
        "install 'lmcache-compat[config]'` for PyYAML and ruamel.yaml)",
    ),
    Status(141, "the reader closed the pipe early (128 + SIGPIPE, as Unix tools): no message"),
)
#: The statuses of output errors (never a verdict).
WRITE_FAILED, PIPE_CLOSED = 7, 141

#: Error class -> exit status; the first matching row wins (subclasses first).
EXIT_STATUS: tuple[tuple[type[LMCacheCompatError], int], ...] = (
    (MPFlagsError, 1),
    (MigrationError, 2),
    (MissingExtraError, 8),
    (UnsafeConfigError, 5),
    (ConfigFileError, 6),
    (SourceNotFoundError, 3),
    (NotInMatrixError, 3),
    (LMCacheVersionError, 3),
    (NotLMCacheError, 4),
    (AmbiguousLocationError, 4),
    (UnreadableArchiveError, 5),
    (InvalidSourceError, 6),
    (DataFileError, 2),
    (LMCacheCompatError, 2),
)


def exit_status(exc: LMCacheCompatError) -> int:
    return next(code for cls, code in EXIT_STATUS if isinstance(exc, cls))
