"""Stand-in for ``cupy`` so that LMCache 0.3.13 ... 0.4.5 MP servers import on a CPU-only machine.

Those releases import ``cupy`` unconditionally at module level (0.3.13 in
``lmcache/v1/multiprocess/server.py``, 0.3.14 ... 0.4.5 in ``gpu_context.py``) but use it only
when a worker registers CUDA KV caches (``cupy.cuda.ExternalStream`` on the worker's CUDA
stream). This stub provides exactly the names those modules reference; every one of them
raises if it is actually used, so a GPU code path fails loudly instead of doing nothing.

Only ``tests/tiers/mp_server/server.py`` puts this directory on a server subprocess's PYTHONPATH.
"""

from __future__ import annotations

from typing import NoReturn

from . import cuda

__all__ = ["cuda", "ndarray", "uint"]
__version__ = "0.0.0+lmcache-compat-stub"
IS_STUB = True


class _Unavailable:
    def __init__(self, *args: object, **kwargs: object) -> None:
        _fail(type(self).__name__)


def _fail(name: str) -> NoReturn:
    raise RuntimeError(
        f"cupy.{name} is a CPU-only stub (tests/tiers/mp_server/stubs): no CUDA here"
    )


class ndarray(_Unavailable):
    pass


class uint(_Unavailable):
    pass
