"""Deprecated since 0.2.0: moved to :mod:`lmcache_compat.mp.server`; this path is removed in
0.3.0. Importing it gives that module, with one :class:`DeprecationWarning`
naming what to use
instead (``lmcache_compat._api.MOVED``, ``INSTEAD``).

Its new home is internal. Use instead: :class:`~lmcache_compat.MPSchedulerAdapter` and
:class:`~lmcache_compat.MPWorkerAdapter` check the server's release when they connect.
"""

from __future__ import annotations

from lmcache_compat._api import moved

TYPE_CHECKING = False
if TYPE_CHECKING:
    from lmcache_compat.mp.server import *  # noqa: F403  (what type checkers see at the old path)

moved(__name__)
