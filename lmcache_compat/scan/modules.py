"""Reading a release's modules with ``ast``: nothing is imported or executed.

:func:`parse_source` decodes (allow-listed encodings only) and parses one module within the
source budgets; :class:`Index` parses a tree's modules on first use and records, per module, its
classes, functions, imports, aliases (``Old = New``), star imports and literal ``__all__``
(:class:`Module`), which :mod:`lmcache_compat.scan.classreader` and the upstream readers
follow.
"""

from __future__ import annotations

import ast
import codecs
import io
import re
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from lmcache_compat.budgets import Meter, over
from lmcache_compat.errors import InvalidSourceError, SourceTooLargeError
from lmcache_compat.scan.sources import SourceTree

__all__ = ["ALLOWED_CODECS", "Index", "Module", "decode_source", "parse_source", "top_level"]

#: Source encodings a release may declare (PEP 263); anything else is refused, not guessed.
#: ``utf-8-sig``: a file that starts with a UTF-8 byte order mark (Python reads it as UTF-8).
ALLOWED_CODECS = frozenset(
    {"utf-8", "utf-8-sig", "ascii", "latin-1", "iso8859-1", "cp1252", "iso8859-15"}
)


def decode_source(relpath: str, data: bytes, where: str) -> str:
    """Source text, decoded with its declared (allow-listed) encoding."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        name = codecs.lookup(encoding).name
    except (SyntaxError, LookupError) as exc:
        raise InvalidSourceError(
            f"{where}: {relpath} is not decodable Python source ({exc})"
        ) from None
    if name not in ALLOWED_CODECS:
        raise InvalidSourceError(
            f"{where}: {relpath} declares the source encoding {encoding!r}, which lmcache-compat "
            f"does not read (allowed: {', '.join(sorted(ALLOWED_CODECS))})"
        )
    try:
        return data.decode(encoding)
    except (UnicodeError, LookupError) as exc:
        raise InvalidSourceError(
            f"{where}: {relpath} is not decodable Python source ({exc})"
        ) from None


def parse_source(relpath: str, data: bytes, where: str, meter: Meter) -> ast.Module:
    """``ast.parse`` within the source budgets (checked before parsing: the parser runs in C and
    cannot be interrupted); every failure is one :class:`InvalidSourceError` line."""
    b = meter.budgets
    spot = f"{where}: {relpath}"
    big = SourceTooLargeError
    if len(data) > b.source_bytes:
        raise over(spot, "source_bytes", b.source_bytes, f"{len(data)} bytes of source", big)
    lines = data.count(b"\n")
    if lines > b.source_lines:
        raise over(spot, "source_lines", b.source_lines, f"{lines} lines of source", big)
    words = len(re.findall(rb"\w+", data))
    if words > b.source_words:
        raise over(spot, "source_words", b.source_words, f"{words} words of source", big)
    meter.spend("parsed_bytes", len(data), spot)
    text = decode_source(relpath, data, where)
    try:
        return ast.parse(text, filename=relpath)
    except SyntaxError as exc:
        raise InvalidSourceError(f"{spot}:{exc.lineno}: invalid Python ({exc.msg})") from None
    except (RecursionError, MemoryError) as exc:
        raise InvalidSourceError(
            f"{spot}: cannot parse ({type(exc).__name__}: too deep or too large)"
        ) from None
    except ValueError as exc:
        raise InvalidSourceError(f"{spot}: cannot parse ({exc})") from None


@dataclass
class Module:
    relpath: str
    dotted: str
    classes: dict[str, ast.ClassDef]
    #: Top-level functions (in ``if``/``try`` blocks too), by name.
    functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef]
    imports: dict[str, tuple[str, str | None]]  # local name -> (module, attribute or None)
    #: The parsed module (statement-level readers, such as the configuration scan, walk it).
    tree: ast.Module | None = None
    #: Module-level ``Old = New`` / ``Old = module.New`` (a rename that keeps an alias).
    aliases: dict[str, ast.expr] = field(default_factory=dict)
    #: The modules of ``from x import *`` (a move that leaves a re-export behind), in order.
    stars: list[str] = field(default_factory=list)
    #: A literal ``__all__``: what ``from <this> import *`` exports (``None``: no ``__all__``,
    #: every public name).
    exports: frozenset[str] | None = None

    def star_exports(self, name: str) -> bool:
        """Whether ``from <this module> import *`` binds ``name``."""
        return name in self.exports if self.exports is not None else not name.startswith("_")


def top_level(body: list[ast.stmt], limit: int = 100_000) -> Iterator[ast.stmt]:
    """Statements at module (or class) level, looking into if/try/with blocks (iteratively: an
    ``elif`` chain of any length is no deeper than one level here)."""
    stack: list[Iterator[ast.stmt]] = [iter(body)]
    seen = 0
    while stack:
        node = next(stack[-1], None)
        if node is None:
            stack.pop()
            continue
        seen += 1
        if seen > limit:
            return
        yield node
        blocks: list[list[ast.stmt]] = []
        if isinstance(node, ast.If):
            blocks = [node.body, node.orelse]
        elif isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
            tried: Any = node
            blocks = [tried.body, *(h.body for h in tried.handlers), tried.orelse, tried.finalbody]
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            blocks = [node.body]
        for block in reversed(blocks):
            stack.append(iter(block))


class Index:
    """Parsed modules of one source tree, parsed on first use."""

    def __init__(self, tree: SourceTree) -> None:
        self.tree = tree
        self.package = tree.package
        self._modules: dict[str, Module | None] = {}

    def module(self, relpath: str) -> Module | None:
        if relpath in self._modules:
            return self._modules[relpath]
        data = self.tree.read(relpath)
        mod = None if data is None else self._parse(relpath, data)
        self._modules[relpath] = mod
        return mod

    def module_by_dotted(self, dotted: str) -> Module | None:
        base = dotted.replace(".", "/")
        return self.module(base + ".py") or self.module(base + "/__init__.py")

    def _parse(self, relpath: str, data: bytes) -> Module:
        tree = parse_source(relpath, data, self.tree.description, self.tree.meter)
        dotted = relpath[: -len(".py")].replace("/", ".")
        is_init = dotted.endswith(".__init__")
        if is_init:
            dotted = dotted[: -len(".__init__")]
        package_parts = dotted.split(".") if is_init else dotted.split(".")[:-1]
        classes: dict[str, ast.ClassDef] = {}
        functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        imports: dict[str, tuple[str, str | None]] = {}
        aliases: dict[str, ast.expr] = {}
        stars: list[str] = []
        exports: set[str] | None = None
        for node in top_level(tree.body):
            if isinstance(node, ast.ClassDef):
                classes[node.name] = node
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                functions.setdefault(node.name, node)
            elif isinstance(node, (ast.Assign, ast.AugAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names = [t.id for t in targets if isinstance(t, ast.Name)]
                if "__all__" in names:
                    listed = _literal_names(node.value)
                    if isinstance(node, ast.AugAssign) and exports is not None:
                        exports = None if listed is None else exports | listed
                    else:
                        exports = listed
                elif len(names) == 1 and _dotted_name(node.value) is not None:
                    aliases[names[0]] = node.value
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    keep = len(package_parts) - (node.level - 1)
                    if keep <= 0:
                        continue
                    base = ".".join(package_parts[:keep])
                    source = f"{base}.{node.module}" if node.module else base
                else:
                    source = node.module or ""
                for alias in node.names:
                    if alias.name == "*":
                        stars.append(source)
                    else:
                        imports[alias.asname or alias.name] = (source, alias.name)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        imports[alias.asname] = (alias.name, None)
                    else:
                        top = alias.name.split(".")[0]
                        imports[top] = (top, None)
        frozen = None if exports is None else frozenset(exports)
        return Module(relpath, dotted, classes, functions, imports, tree, aliases, stars, frozen)


def _dotted_name(node: ast.expr) -> str | None:
    """``a`` or ``a.b.c`` (a name an alias can refer to), else ``None``."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([node.id, *reversed(parts)])


def _literal_names(node: ast.expr) -> set[str] | None:
    """The strings of a literal list or tuple (``__all__``), else ``None`` (not readable)."""
    if not isinstance(node, (ast.List, ast.Tuple)):
        return None
    names = {e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
    return names if len(names) == len(node.elts) else None
