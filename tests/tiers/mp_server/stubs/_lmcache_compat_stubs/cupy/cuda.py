"""``cupy.cuda`` names referenced by LMCache 0.3.13 ... 0.4.5 MP servers; all raise when used."""

from __future__ import annotations

from typing import NoReturn

__all__ = ["Device", "ExternalStream", "MemoryPointer", "Stream", "UnownedMemory"]


def _fail(name: str) -> NoReturn:
    raise RuntimeError(
        f"cupy.cuda.{name} is a CPU-only stub (tests/tiers/mp_server/stubs): no CUDA"
    )


class _Unavailable:
    def __init__(self, *args: object, **kwargs: object) -> None:
        _fail(type(self).__name__)


class Stream(_Unavailable):
    pass


class ExternalStream(Stream):
    pass


class Device(_Unavailable):
    pass


class MemoryPointer(_Unavailable):
    pass


class UnownedMemory(_Unavailable):
    pass
