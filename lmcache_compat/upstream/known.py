"""A scan answered from the shipped matrix: an artifact whose sha256 is a row's is the very file
that row was scanned from (``scripts/build_release_matrix.py``; the ``releases`` tier re-scans
every release and compares), so its scan is the row, and nothing is parsed.

This keeps ``lmcache-compat scan`` of a published release to hashing the file and reading the
shipped JSON: the scanner's modules are not even imported (most of the cost where bytecode is not
cached, as in tox envs run with ``PYTHONDONTWRITEBYTECODE``). ``scan --rescan`` reads the files.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from lmcache_compat.scan.budgets import BUDGETS
from lmcache_compat.scan.sources import artifact_description, sha256_of_regular_file
from lmcache_compat.upstream.matrix import load_matrix

__all__ = ["ARTIFACT_SUFFIXES", "shipped_scan_json"]

#: The artifacts a matrix row is built from.
ARTIFACT_SUFFIXES = (".whl", ".tar.gz")


def shipped_scan_json(target: str | os.PathLike[str] | None) -> dict[str, Any] | None:
    """``scan --json`` of ``target`` from the shipped matrix, or ``None`` when it is not an
    artifact a row was built from (then scan it)."""
    if target is None:
        return None
    path = Path(target)
    if not path.name.endswith(ARTIFACT_SUFFIXES) or not path.is_file():
        return None
    row = load_matrix().by_sha256(sha256_of_regular_file(path, BUDGETS.stream_bytes))
    return None if row is None else row.scan_json(source=artifact_description(path))
