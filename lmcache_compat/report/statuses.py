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
    MPServerError,
    MPServerURLError,
    NotInMatrixError,
    NotLMCacheError,
    OutputError,
    SourceNotFoundError,
    UnreadableArchiveError,
    UnsafeConfigError,
)

__all__ = [
    "COMMAND_STATUSES",
    "COMMON_STATUSES",
    "EXIT_STATUS",
    "INTERRUPTED",
    "NOT_REACHED",
    "PIPE_CLOSED",
    "STATUSES",
    "VERDICT",
    "WRITE_FAILED",
    "Status",
    "command_statuses",
    "exit_status",
]


@dataclass(frozen=True, slots=True)
class Status:
    """One exit status of the command line and what it means."""

    code: int
    meaning: str


#: Every exit status, in order.
STATUSES: tuple[Status, ...] = (
    Status(0, "success (`doctor`: nothing found)"),
    Status(
        1,
        "a verdict: `doctor` found a measured break of the installed pair, a key or variable "
        "the active configuration drops (or a missing or unreadable `LMCACHE_CONFIG_FILE`), or "
        "an MP server of another release; `diff --fail-on-breaking` found a breaking change, "
        "`config check` found a key or variable the release would ignore (or a value that makes "
        "its loader fail), `config migrate` left a key the target will not read, `config "
        "mp-flags` cannot say a flag to the target",
    ),
    Status(
        2,
        "usage error (`config migrate` without a `--from` it cannot infer, `-o` naming the "
        "input or something that is not a regular file, a malformed `doctor --mp-server` URL), "
        "or a malformed shipped data file",
    ),
    Status(
        3,
        "target not found, LMCache not installed, a version not in the shipped data, or not a "
        "PEP 440 version (or one over its budget); a `doctor --mp-server` front end that "
        "cannot be reached or is not an LMCache MP front end (for `doctor` this wins over 1)",
    ),
    Status(4, "not an LMCache release, or a class defined in several places (none chosen)"),
    Status(
        5,
        "unreadable, unsafe (`../` or absolute names, links, link loops, special files) or "
        "over a budget (bombs, too many members, files or directories); a configuration file "
        "or `LMCACHE_*` value with a YAML tag that would construct an object, an alias bomb, "
        "or over its budget (bytes, nesting depth, the length of a number)",
    ),
    Status(
        6,
        "Python source that cannot be decoded or parsed, or over a source budget; a "
        "configuration file that is not UTF-8, not YAML (control characters included), not a "
        "mapping, or that the release's loader fails on (an empty file, where the loader "
        "expects a mapping)",
    ),
    Status(
        7,
        "the output could not be written (a full disk, an I/O error, a missing or read-only "
        "destination directory; standard error included): one line on stderr where it can be "
        "written",
    ),
    Status(
        8,
        "an optional dependency is missing: the message names the extra to install (`pip "
        "install 'lmcache-compat[config]'` for PyYAML)",
    ),
    Status(
        130,
        "interrupted (Ctrl-C: 128 + SIGINT, as Unix tools): no traceback, and nothing "
        "half-written (`config migrate` leaves the original intact)",
    ),
    Status(141, "the reader closed the pipe early (128 + SIGPIPE, as Unix tools): no message"),
)
#: The statuses every command can give (after its own, unless it states the code itself).
COMMON_STATUSES: tuple[Status, ...] = (
    Status(
        2,
        "usage error: an unknown or misspelt command or option, a missing argument, "
        "options that conflict",
    ),
    Status(7, "the output could not be written (a full disk, an I/O error)"),
    Status(130, "interrupted (Ctrl-C)"),
    Status(141, "the reader closed the pipe early (no message)"),
)

