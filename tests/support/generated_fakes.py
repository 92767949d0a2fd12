"""The unit tier's view of the public fakes (:mod:`lmcache_compat.testing.fakes`): fake classes
generated from a row of the shipped release matrix, plus the few seeded results the unit tests
of the adapters assume (``set_result`` on top of the one rule, never a second rule)."""

from __future__ import annotations

import types

from lmcache_compat.core.roles import CONNECTOR
from lmcache_compat.testing.fakes import UNSET, Fake
from lmcache_compat.testing.fakes import fake_module as _fake_module
from lmcache_compat.upstream.matrix import ReleaseRow

__all__ = [
    "UNSET",
    "GeneratedEngine",
    "fake_from_row",
    "fake_module",
    "instantiate",
]

GeneratedEngine = Fake


def fake_module(row: ReleaseRow) -> types.ModuleType:
    """A module holding fakes of every class the row describes (cached per release)."""
    return _fake_module(row)


def fake_from_row(row: ReleaseRow, cls_name: str = CONNECTOR.name) -> type[Fake]:
    """The fake class of ``cls_name`` for the row's release."""
    cls: type[Fake] = getattr(fake_module(row), cls_name)
    return cls


def instantiate(cls: type[Fake]) -> Fake:
    """An instance without running the generated ``__init__``'s real-release arguments."""
    engine: Fake = cls.__new__(cls)
    return engine
