"""What the maintainer scripts that regenerate a shipped data file (``scripts/build_*.py``)
share: their command line and how they write the file."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path


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


def write_json_lines(path: Path, lines: Sequence[str]) -> None:
    """Write a data file laid out line by line (so reviews read as diffs); it must still be
    valid JSON."""
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    json.loads(path.read_text(encoding="utf-8"))
