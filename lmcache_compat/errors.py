"""Every error lmcache-compat raises derives from :class:`LMCacheCompatError`.

Messages are written for the person reading a log at 3 a.m.: they name what is missing or wrong,
on which class, the installed LMCache version, and how to fix it.
"""

from __future__ import annotations

__all__ = [
    "AmbiguousLocationError",
    "BudgetExceededError",
    "ConfigFileError",
    "DataFileError",
    "InvalidSourceError",
    "LMCacheCompatError",
    "LMCacheVersionError",
    "MPFlagsError",
    "MPServerError",
    "MPServerURLError",
    "MPVersionMismatchError",
    "MalformedResultError",
    "MetadataError",
    "MigrationError",
    "MissingCapabilityError",
    "MissingExtraError",
    "NotAFrontEndError",
    "NotAnEngineError",
    "NotInMatrixError",
    "NotLMCacheError",
    "OutputError",
    "ScanError",
    "SourceNotFoundError",
    "SourceTooLargeError",
    "UnknownCapabilityError",
    "UnreadableArchiveError",
    "UnsafeConfigError",
    "UnsupportedArgumentError",
    "UpstreamNotFoundError",
]


class LMCacheCompatError(Exception):
    """Base class of every error raised by lmcache-compat itself.

    Errors raised *by the engine* are never wrapped: they propagate unchanged.
    """


class MissingCapabilityError(LMCacheCompatError):
    """A capability the caller requires is not offered by the engine's class.

    Raised by :class:`~lmcache_compat.ConnectorAdapter` at construction for ``require=``, or when a
    missing optional method is called on an adapter built with ``strict=True``.
    """

    def __init__(
        self,
        capability: str,
        *,
        member: str,
        cls_name: str,
        installed: str | None,
        since: str,
        removed: str | None = None,
    ) -> None:
        self.capability = capability
        self.member = member
        self.cls_name = cls_name
        self.installed = installed
        self.since = since
        self.removed = removed
        if removed is None:
            span = f"first LMCache release that has it: {since}"
            hint = f"pip install -U 'lmcache>={since}'"
        else:
            span = f"LMCache releases that have it: {since} ... (removed in {removed})"
            hint = f"pip install 'lmcache>={since},<{removed}'"
        super().__init__(
            f"LMCache capability {capability!r} ({member}) is missing on class {cls_name}; "
            f"installed LMCache version: {installed or 'unknown'}; {span}.\nHINT: {hint}"
        )

    def __reduce__(self) -> tuple[object, ...]:  # keep pickling (multiprocessing) working
        state = {
            "capability": self.capability,
            "member": self.member,
            "cls_name": self.cls_name,
            "installed": self.installed,
            "since": self.since,
            "removed": self.removed,
        }
        return (_rebuild_missing, (state,))


def _rebuild_missing(state: dict[str, str | None]) -> MissingCapabilityError:
    capability, member, cls_name, since = (
        str(state[k]) for k in ("capability", "member", "cls_name", "since")
    )
    return MissingCapabilityError(
        capability,
        member=member,
        cls_name=cls_name,
        installed=state["installed"],
        since=since,
        removed=state["removed"],
    )


class NotAnEngineError(LMCacheCompatError, TypeError):
    """The object lacks methods that every LMCache release has, so it is not an engine of
    the expected kind (or it is a mock without ``spec=``)."""


class MalformedResultError(LMCacheCompatError, TypeError):
    """The engine returned a value of the wrong shape (e.g. block ids that are not ints)."""


class UnsupportedArgumentError(LMCacheCompatError, TypeError):
    """The caller asked for something the installed release cannot do, and dropping it would
    change the meaning (e.g. a non-empty ``cache_salt`` on a release without salts would mix
    tenants' caches). Raised unless the caller allowed that downgrade (``allow=``)."""

    def __init__(self, argument: str, message: str) -> None:
        self.argument = argument
        super().__init__(message)

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.argument, str(self)))


class MPServerError(LMCacheCompatError):
    """An exchange with an LMCache multi-process server failed or timed out, so its answer cannot
    be trusted (e.g. ``check_lookup_result`` reported 0 hits while the release's adapter marked
    the server unhealthy), or a server's HTTP front end could not be asked for its release.

    The message names the client's LMCache release and the server's where it is known, and says
    that a client/server version mismatch is one possible cause.
    """


class MPServerURLError(MPServerError, ValueError):
    """A URL that is not the ``http://HOST:PORT`` of an MP server's HTTP front end (no scheme,
    no host, a port that is not a number from 1 to 65535): a usage error, nothing was asked."""


