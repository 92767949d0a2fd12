"""The budgets of one scan (and of every reader: configuration files, versions), and the meter
that counts what it spends.

Every read of a scan is bounded: per file, per scan, per archive (the README states the
numbers). Exceeding one raises :class:`~lmcache_compat.errors.BudgetExceededError` (or, for a
Python source refused before parsing, :class:`~lmcache_compat.errors.SourceTooLargeError`)
naming the budget and its limit.
"""

from __future__ import annotations

from dataclasses import dataclass

from lmcache_compat.errors import BudgetExceededError, ScanError

__all__ = ["BUDGETS", "Budgets", "Meter", "over"]


@dataclass(frozen=True)
class Budgets:
    """The limits of one scan. Defaults hold every real release with a wide margin (the
    largest real LMCache module is 109 KB, 2,791 lines and 10,475 words; 0.5.7rc2 ships 892
    Python files, 8.6 MB)."""

    #: Bytes of any one member or file read (a zip member is never inflated past it).
    member_bytes: int = 16 * 1024 * 1024
    #: A Python source that is parsed: bytes, lines and words (``\\w+`` runs) before parsing
    #: (``ast.parse`` runs in C and cannot be interrupted, so its input is capped instead).
    source_bytes: int = 512 * 1024
    source_lines: int = 20_000
    source_words: int = 60_000
    #: Inflated bytes read in one scan, all members together.
    total_bytes: int = 96 * 1024 * 1024
    #: Inflated bytes of an sdist's gzip stream (it is read through once).
    stream_bytes: int = 512 * 1024 * 1024
    #: Entries of an archive, and Python files of a package listed for a search.
    members: int = 100_000
    files: int = 20_000
    #: A directory tree listed for a search: entries of every kind (files that are not Python,
    #: directories, links) and directory depth below the package, counted while walking (a real
    #: installed release has about 2,100 entries, 7 deep).
    entries: int = 50_000
    depth: int = 32
    #: An sdist's pax extended header or GNU long-name record, refused before ``tarfile`` reads
    #: it into memory (real ones are a few hundred bytes; a long path is under 4 KB).
    header_bytes: int = 64 * 1024
    #: Package metadata (``METADATA``/``PKG-INFO``) bytes.
    metadata_bytes: int = 1024 * 1024
    #: Class bodies read (bases included) and sources parsed in one scan.
    classes: int = 20_000
    parsed_bytes: int = 48 * 1024 * 1024
    #: An LMCache configuration file (YAML): its bytes, and the nodes one top-level value may
    #: expand to through aliases (real configurations are a few KB and a few dozen nodes).
    config_bytes: int = 1024 * 1024
    config_nodes: int = 100_000
    #: Every text a reader parses (:mod:`lmcache_compat.inputs`, checked on the text before
    #: any library sees it, so the answer never depends on the interpreter's recursion limit or
    #: integer digit limit): nesting levels of one YAML or JSON document (a configuration file,
    #: JSON in an ``LMCACHE_*`` variable, an HTTP reply; real ones nest 3 or 4 deep), the
    #: characters of one number (real ones have a few digits), and of a version or specifier
    #: text (real versions have under 40).
    input_depth: int = 64
    number_chars: int = 100
    version_chars: int = 128


BUDGETS = Budgets()


class Meter:
    """Counts what one scan spends against its :class:`Budgets`."""

    def __init__(self, budgets: Budgets | None = None) -> None:
        self.budgets = budgets or BUDGETS  # read at call time: tests may swap the defaults
        self.read_bytes = 0
        self.parsed_bytes = 0
        self.classes = 0

    def spend(self, what: str, amount: int, where: str) -> None:
        limit = getattr(self.budgets, what)
        total = getattr(self, _COUNTERS[what]) + amount
        setattr(self, _COUNTERS[what], total)
        if total > limit:
            raise over(where, what, limit, _NAMES[what])


_COUNTERS = {"total_bytes": "read_bytes", "parsed_bytes": "parsed_bytes", "classes": "classes"}
_NAMES = {
    "total_bytes": "bytes read in one scan",
    "parsed_bytes": "source bytes parsed in one scan",
    "classes": "class bodies read in one scan",
}


def over(
    where: str, what: str, limit: int, detail: str, error: type[ScanError] = BudgetExceededError
) -> ScanError:
    """The error for a budget exceeded: where, what, and the budget's name and limit."""
    return error(f"{where}: {detail}: over the cap (scan budget {what}={limit})")
