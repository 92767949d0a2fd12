"""Uniform adapter over ``LMCacheEngine`` (0.3.0 on) and ``LMCacheEngineBuilder.get_or_create``:
:mod:`~lmcache_compat.engine.adapter` binds, :mod:`~lmcache_compat.engine.calls` decides each
call from the release's signatures."""

from __future__ import annotations

from lmcache_compat.engine.adapter import EngineAdapter, get_or_create_engine

__all__ = ["EngineAdapter", "get_or_create_engine"]