class NotAFrontEndError(MPServerError):
    """The URL answered, but not as an LMCache MP front end: its ``GET /lmc_version`` reply is
    not a release string (a PEP 440 version of at most 64 characters, as JSON or plain text), or
    is a 404 while its ``GET /`` is not LMCache's HTTP front end's."""


class MPVersionMismatchError(MPServerError, ValueError):
    """A server's HTTP front end reports an LMCache release other than the installed one (checked
    by ``MPSchedulerAdapter.create`` / ``MPWorkerAdapter.create`` when ``MPConfig.http_urls``
    names the front ends). ``client``, ``server`` and ``url`` hold what was compared."""

    def __init__(self, message: str, *, client: str | None, server: str, url: str) -> None:
        self.client = client
        self.server = server
        self.url = url
        super().__init__(message)

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild_mismatch, (str(self), self.client, self.server, self.url))


def _rebuild_mismatch(
    message: str, client: str | None, server: str, url: str
) -> MPVersionMismatchError:
    return MPVersionMismatchError(message, client=client, server=server, url=url)


class LMCacheVersionError(LMCacheCompatError, ValueError):
    """A version string could not be parsed as a PEP 440 version."""


class MetadataError(LMCacheCompatError):
    """An installed distribution's metadata cannot be read (not UTF-8, unreadable...)."""


class UnknownCapabilityError(LMCacheCompatError, ValueError):
    """A capability name that is not in the catalog."""


class DataFileError(LMCacheCompatError):
    """A data file shipped with lmcache-compat (the release matrix, the vLLM grid) is malformed."""


class NotInMatrixError(LMCacheCompatError, KeyError):
    """A release that the shipped matrix does not list."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class UpstreamNotFoundError(LMCacheCompatError, ImportError):
    """An upstream class (``LMCacheConnectorV1Impl``...) is at none of its known paths and a
    search of the installed package by name found no definition."""


# --- scanning (each maps to an exit status: see ``report.statuses.EXIT_STATUS``) -------------


class ScanError(LMCacheCompatError):
    """A release could not be read or scanned."""


class SourceNotFoundError(ScanError):
    """The target does not exist (or LMCache/vLLM is not installed)."""


class NotLMCacheError(ScanError):
    """The target exists but is not an LMCache release (or a vLLM with the vendored copy)."""


class UnreadableArchiveError(ScanError):
    """The archive or file is corrupt, unsafe (escapes, links, special files), unreadable
    (permissions) or too large to read within the caps."""


class BudgetExceededError(UnreadableArchiveError):
    """A scan exceeded one of its budgets (bytes read, members, classes...); the message names
    the budget and its limit."""


class InvalidSourceError(ScanError):
    """A Python source file cannot be decoded or parsed (or nests too deeply)."""


class SourceTooLargeError(InvalidSourceError):
    """A Python source over the parse budgets (bytes, lines, words), refused before parsing;
    the message names the budget and its limit."""


class AmbiguousLocationError(ScanError, ImportError):
    """A class is at none of its known paths and several definitions of that name match its
    role: none is chosen; the message and ``candidates`` (their modules) name them."""

    def __init__(self, message: str, candidates: tuple[str, ...] = ()) -> None:
        self.candidates = tuple(candidates)
        super().__init__(message)

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (str(self), self.candidates))


# --- configuration files and command lines (lmcache_compat.config) --------------------------------


class MissingExtraError(LMCacheCompatError, ImportError):
    """An optional dependency is not installed; the message names the extra that brings it
    (``pip install 'lmcache-compat[config]'``)."""


class ConfigFileError(LMCacheCompatError, ValueError):
    """An LMCache configuration file cannot be read as LMCache reads it: not UTF-8, not YAML,
    a top level that is not a mapping; the message names the file and the line."""


class UnsafeConfigError(ConfigFileError):
    """A configuration file refused for safety: a YAML tag that would construct an object,
    aliases that expand past the budget, a file over its size budget or not a regular file."""


class MPFlagsError(LMCacheCompatError, ValueError):
    """MP server flags that cannot be translated between two releases; the message says which
    flag and why (removed with no replacement, required, a value the release refuses)."""


class OutputError(LMCacheCompatError):
    """An output file could not be written (a missing or read-only directory, a full disk);
    the message names the file and the reason. Whatever was there before is left intact."""


class MigrationError(LMCacheCompatError, ValueError):
    """A configuration file that cannot be migrated as asked: ``--from`` is needed and could not
    be inferred, duplicate keys, ``-o`` naming the input without ``--in-place``, or a rewrite
    that would change more than the planned moves."""
