"""LMCache configuration across releases: check a configuration against a release, migrate a
file between releases, translate MP server command lines.

* :mod:`~lmcache_compat.config.schema`: every release's keys, tables and loader facts
  (shipped data, or a scan of an installed release the data does not list);
* :mod:`~lmcache_compat.config.resolver`: what a release's loader does with a name and a value
  (the loader modelled as rows, and the one function that applies them);
* :mod:`~lmcache_compat.config.history`: where each key lived, and the moves between releases;
* :mod:`~lmcache_compat.config.check`: what a release does with a file (:func:`check_file`,
  :func:`check_config`), the ``LMCACHE_*`` variables (:func:`check_environment`) and the
  configuration a process would load (:func:`check_active`), as :class:`Finding` records;
* :mod:`~lmcache_compat.config.yamlread`: YAML read as LMCache reads it, with line numbers;
* :mod:`~lmcache_compat.config.migrate`: the comment-keeping rewrite of a file;
* :mod:`~lmcache_compat.config.mpflags`: the MP server command-line translator.

Reading (and rewriting) YAML needs PyYAML: ``pip install 'lmcache-compat[config]'`` (imported
only when used). ``check_config`` on a mapping does not.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lmcache_compat._lazy import lazy_names

if TYPE_CHECKING:
    from lmcache_compat.config.check import (
        Finding,
        check_active,
        check_config,
        check_environment,
        check_file,
    )
    from lmcache_compat.config.migrate import migrate_file
    from lmcache_compat.config.mpflags import translate_mp_flags

__all__ = [
    "Finding",
    "check_active",
    "check_config",
    "check_environment",
    "check_file",
    "migrate_file",
    "translate_mp_flags",
]

_LAZY = {
    "Finding": "lmcache_compat.config.check",
    "check_config": "lmcache_compat.config.check",
    "check_environment": "lmcache_compat.config.check",
    "check_active": "lmcache_compat.config.check",
    "check_file": "lmcache_compat.config.check",
    "migrate_file": "lmcache_compat.config.migrate",
    "translate_mp_flags": "lmcache_compat.config.mpflags",
}


__getattr__, __dir__ = lazy_names(__name__, _LAZY, globals(), __all__)
