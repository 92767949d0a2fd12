"""The scan's budgets, kept at this path for the modules that still import them from here: they
live in :mod:`lmcache_compat.budgets` (below ``scan``, ``inputs`` and ``distributions``, which
all read them, so none of them imports another through this package)."""

from __future__ import annotations

from lmcache_compat.budgets import BUDGETS, Budgets, Meter, over

__all__ = ["BUDGETS", "Budgets", "Meter", "over"]
