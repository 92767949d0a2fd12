"""Opt-in stand-ins for GPU-only modules in an LMCache MP server subprocess (tests only).

``tests/tiers/mp_server/server.py`` puts this directory first on the server's PYTHONPATH and names
the stand-ins it wants in ``LMCACHE_COMPAT_STUBS`` (comma-separated, e.g. ``cupy,lmcache.c_ops``).
Python imports this ``sitecustomize`` at start-up; with the variable unset or empty it does
nothing. See README.md beside it for what each stand-in replaces and why.
"""

import importlib
import os

_WANTED = [n for n in os.environ.get("LMCACHE_COMPAT_STUBS", "").split(",") if n]
if _WANTED:
    importlib.import_module("_lmcache_compat_stubs").install(_WANTED)
