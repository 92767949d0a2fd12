"""Stand-in for xgrammar (a GPU grammar-decoding library sglang 0.5.13 ... 0.5.20 import at
module top; it is left out of the CPU pins): every name, and every ``xgrammar.x`` submodule, is
a placeholder class that pydantic accepts as ``Any`` (sglang declares ``StructuralTag`` fields).
Put on PYTHONPATH only for those sglang releases."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types
from typing import Any


class _Meta(type):
    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _make(f"{cls.__name__}.{name}")

    def __call__(cls, *args: object, **kwargs: object) -> Any:
        return type.__call__(cls)

    def __getitem__(cls, item: object) -> Any:
        return cls

    def __or__(cls, other: object) -> Any:
        return cls

    __ror__ = __or__


def _any_schema(cls: type, source: object, handler: object) -> Any:
    from pydantic_core import core_schema

    return core_schema.any_schema()


def _make(name: str) -> type:
    return _Meta(
        name,
        (),
        {
            "__module__": "xgrammar",
            "__init__": lambda self, *a, **k: None,
            "__get_pydantic_core_schema__": classmethod(_any_schema),
        },
    )


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    return _make(f"xgrammar.{name}")


class _Submodules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname: str, path: object, target: object = None) -> Any:
        if fullname.startswith("xgrammar."):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = types.ModuleType(spec.name)
        module.__path__ = []
        module.__getattr__ = lambda name, _m=spec.name: (  # type: ignore[method-assign]
            _make(f"{_m}.{name}") if not name.startswith("__") else None
        )
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        pass


__version__ = "0.0.0+stub"
sys.meta_path.insert(0, _Submodules())
