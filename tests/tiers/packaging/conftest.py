"""The packaging tier's artifacts: built by ``prepare.py`` (the env's commands_pre) under
``LMCACHE_COMPAT_PACKAGING_DIR``: ``dist/`` (the sdist and the wheel built from it), ``build.log``,
``sdist/`` (unpacked; the tests run from there)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def packaging_dir() -> Path:
    where = os.environ.get("LMCACHE_COMPAT_PACKAGING_DIR")
    if not where:
        pytest.fail("run through tox -e packaging-floor (LMCACHE_COMPAT_PACKAGING_DIR is not set)")
    return Path(where)


@pytest.fixture(scope="session")
def dist(packaging_dir: Path) -> Path:
    return packaging_dir / "dist"


@pytest.fixture(scope="session")
def wheel(dist: Path) -> Path:
    (found,) = dist.glob("*.whl")
    return found


@pytest.fixture(scope="session")
def sdist(dist: Path) -> Path:
    (found,) = dist.glob("*.tar.gz")
    return found
