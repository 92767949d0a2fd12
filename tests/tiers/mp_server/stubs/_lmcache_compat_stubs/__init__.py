"""A meta-path finder that serves the stand-ins named in ``LMCACHE_COMPAT_STUBS``.

- ``cupy`` (and ``cupy.cuda``): the stub package beside this file; every name raises when used.
  0.3.13 ... 0.4.5 import cupy unconditionally at module level (0.3.13 in
  ``lmcache/v1/multiprocess/server.py``, 0.3.14 ... 0.4.5 in ``gpu_context.py``).
- ``lmcache.c_ops``: the release's compiled extension, which links ``libcudart.so.12``,
  ``libtorch_cuda.so`` and ``libc10_cuda.so`` (0.3.13 ... 0.5.3) and so cannot load next to a CPU
  torch. Served as the release's own ``lmcache.non_cuda_equivalents`` (LMCache's CPU fallback
  for c_ops, shipped in 0.3.13 ... 0.4.5, where ``memory_management.py`` picks it only when CUDA
  is unavailable but 0.3.13's ``server.py`` and 0.4.4/0.4.5's ``server.py`` and
  ``memory_management.py`` import ``lmcache.c_ops`` unconditionally). From 0.4.6 on,
  ``lmcache/__init__.py`` registers its own CPU fallback as ``lmcache.c_ops``; nothing to do.
- ``torch.cuda.cudart``: after the real ``torch.cuda`` is imported, ``cudart()`` returns an
  object whose ``cudaHostRegister`` / ``cudaHostUnregister`` do nothing and return 0
  (cudaSuccess), so memory stays pageable. Only for 0.3.14 ... 0.4.1, whose
  ``LazyMemoryAllocator`` pins L1 memory through CUDA and whose ``--l1-use-lazy`` is a
  ``store_true`` flag with default True (it cannot be turned off on the command line); the
  other releases get ``--disable-lazy-alloc`` / ``--no-l1-use-lazy`` instead.
- ``torch.cuda.init``: a no-op. 0.3.13 ... 0.4.4 call ``torch.cuda.init()`` unconditionally in
  ``run_cache_server`` just before logging that the server is running; 0.4.5 calls
  ``torch_dev.init()`` where ``torch_dev`` falls back to ``torch.cuda`` without a GPU.

Each stand-in announces itself once on stderr (``lmcache-compat stub: NAME -> WHAT``) when it is
first used, so the server log says what was injected.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

HERE = Path(__file__).resolve().parent
KNOWN = ("cupy", "lmcache.c_ops", "torch.cuda.cudart", "torch.cuda.init")
ANNOUNCE = "lmcache-compat stub: "
_announced: set[str] = set()


def announce(name: str, what: str) -> None:
    if name not in _announced:
        _announced.add(name)
        print(f"{ANNOUNCE}{name} -> {what}", file=sys.stderr, flush=True)


class _NoPinCudart:
    """``torch.cuda.cudart()`` stand-in: host-memory (un)registration is a no-op."""

    @staticmethod
    def cudaHostRegister(ptr: int, size: int, flags: int) -> int:
        return 0

    @staticmethod
    def cudaHostUnregister(ptr: int) -> int:
        return 0

    def __getattr__(self, name: str) -> object:
        raise RuntimeError(f"cudart.{name} is a CPU-only stand-in (tests/tiers/mp_server/stubs)")


def _cudart() -> _NoPinCudart:
    announce("torch.cuda.cudart", "no-op cudaHostRegister/cudaHostUnregister")
    return _NoPinCudart()


def _init() -> None:
    announce("torch.cuda.init", "no-op (no CUDA device to initialise)")


class _AliasLoader(importlib.abc.Loader):
    """Loads a module as another, already importable module."""

    def __init__(self, target: str) -> None:
        self.target = target

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return importlib.import_module(self.target)

    def exec_module(self, module: ModuleType) -> None:
        return None


class _PatchTorchCudaLoader(importlib.abc.Loader):
    """Runs the real ``torch.cuda`` loader, then replaces the wanted functions."""

    def __init__(self, real: importlib.abc.Loader, wanted: set[str]) -> None:
        self.real = real
        self.wanted = wanted

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.real.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.real.exec_module(module)
        if "torch.cuda.cudart" in self.wanted:
            module.cudart = _cudart  # type: ignore[attr-defined]
        if "torch.cuda.init" in self.wanted:
            module.init = _init  # type: ignore[attr-defined]


class StubFinder(importlib.abc.MetaPathFinder):
    def __init__(self, wanted: Sequence[str]) -> None:
        unknown = sorted(set(wanted) - set(KNOWN))
        if unknown:
            raise ValueError(f"LMCACHE_COMPAT_STUBS: unknown stand-ins {unknown}; known {KNOWN}")
        self.wanted = set(wanted)

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname == "torch.cuda" and self.wanted & {"torch.cuda.cudart", "torch.cuda.init"}:
            real = self._real_spec(fullname, path, target)
            if real is not None and real.loader is not None:
                real.loader = _PatchTorchCudaLoader(real.loader, self.wanted)
            return real
        if fullname.partition(".")[0] == "cupy" and "cupy" in self.wanted:
            rel = Path(*fullname.split("."))
            if (HERE / rel / "__init__.py").is_file():
                announce("cupy", f"stub package {HERE / 'cupy'}")
                return importlib.util.spec_from_file_location(
                    fullname, HERE / rel / "__init__.py", submodule_search_locations=[]
                )
            if (HERE / rel.with_suffix(".py")).is_file():
                return importlib.util.spec_from_file_location(
                    fullname, HERE / rel.with_suffix(".py")
                )
            return None
        if fullname == "lmcache.c_ops" and "lmcache.c_ops" in self.wanted:
            if importlib.util.find_spec("lmcache.non_cuda_equivalents") is None:
                return None  # nothing of the release's own to stand in: the real import runs
            announce(fullname, "lmcache.non_cuda_equivalents (the release's own)")
            return importlib.machinery.ModuleSpec(
                fullname, _AliasLoader("lmcache.non_cuda_equivalents")
            )
        return None

    def _real_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None
    ) -> importlib.machinery.ModuleSpec | None:
        for finder in sys.meta_path:
            if finder is self:
                continue
            find_spec = getattr(finder, "find_spec", None)
            if find_spec is None:
                continue
            spec: importlib.machinery.ModuleSpec | None = find_spec(fullname, path, target)
            if spec is not None:
                return spec
        return None


def install(wanted: Sequence[str]) -> StubFinder:
    finder = StubFinder(wanted)
    sys.meta_path.insert(0, finder)
    return finder
