"""Release-faithful test doubles for connector authors (no torch, vLLM or LMCache needed).

``fake_class(release, name)`` is a class with exactly the surface the shipped release matrix
records for that release; ``fake(release, name)`` an instance of it (built with no arguments);
``double(name)`` the same over the installed LMCache's real class (:mod:`.installed`);
:mod:`lmcache_compat.testing.faults` injects the faults a connector must handle, and
:mod:`lmcache_compat.testing.pytest_plugin` (opt-in) runs a test over several releases.
Nothing is imported until a name is used (PEP 562). See docs/testing.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lmcache_compat._lazy import lazy_names

if TYPE_CHECKING:
    from lmcache_compat.testing.fakes import (
        UNSET,
        Call,
        Fake,
        fake,
        fake_class,
        fake_module,
        queue,
        release_row,
        set_delay,
        set_raises,
        set_result,
    )
    from lmcache_compat.testing.faults import (
        FAULTS,
        Injected,
        fail_loads,
        kv_events,
        lost_reply,
        short_retrieve,
        slow_wait_for_save,
        unhealthy,
    )
    from lmcache_compat.testing.installed import double, double_class, installed_row, real_class
    from lmcache_compat.testing.shapes import empty_value

_FAKES = "lmcache_compat.testing.fakes"
_FAULTS = "lmcache_compat.testing.faults"
_INSTALLED = "lmcache_compat.testing.installed"
#: Public name -> the module that defines it (imported on first use).
_LAZY = {
    "UNSET": _FAKES,
    "Call": _FAKES,
    "Fake": _FAKES,
    "fake": _FAKES,
    "fake_class": _FAKES,
    "fake_module": _FAKES,
    "release_row": _FAKES,
    "queue": _FAKES,
    "set_delay": _FAKES,
    "set_raises": _FAKES,
    "set_result": _FAKES,
    "FAULTS": _FAULTS,
    "Injected": _FAULTS,
    "fail_loads": _FAULTS,
    "kv_events": _FAULTS,
    "lost_reply": _FAULTS,
    "short_retrieve": _FAULTS,
    "slow_wait_for_save": _FAULTS,
    "unhealthy": _FAULTS,
    "empty_value": "lmcache_compat.testing.shapes",
    "double": _INSTALLED,
    "double_class": _INSTALLED,
    "installed_row": _INSTALLED,
    "real_class": _INSTALLED,
}

__all__ = [
    "FAULTS",
    "UNSET",
    "Call",
    "Fake",
    "Injected",
    "double",
    "double_class",
    "empty_value",
    "fail_loads",
    "fake",
    "fake_class",
    "fake_module",
    "installed_row",
    "kv_events",
    "lost_reply",
    "queue",
    "real_class",
    "release_row",
    "set_delay",
    "set_raises",
    "set_result",
    "short_retrieve",
    "slow_wait_for_save",
    "unhealthy",
]

__getattr__, __dir__ = lazy_names(__name__, _LAZY, globals(), __all__)