#: Each command's own exit statuses and what each means for it: its ``--help`` lists them
#: (with :data:`COMMON_STATUSES`), and ``docs/cli.md`` is generated from that help. Every code
#: is one of :data:`STATUSES`.
COMMAND_STATUSES: dict[str, tuple[Status, ...]] = {
    "doctor": (
        Status(0, "nothing found (also: only one of vLLM and LMCache installed, or neither)"),
        Status(
            1,
            "a verdict: a measured break of the installed pair, a key or variable the "
            "active configuration drops (or a missing or unreadable LMCACHE_CONFIG_FILE), an "
            "MP server of another release",
        ),
        Status(2, "usage error, or a malformed --mp-server URL (nothing is gathered)"),
        Status(
            3,
            "an --mp-server front end that cannot be reached or is not an LMCache MP "
            "front end (this wins over 1)",
        ),
    ),
    "scan": (
        Status(0, "the report"),
        Status(3, "TARGET not found, or LMCache (or vLLM, for --vllm-native) not installed"),
        Status(4, "not an LMCache release, or a class defined in several places"),
        Status(5, "unreadable, unsafe or over a budget (bombs, links, special files)"),
        Status(6, "Python source that cannot be decoded or parsed, or over a source budget"),
    ),
    "matrix": (
        Status(0, "the matrix"),
        Status(2, "usage error, or a malformed shipped data file"),
    ),
    "grid": (
        Status(0, "the grid"),
        Status(
            3,
            "a vLLM older than every measured one, an sglang the grid does not list, "
            "or not a PEP 440 version",
        ),
    ),
    "diff": (
        Status(0, "the changes (none breaking, or no --fail-on-breaking)"),
        Status(1, "--fail-on-breaking found a change that breaks existing callers"),
        Status(3, "a side that is neither a file or directory nor a release of the matrix"),
        Status(4, "not an LMCache release, or a class defined in several places"),
        Status(5, "unreadable, unsafe or over a budget"),
        Status(6, "Python source that cannot be decoded or parsed"),
    ),
    "releases": (
        Status(0, "the releases"),
        Status(3, "a version or specifier set the shipped data does not know, or not PEP 440"),
    ),
    "config": (Status(2, "usage error, or no SUBCOMMAND"),),
    "config check": (
        Status(0, "nothing would be ignored"),
        Status(
            1, "a key or variable the release would ignore (or a value that makes its loader fail)"
        ),
        Status(3, "LMCache not installed and no --lmcache, or a release not in the shipped data"),
        Status(5, "a YAML tag that would construct an object, an alias bomb, or over a budget"),
        Status(6, "not UTF-8, not YAML, not a mapping, or a file the release's loader fails on"),
        Status(8, "PyYAML is missing (the config extra)"),
    ),
    "config migrate": (
        Status(0, "migrated"),
        Status(1, "a key is left that the target will not read"),
        Status(2, "usage error: no --from it can infer, -o naming FILE or not a regular file"),
        Status(3, "a release not in the shipped data"),
        Status(5, "a YAML tag that would construct an object, an alias bomb, or over a budget"),
        Status(6, "not UTF-8, not YAML, or not a mapping"),
        Status(7, "the destination cannot be written (FILE is left intact)"),
        Status(8, "PyYAML is missing (the config extra)"),
    ),
    "config mp-flags": (
        Status(0, "the translated command line"),
        Status(1, "a flag the target cannot say (without --allow-loss)"),
        Status(3, "a release not in the shipped data"),
    ),
}


def command_statuses(command: str) -> tuple[Status, ...]:
    """``command``'s exit statuses in order: its own, then the common ones it does not state."""
    own = COMMAND_STATUSES[command]
    codes = {s.code for s in own}
    return tuple(
        sorted((*own, *(s for s in COMMON_STATUSES if s.code not in codes)), key=lambda s: s.code)
    )


#: Statuses the command line returns itself (never from an error class).
VERDICT, NOT_REACHED, WRITE_FAILED, INTERRUPTED, PIPE_CLOSED = 1, 3, 7, 130, 141

#: Error class -> exit status; the first matching row wins (subclasses first).
EXIT_STATUS: tuple[tuple[type[LMCacheCompatError], int], ...] = (
    (MPFlagsError, 1),
    (MigrationError, 2),
    (MPServerURLError, 2),
    (MPServerError, 3),
    (MissingExtraError, 8),
    (UnsafeConfigError, 5),
    (ConfigFileError, 6),
    (OutputError, 7),
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
