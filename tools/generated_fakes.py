"""The unit tier's view of the public fakes (:mod:`lmcache_compat.testing.fakes`): fake classes
generated from a row of the shipped release matrix (no second generator, no results table: a
test that needs another answer sets it with ``set_result``), and :func:`live_facts`, the live
facts the unit and releases tiers compare with the data."""

from __future__ import annotations

import dataclasses
import inspect
import types

from lmcache_compat.core.probes import live_surface
from lmcache_compat.core.roles import CONNECTOR
from lmcache_compat.core.signatures import MethodFacts
from lmcache_compat.testing.fakes import UNSET, Fake
from lmcache_compat.testing.fakes import fake_module as _fake_module
from lmcache_compat.upstream.matrix import ReleaseRow

__all__ = [
    "UNSET",
    "GeneratedEngine",
    "fake_from_row",
    "fake_module",
    "instantiate",
    "live_facts",
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


def live_facts(cls: type) -> dict[str, MethodFacts]:
    """The live facts of a class (``inspect.signature`` of each member), a dataclass's
    ``__init__`` read as the scanner records it: its fields, flagged ``dataclass``, no return."""
    surface = live_surface(cls)
    if dataclasses.is_dataclass(cls):
        sig = surface["__init__"].signature
        assert sig is not None
        sig = sig.replace(return_annotation=inspect.Signature.empty)
        surface["__init__"] = MethodFacts(sig, dataclass=True)
    return surface
