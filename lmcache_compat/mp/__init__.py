"""Uniform adapters over LMCache's multi-process (MP) adapters, 0.3.13 on.

:class:`MPSchedulerAdapter` and :class:`MPWorkerAdapter` (:mod:`~lmcache_compat.mp.adapters`)
bind each call once, at construction, as :mod:`~lmcache_compat.mp.scheduler_calls` and
:mod:`~lmcache_compat.mp.worker_calls` decide from the release's signatures;
:class:`MPConfig` (:mod:`~lmcache_compat.mp.config`) builds the release's adapter from the
caller's facts; :mod:`~lmcache_compat.mp.server` asks a running server for its release.
"""

from __future__ import annotations

from lmcache_compat.mp.adapters import MPSchedulerAdapter, MPWorkerAdapter, mp_init_kwargs
from lmcache_compat.mp.config import MPConfig

__all__ = ["MPConfig", "MPSchedulerAdapter", "MPWorkerAdapter", "mp_init_kwargs"]
