"""The reader contract: how lmcache-compat reads every text it parses.

Every reader of a text from outside goes through this module: a YAML configuration file
(:mod:`lmcache_compat.config.yamlread`), JSON in an ``LMCACHE_*`` variable
(:mod:`lmcache_compat.config.resolver`), an MP front end's HTTP reply
(:mod:`lmcache_compat.mp.server`), a version or specifier text (:mod:`lmcache_compat.versions`)
and the shipped data files (:mod:`lmcache_compat.upstream.shipped`).
``tests/test_reader_contract.py`` enforces it: a ``json.load(s)``, ``yaml.*load*``,
``Version`` or ``SpecifierSet`` anywhere else in the package fails the unit tier unless its
allow-list says why that text is safe (shipped data, an already parsed version). The contract:

1. **Budgets first, on the text.** Nesting depth and the length of each number are measured
   by the small, iterative scanners below before any library sees the text
   (:func:`check_yaml`, :func:`check_json`, :func:`check_number`, :func:`check_version_text`),
   against fixed numbers (:class:`~lmcache_compat.scan.budgets.Budgets` ``input_depth``,
   ``number_chars``, ``version_chars``): never against the running interpreter's recursion or
   integer digit limit, so every interpreter gives the same answer. The scanners over-estimate
   (a budget refuses, never lets through, what is deeper than it).
2. **Then the library, guarded.** :func:`guarded` turns every error the library raises, and
   ``RecursionError``, ``MemoryError``, ``OverflowError`` and ``ValueError`` (a conversion
   that fails), into one line: the reader's own error class (so its documented exit status),
   naming where.
3. **Text shown is escaped.** :func:`shown` escapes control characters (``\\x1b`` stays four
   characters), so a hostile input cannot drive the terminal that prints its message.

A reader chooses its error class: a configuration file's budgets are
:class:`~lmcache_compat.errors.UnsafeConfigError` (status 5), a version's
:class:`~lmcache_compat.errors.LMCacheVersionError` (3), an MP reply's
:class:`~lmcache_compat.errors.MPServerError`.
"""

from __future__ import annotations

import contextlib
import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lmcache_compat.budgets import BUDGETS, Budgets
from lmcache_compat.errors import LMCacheCompatError, LMCacheVersionError

if TYPE_CHECKING:
    from packaging.specifiers import SpecifierSet
    from packaging.version import Version

__all__ = [
    "Shape",
    "check_json",
    "check_number",
    "check_version_text",
    "check_yaml",
    "guarded",
    "json_shape",
    "load_json",
    "parse_specifier",
    "parse_version",
    "shown",
    "yaml_shape",
]

#: Failures of a parse or a conversion that are the input's fault, whatever library ran.
_INPUT_FAILURES: tuple[type[BaseException], ...] = (
    RecursionError,
    MemoryError,
    OverflowError,
    ValueError,
    UnicodeError,
)
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\ufeff]")


