"""Stand-in for torchvision on a CPU-only machine: the real wheel fails beside torch 2.13.0's CPU
build (``operator torchvision::nms does not exist``), and sglang's model configs import it
(transformers imports ``transforms.v2.functional`` as soon as ``torchvision`` is found). Any
attribute is a placeholder class; calling one raises. ``TORCHVISION_STUB_LOG=1`` prints every
attribute touched."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

_LOG = os.environ.get("TORCHVISION_STUB_LOG")


class _Meta(type):
    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return make(f"{cls.__name__}.{name}")


def make(name: str) -> type:
    def _init(self: object, *args: object, **kwargs: object) -> None:
        pass

    def _call(self: object, *args: object, **kwargs: object) -> None:
        raise RuntimeError(f"torchvision stand-in: {name} is not implemented")

    return _Meta(name, (), {"__init__": _init, "__call__": _call, "__module__": "torchvision"})


def module_getattr(modname: str) -> Callable[[str], Any]:
    def __getattr__(name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        if _LOG:
            print(f"torchvision-stub: {modname}.{name}", file=sys.stderr)
        return make(f"{modname}.{name}")

    return __getattr__
