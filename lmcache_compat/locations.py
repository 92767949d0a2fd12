"""Deprecated since 0.2.0: moved to :mod:`lmcache_compat.upstream.locations`; removed in
0.3.0. Importing it gives that module, with one :class:`DeprecationWarning`
naming what to use
instead (``lmcache_compat._api.MOVED``, ``INSTEAD``).

Its new home is internal. Use instead: the adapters (:class:`~lmcache_compat.ConnectorAdapter`,
the MP adapters) find LMCache's classes themselves; :func:`lmcache_compat.probe` says what a
release offers.
"""

from __future__ import annotations

from lmcache_compat._api import moved

TYPE_CHECKING = False
if TYPE_CHECKING:
    from lmcache_compat.upstream.locations import *  # noqa: F403  (what type checkers see at the old path)

moved(__name__)
