"""An empty site-packages put first on ``sys.path``, where a test installs fake distributions
(doctor reads package metadata and files, never imports them)."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from lmcache_compat.distributions import clear_installed
from lmcache_compat.upstream.resolve import clear_find_cache


def install_dist(site: Path, name: str, version: str) -> None:
    """A ``NAME-VERSION.dist-info`` with its ``METADATA`` in ``site``."""
    info = site / f"{name}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    root = tmp_path / "site"
    root.mkdir()
    monkeypatch.syspath_prepend(str(root))
    importlib.invalidate_caches()
    clear_installed()
    clear_find_cache()
    yield root
    clear_installed()
    clear_find_cache()
