"""Deprecated since 0.2.0: moved to :mod:`lmcache_compat.upstream.resolve`; this path is removed in
0.3.0. Importing it gives that module, with one :class:`DeprecationWarning`
(``lmcache_compat._api.MOVED``).
"""

from __future__ import annotations

from lmcache_compat._api import moved

TYPE_CHECKING = False
if TYPE_CHECKING:
    from lmcache_compat.upstream.resolve import *  # noqa: F403  (what type checkers see at the old path)

moved(__name__)
