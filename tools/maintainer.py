"""What the maintainer scripts that regenerate a shipped data file (``scripts/build_*.py``)
share: their command line and how they write the file."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any


def parser(doc: str | None, cache: str, offline_help: str) -> argparse.ArgumentParser:
    """``--cache DIR`` (default ``~/.cache/lmcache-compat/CACHE``), ``--offline`` and
    ``--docs`` (also regenerate the generated documentation)."""
    ap = argparse.ArgumentParser(
        description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "lmcache-compat" / cache)
    ap.add_argument("--offline", action="store_true", help=offline_help)
    ap.add_argument(
        "--docs", action="store_true", help="also regenerate the generated documentation"
    )
    return ap


#: Whether the container at a path (keys and list indexes from the top) gets a line per item.
Expand = Callable[[tuple[Any, ...]], bool]


def json_lines(value: Any, expand: Expand, *, flat: int) -> list[str]:
    """``value`` as JSON text, line by line, so a data file's reviews read as diffs: a non-empty
    container for whose path ``expand`` is true has one item per line, anything else is one
    ``json.dumps``. Items of the ``flat`` outermost containers are not indented, deeper ones
    two spaces a level."""

    def walk(path: tuple[Any, ...], head: str, item: Any, comma: str) -> list[str]:
        pad = "  " * max(0, len(path) - flat)
        if not (isinstance(item, (dict, list)) and item and expand(path)):
            return [f"{pad}{head}{json.dumps(item)}{comma}"]
        pairs = list(item.items()) if isinstance(item, dict) else list(enumerate(item))
        opening, closing = "{}" if isinstance(item, dict) else "[]"
        out = [f"{pad}{head}{opening}"]
        for i, (key, child) in enumerate(pairs):
            label = f"{json.dumps(key)}: " if isinstance(item, dict) else ""
            out += walk((*path, key), label, child, "," if i < len(pairs) - 1 else "")
        return [*out, f"{pad}{closing}{comma}"]

    return walk((), "", value, "")


def write_json_lines(path: Path, lines: Sequence[str]) -> None:
    """Write a data file laid out by :func:`json_lines`; it must still be valid JSON."""
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    json.loads(path.read_text(encoding="utf-8"))
