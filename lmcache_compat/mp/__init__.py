"""Uniform adapters over LMCache's multi-process (MP) adapters, 0.3.13 on.

:class:`MPSchedulerAdapter` and :class:`MPWorkerAdapter` (:mod:`~lmcache_compat.mp.adapters`)
bind each call once, at construction, as :mod:`~lmcache_compat.mp.scheduler_calls` and
:mod:`~lmcache_compat.mp.worker_calls` decide from the release's signatures;
:class:`MPConfig` (:mod:`~lmcache_compat.mp.config`) builds the release's adapter from the
caller's facts; :mod:`~lmcache_compat.mp.server` asks a running server for its release.

Each name is loaded on first use (PEP 562): ``doctor --mp-server`` imports the server module
without the adapters.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lmcache_compat._lazy import lazy_names

if TYPE_CHECKING:
    from lmcache_compat.mp.adapters import MPSchedulerAdapter, MPWorkerAdapter, mp_init_kwargs
    from lmcache_compat.mp.config import MPConfig

__all__ = ["MPConfig", "MPSchedulerAdapter", "MPWorkerAdapter", "mp_init_kwargs"]

#: Public name -> the module that defines it (imported on first use).
_LAZY = {
    "MPSchedulerAdapter": "lmcache_compat.mp.adapters",
    "MPWorkerAdapter": "lmcache_compat.mp.adapters",
    "mp_init_kwargs": "lmcache_compat.mp.adapters",
    "MPConfig": "lmcache_compat.mp.config",
}

__getattr__, __dir__ = lazy_names(__name__, _LAZY, globals(), __all__)
