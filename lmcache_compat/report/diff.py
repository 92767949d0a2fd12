"""``lmcache-compat diff``'s records, kept at this path for the command line that imports them
from here: they live in :mod:`lmcache_compat.upstream.diff` (below ``report``, so that
:mod:`lmcache_compat.upstream.provenance` re-derives a citation without importing the command
line's layer)."""

from __future__ import annotations

from lmcache_compat.upstream.diff import (
    Change,
    ChangeKind,
    ReleaseDiff,
    ReleaseView,
    diff_releases,
)

__all__ = ["Change", "ChangeKind", "ReleaseDiff", "ReleaseView", "diff_releases"]
