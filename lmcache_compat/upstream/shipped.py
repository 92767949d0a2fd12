"""The data files shipped with lmcache-compat (``lmcache_compat/upstream/data/``): read by the
models, written by the maintainer scripts, found in one place.

The release matrix is one file per release: ``data/releases/<version>.json`` holds that
release's row (modules, surfaces, details: what ``scan --json`` read of it, readable on its
own; its capabilities follow from those, :mod:`lmcache_compat.upstream.derived`), and
``data/releases/index.json`` lists every release, oldest first, with the artifact it was
scanned from and that artifact's sha256. A command about one release reads
the index and that release's file (:func:`release_row`, :func:`row_for_sha256`: ``scan`` of a
published artifact, ``doctor``); only what lists every release reads them all
(:func:`lmcache_compat.upstream.matrix.load_matrix`). Reading needs the standard library only
(deriving capabilities, the catalog).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping

from lmcache_compat.errors import DataFileError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up time)
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

__all__ = [
    "RELEASES",
    "RELEASE_INDEX",
    "data_path",
    "read_data",
    "read_data_json",
    "release_file",
    "release_index",
    "release_row",
    "row_for_sha256",
    "scan_json_of",
]

#: The directory of the release matrix under ``data/``, and its index.
RELEASES = "releases"
RELEASE_INDEX = f"{RELEASES}/index.json"
#: The keys of an index entry (the artifact's name, sha256 and size in bytes); the rest of a row
#: is its release's own file.
INDEX_KEYS = ("version", "artifact", "sha256", "size")

#: The shipped data files' directory in this installed (or source) package.
_DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")


def read_data(name: str) -> str:
    """A shipped data file's text (``name``: its ``/``-separated path under ``data/``)."""
    try:
        with open(os.path.join(_DATA, *name.split("/")), encoding="utf-8") as fh:
            return fh.read()
    except FileNotFoundError:  # a package that is not files on disk (a zip): its resources
        from importlib.resources import files

        package = files(__package__ or "lmcache_compat.upstream")
        return package.joinpath("data", *name.split("/")).read_text(encoding="utf-8")


def data_path(name: str) -> Path:
    """Where a maintainer script writes the data file ``name`` (this source tree's)."""
    from pathlib import Path  # lazy: the commands read files by name only

    return Path(_DATA, *name.split("/"))


def _json(name: str, what: str) -> Any:
    """A shipped data file's JSON under the reader contract (:mod:`lmcache_compat.inputs`), as a
    trusted file: any failure is one :class:`DataFileError` line (exit status 2)."""
    from lmcache_compat.inputs import load_json  # lazy: start-up time

    try:
        text = read_data(name)
    except OSError as exc:
        raise DataFileError(f"shipped {what} is missing: {exc.strerror or exc}") from None
    return load_json(text, f"shipped {what} ({name})", DataFileError, trusted=True)


def read_data_json(name: str, what: str) -> Any:
    """The JSON of the data file ``name`` (``vllm_grid.json``), read as :func:`_json` reads it;
    ``what`` names it in a message."""
    return _json(name, what)


@functools.cache
def release_index() -> dict[str, Any]:
    """``data/releases/index.json``: ``releases`` (each ``version``, ``artifact``, ``sha256``,
    oldest first) and what else it says of the matrix (``format``, ``generated_by``)."""
    data = _json(RELEASE_INDEX, "release matrix index")
    if not isinstance(data, dict) or not isinstance(data.get("releases"), list):
        raise DataFileError("shipped release matrix index is malformed: no list of releases")
    return data


def release_file(version: str) -> str:
    """The data file of one release (``releases/0.5.6.json``), as the index spells it."""
    return f"{RELEASES}/{version}.json"


@functools.cache
def release_row(version: str) -> dict[str, Any]:
    """The row of the release the index spells ``version``: its index entry and its file."""
    for entry in release_index()["releases"]:
        if entry["version"] == version:
            row = _json(release_file(version), f"row of LMCache {version}")
            if not isinstance(row, dict) or row.get("version") != version:
                raise DataFileError(f"shipped row of LMCache {version} is malformed")
            return {**{k: entry[k] for k in INDEX_KEYS if k in entry}, **row}
    raise KeyError(version)


def row_for_sha256(digest: str) -> dict[str, Any] | None:
    """The row whose artifact has this sha256 (the very file it was scanned from), or ``None``."""
    for entry in release_index()["releases"]:
        if entry["sha256"] == digest:
            return release_row(entry["version"])
    return None


def scan_json_of(
    row: Mapping[str, Any],
    source: str | None = None,
    *,
    capabilities: Mapping[str, bool] | None = None,
) -> dict[str, Any]:
    """What ``scan --json`` says of a row's artifact, key for key (``source``: how the scan
    names the artifact; without it, the key is left out). The one conversion: a
    :class:`~lmcache_compat.upstream.matrix.ReleaseRow` gives its fields and the capabilities
    it derived; without them, they are derived from the row's surfaces here."""
    if capabilities is None:
        from lmcache_compat.upstream.derived import stored_capabilities  # lazy: rows need none

        capabilities = stored_capabilities(row)
    out: dict[str, Any] = {"lmcache_version": row["version"]}
    if source is not None:
        out["source"] = source
    out |= {
        "capabilities": dict(capabilities),
        "modules": dict(row.get("modules", {})),
        "found_by": dict(row.get("found_by", {})),
        "surfaces": {k: dict(v) for k, v in row["surfaces"].items()},
        "properties": {k: list(v) for k, v in row.get("properties", {}).items()},
        "details": {k: dict(v) for k, v in row.get("details", {}).items()},
        "functions": {k: dict(v) for k, v in row.get("functions", {}).items()},
        "missing_classes": list(row.get("missing_classes", ())),
        "external_bases": {k: list(v) for k, v in row.get("external_bases", {}).items()},
    }
    if row.get("reexported_at"):
        out["reexported_at"] = {k: list(v) for k, v in row["reexported_at"].items()}
    return out
