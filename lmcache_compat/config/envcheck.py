"""Deprecated after 0.2.0: merged into :mod:`lmcache_compat.config.check` (one module checks a
file, the environment and the active configuration); this path is removed in 0.3.0. Importing
it gives that module, with one :class:`DeprecationWarning` naming what to use instead
(``lmcache_compat._api.MOVED``, ``INSTEAD``).

Use instead: :func:`lmcache_compat.config.check_environment` (supported).
"""

from __future__ import annotations

from lmcache_compat._api import moved

TYPE_CHECKING = False
if TYPE_CHECKING:
    from lmcache_compat.config.check import *  # noqa: F403  (what type checkers see at the old path)

moved(__name__)
