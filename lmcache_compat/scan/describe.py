"""How a scan names the artifact it read (standard library only: ``scan`` of a published
artifact names it without importing the readers)."""

from __future__ import annotations

import os

__all__ = ["artifact_description"]


def artifact_description(path: str | os.PathLike[str]) -> str:
    """How a scan names a wheel or an sdist (``wheel lmcache-0.5.6-....whl``)."""
    name = os.path.basename(os.fspath(path))
    return f"{'wheel' if name.endswith('.whl') else 'sdist'} {name}"
