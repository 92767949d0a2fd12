"""The data files shipped with lmcache-compat (``lmcache_compat/upstream/data/``): read by the
models, written by the maintainer scripts, found in one place."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

__all__ = ["DATA_DIR", "data_path", "read_data"]

#: The directory of the shipped data files in this source tree (what the scripts write).
DATA_DIR = Path(__file__).resolve().parent / "data"


def read_data(name: str) -> str:
    """A shipped data file's text, read through the installed package's resources."""
    return (
        files(__package__ or "lmcache_compat.upstream")
        .joinpath("data", name)
        .read_text(encoding="utf-8")
    )


def data_path(name: str) -> Path:
    """Where a maintainer script writes the data file ``name``."""
    return DATA_DIR / name