def shown(text: str, limit: int = 200) -> str:
    """``text`` safe to print in one line: control characters (and line breaks) escaped as
    Python writes them (``\\x1b``, ``\\n``), cut to ``limit`` characters."""
    if len(text) > limit:
        text = text[:limit] + "..."
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def _one_line(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return shown(" ".join(text.split()), 300)


@contextlib.contextmanager
def guarded(
    where: str,
    error: type[LMCacheCompatError],
    library: tuple[type[BaseException], ...] = (),
    what: str = "cannot be read",
) -> Iterator[None]:
    """Run a library's parse or conversion: its own errors (``library``) and every failure an
    input can cause become ``error("{where}: {what} (...)")``, one line. Errors of
    lmcache-compat itself pass through unchanged."""
    try:
        yield
    except LMCacheCompatError:
        raise
    except RecursionError:
        raise error(f"{where}: {what} (nested too deeply for the parser)") from None
    except MemoryError:
        raise error(f"{where}: {what} (too large to hold in memory)") from None
    except (*library, *_INPUT_FAILURES) as exc:
        raise error(f"{where}: {what} ({type(exc).__name__}: {_one_line(exc)})") from None


@dataclass(frozen=True, slots=True)
class Shape:
    """What the scanners measure of a text: its deepest nesting (an upper bound) and its
    longest number, with the (1-based) lines they are on."""

    depth: int = 0
    depth_line: int = 0
    number: int = 0
    number_line: int = 0


def _over(where: str, line: int, what: str, budget: str, limit: int) -> str:
    at = f"{where}:{line}" if line else where
    return f"{at}: {what}: over the cap (budget {budget}={limit})"


def _enforce(
    shape: Shape, where: str, error: type[LMCacheCompatError], budgets: Budgets | None
) -> None:
    b = budgets or BUDGETS
    if shape.depth > b.input_depth:
        raise error(
            _over(
                where,
                shape.depth_line,
                f"nests more than {b.input_depth} levels deep",
                "input_depth",
                b.input_depth,
            )
        )
    if shape.number > b.number_chars:
        raise error(
            _over(
                where,
                shape.number_line,
                f"a number of {shape.number} characters",
                "number_chars",
                b.number_chars,
            )
        )


# --- numbers --------------------------------------------------------------------------------

#: What YAML 1.1 (PyYAML, LMCache's reader) resolves to an int or a float, from the YAML 1.1
#: type definitions (yaml.org/type/int.html, float.html): the plain scalars a constructor
#: converts. Anything else stays a string and costs nothing to read.
_YAML_NUMBER_TEXT = r"""[-+]?(?:
        0b[01_]+ | 0x[0-9a-fA-F_]+ | 0[0-7_]+ | (?:0|[1-9][0-9_]*)
      | [1-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?
      | [0-9][0-9_]*\.[0-9_]*(?:[eE][-+][0-9]+)?
      | \.[0-9][0-9_]*(?:[eE][-+][0-9]+)?
    )"""
#: A decimal number as a converter (``int``, ``float``) reads it from a string.
_DECIMAL_TEXT = r"\s*[-+]?(?:[0-9][0-9_]*\.?[0-9_]*|\.[0-9][0-9_]*)(?:[eE][-+]?[0-9_]+)?\s*"


@functools.cache
def _pattern(text: str, flags: int = 0) -> re.Pattern[str]:
    """A pattern compiled on first use (importing this module stays cheap: every command
    imports it, few read YAML)."""
    return re.compile(text, flags)


def _yaml_number(token: str) -> bool:
    return _pattern(_YAML_NUMBER_TEXT, re.VERBOSE).fullmatch(token) is not None


def check_number(
    text: str, where: str, error: type[LMCacheCompatError], budgets: Budgets | None = None
) -> None:
    """``text`` (an environment value, a string a converter reads) is not a number longer than
    the ``number_chars`` budget, checked before ``int()`` or ``float()`` sees it."""
    b = budgets or BUDGETS
    if len(text) > b.number_chars and _pattern(_DECIMAL_TEXT).fullmatch(text):
        raise error(
            _over(where, 0, f"a number of {len(text)} characters", "number_chars", b.number_chars)
        )


# --- JSON -----------------------------------------------------------------------------------

_JSON_TOKEN = r'"(?:[^"\\]|\\.)*"?|[\[\]{}]|-?[0-9][0-9.eE+-]*|\n'


def json_shape(text: str) -> Shape:
    """The nesting depth and the longest number of JSON ``text`` (brackets inside strings do
    not count; an unterminated string ends the text)."""
    depth = deepest = deepest_line = number = number_line = 0
    line = 1
    for match in _pattern(_JSON_TOKEN).finditer(text):
        token = match.group()
        first = token[0]
        if first == "\n":
            line += 1
        elif first == '"':
            line += token.count("\n")
        elif first in "[{":
            depth += 1
            if depth > deepest:
                deepest, deepest_line = depth, line
        elif first in "]}":
            depth = max(depth - 1, 0)
        elif len(token) > number:
            number, number_line = len(token), line
    return Shape(deepest, deepest_line, number, number_line)


def check_json(
    text: str, where: str, error: type[LMCacheCompatError], budgets: Budgets | None = None
) -> None:
    """JSON ``text`` is within the depth and number budgets (before ``json.loads`` sees it)."""
    shape = json_shape(text)
    if "\n" not in text:  # one line (an environment value, a reply): no line to name
        shape = Shape(shape.depth, 0, shape.number, 0)
    _enforce(shape, where, error, budgets)


def load_json(
    text: str | bytes,
    where: str,
    error: type[LMCacheCompatError],
    budgets: Budgets | None = None,
    *,
    trusted: bool = False,
) -> Any:
    """``json.loads(text)`` under the contract: budgets checked first, then every failure is
    one ``error`` line. ``trusted``: a file lmcache-compat ships (read at every start, tested
    when built): its failures are still one line, its budgets are not measured."""
    import json  # lazy: most commands parse no JSON beyond the shipped data

    with guarded(where, error, what="is not valid JSON"):
        if isinstance(text, bytes):
            text = text.decode("utf-8")
        if not trusted:
            check_json(text, where, error, budgets)
        return json.loads(text)


# --- YAML -----------------------------------------------------------------------------------

#: YAML's line breaks (PyYAML reads NEL and the Unicode separators as breaks too).
_BREAKS = r"\r\n|[\r\n\x85\u2028\u2029]"
#: A plain scalar's characters in the block context (up to ``: `` or `` #``) and the flow
#: context (also up to a flow indicator).
_PLAIN_BLOCK = r"(?:[^:#\s]|:(?=\S)|#|[ \t]+(?=[^#\s]))*"
_PLAIN_FLOW = r"(?:[^:#\s,\[\]{}]|:(?=[^\s,\[\]{}])|#|[ \t]+(?=[^#\s,\[\]{}]))*"


def _plain_end(pattern: str, line: str, i: int) -> int:
    """Where the plain scalar starting at ``line[i]`` ends (at least one character on)."""
    found = _pattern(pattern).match(line, i)
    return max(found.end() if found else i, i + 1)


#: What may follow a ``:`` or ``?`` indicator inside a flow collection.
_FLOW_AFTER = ("", " ", "\t", ",", "[", "]", "{", "}")


class _YamlScan:
    """An iterative, line-by-line reading of YAML's structure: indentation, block indicators
    (``- ``, ``? ``, ``: ``), flow collections, quoted scalars (which may span lines), block
    scalars (whose lines are skipped) and comments. Each nesting indicator counts one level,
    so the depth it reports is at least the depth the document has."""

    def __init__(self) -> None:
        self.quote: str | None = None
        self.flow = 0
        self.block: int | None = None  # inside a block scalar: its parent's indentation
        self.stack: list[tuple[int, int]] = []  # (indentation, depth) of open block lines
        self.depth = 0
        self.deepest = self.deepest_line = 0
        self.number = self.number_line = 0
        self.line = 0

    def deeper(self, levels: int = 1) -> None:
        self.depth += levels
        if self.depth + self.flow > self.deepest:
            self.deepest, self.deepest_line = self.depth + self.flow, self.line

    def scalar(self, token: str) -> None:
        token = token.rstrip()
        if len(token) > self.number and _yaml_number(token):
            self.number, self.number_line = len(token), self.line

    def feed(self, text: str) -> Shape:
        for self.line, line in enumerate(_pattern(_BREAKS).split(text), 1):
            self.read_line(line)
        return Shape(self.deepest, self.deepest_line, self.number, self.number_line)

    def read_line(self, line: str) -> None:
        content = line.lstrip(" ")
        indent = len(line) - len(content)
        if self.block is not None:
            if not content.strip() or indent > self.block:
                return  # a line of the block scalar's text
            self.block = None
        i = 0
        if self.quote is None and self.flow == 0:
            if not content.strip() or content.startswith("#"):
                return
            if indent == 0 and content.startswith("%"):
                return  # a directive
            if indent == 0 and content[:3] in ("---", "...") and content[3:4] in ("", " ", "\t"):
                self.stack.clear()
                i = 3
            while self.stack and self.stack[-1][0] >= indent:
                self.stack.pop()
            # a line nests under the innermost node of the line it is indented under (whose
            # indicator counted the level); a line at the top is the root node, one level
            self.depth = self.stack[-1][1] if self.stack else 0
            self.deeper(0 if self.stack else 1)
            self.stack.append((indent, self.depth))
            i = max(i, indent)
        self.read_content(line, i, indent)
        if self.stack and self.quote is None and self.flow == 0:
            self.stack[-1] = (self.stack[-1][0], self.depth)

    def read_content(self, line: str, i: int, indent: int) -> None:
        n = len(line)
        node_start = True  # a node may begin here (a quote, a bracket, a block scalar...)
        owner = indent  # the indentation a block scalar's lines must exceed
        entry = indent  # the column where the current mapping entry began
        spaced = True  # the previous character was a space (a '#' then starts a comment)
        while i < n:
            if self.quote is not None:
                i = self.skip_quoted(line, i)
                node_start = spaced = False
                continue
            c = line[i]
            if c in " \t":
                i += 1
                spaced = True
                continue
            if c == "#" and spaced:
                return
            after = line[i + 1] if i + 1 < n else ""
            if node_start and c in "'\"":
                self.quote = c
                i += 1
                continue
            if node_start and c in "!&":  # a tag or an anchor: the node follows it
                while i < n and line[i] not in " \t":
                    i += 1
                continue
            if c in "[{" and (node_start or self.flow):
                self.flow += 1
                self.deeper(0)
                i += 1
                node_start, spaced = True, False
                continue
            if self.flow:
                i, node_start = self.read_flow(line, i, c, after)
                spaced = False
                continue
            if node_start and c in "|>":
                self.block = owner
                return  # the rest of the line is the header; its text follows
            if c in "-?" and node_start and after in ("", " ", "\t"):
                self.deeper()
                owner, entry = i, i + 2
                i += 1
                continue
            if c == ":" and after in ("", " ", "\t"):
                self.deeper()
                owner = entry
                node_start = True
                i += 1
                continue
            if node_start:
                entry = i
            end = _plain_end(_PLAIN_BLOCK, line, i)
            self.scalar(line[i:end])
            i = end
            node_start = spaced = False

    def read_flow(self, line: str, i: int, c: str, after: str) -> tuple[int, bool]:
        """One token inside a flow collection at ``line[i]`` (``c``; ``after``: the next
        character): where the scan goes on, and whether a node may begin there."""
        if c in "]}":
            self.flow -= 1
            return i + 1, False
        if c == "," or (c in ":?" and after in _FLOW_AFTER):
            return i + 1, True
        end = _plain_end(_PLAIN_FLOW, line, i)
        self.scalar(line[i:end])
        return end, False

    def skip_quoted(self, line: str, i: int) -> int:
        """Past the end of the quoted scalar that continues at ``line[i]`` (or the line's end)."""
        n = len(line)
        if self.quote == "'":
            while i < n:
                if line[i] == "'":
                    if i + 1 < n and line[i + 1] == "'":
                        i += 2
                        continue
                    self.quote = None
                    return i + 1
                i += 1
            return n
        while i < n:
            if line[i] == "\\":
                i += 2
                continue
            if line[i] == '"':
                self.quote = None
                return i + 1
            i += 1
        return n


def yaml_shape(text: str) -> Shape:
    """The nesting depth (at least the document's) and the longest number of YAML ``text``."""
    return _YamlScan().feed(text)


def check_yaml(
    text: str, where: str, error: type[LMCacheCompatError], budgets: Budgets | None = None
) -> None:
    """YAML ``text`` is within the depth and number budgets (before a YAML library sees it)."""
    _enforce(yaml_shape(text), where, error, budgets)


# --- versions -------------------------------------------------------------------------------


def check_version_text(
    text: str, what: str, error: type[LMCacheCompatError], budgets: Budgets | None = None
) -> None:
    """A version or specifier text is at most ``version_chars`` long (before ``packaging``
    turns its components into integers)."""
    b = budgets or BUDGETS
    if len(text) > b.version_chars:
        raise error(
            f"{shown(text, 40)} ({len(text)} characters) is not {what}: over the cap "
            f"(budget version_chars={b.version_chars})"
        )


def parse_version(text: object) -> Version:
    """Parse a PEP 440 version (``0.3.12.dev40``, ``0.5.6+g1a2b3c`` and ``v0.3.9`` included),
    under the reader contract: text over the ``version_chars``
    budget is refused before ``packaging`` turns its components into integers.

    Raises :class:`LMCacheVersionError` naming the text (escaped) when it is not a version.
    """

    from packaging.version import InvalidVersion, Version  # lazy: start-up time

    if not isinstance(text, str):
        raise LMCacheVersionError(f"expected a version string, got {type(text).__name__}")
    check_version_text(text, "a PEP 440 version", LMCacheVersionError)
    try:
        return Version(text.strip())
    except (InvalidVersion, ValueError, OverflowError):
        raise LMCacheVersionError(
            f"'{shown(text, 80)}' is not a PEP 440 version (expected e.g. '1.2.3', "
            "'1.2.3.post1', '1.2rc1')"
        ) from None


def parse_specifier(text: str) -> SpecifierSet:
    """A PEP 440 specifier set (``>=0.4,<0.5``), pre-releases included, under the reader
    contract: over the ``version_chars`` budget or not a
    specifier set raises :class:`LMCacheVersionError`."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet  # lazy: start-up time

    check_version_text(text, "a PEP 440 specifier set", LMCacheVersionError)
    try:
        return SpecifierSet(text, prereleases=True)
    except (InvalidSpecifier, ValueError, OverflowError):
        raise LMCacheVersionError(f"'{shown(text, 80)}' is not a PEP 440 specifier set") from None
