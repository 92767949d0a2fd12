"""A release's real ``LMCacheMPWorkerAdapter`` built without its ``__init__`` (which talks to a
server), for timing the worker's per-step calls with no server I/O
(``benchmarks/bench_mp_retrieves.py``).

``cls.__new__(cls)``, then the release's own initial state: every attribute its ``__init__``
sets to an empty container, ``None``, a bool or a number (read from its source with ``ast``, so
nothing is listed here per release), plus what ``__init__`` would have learned from the server
or built from its arguments: the model name, the ``ParallelStrategy`` (built by
:func:`lmcache_compat.mp.mp_init_kwargs`, as ``MPWorkerAdapter.create`` builds it), the chunk
size, an instance id, a set health event and a heartbeat marked started (no thread). The one
stand-in is the transfer: ``transfer_ctx.submit_retrieve`` returns the futures the caller
hands it, so every method the benchmark times (``submit_retrieve_request``, ``get_finished``,
``get_block_ids_with_load_errors``) is the release's own code.
"""

from __future__ import annotations

import ast
import inspect
import sys
import textwrap
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

_EMPTY_CALLS = {"set": set, "dict": dict, "list": list}


def _initial(value: ast.expr) -> Callable[[], Any] | None:
    """A factory for ``value`` where it is an empty container or a constant, else ``None``."""
    if isinstance(value, ast.Constant) and isinstance(value.value, (bool, int, float, type(None))):
        constant = value.value
        return lambda: constant
    if isinstance(value, (ast.Dict, ast.Set, ast.List)) and not (
        value.keys if isinstance(value, ast.Dict) else value.elts
    ):
        return {ast.Dict: dict, ast.Set: set, ast.List: list}[type(value)]
    if (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Name)
        and value.func.id in _EMPTY_CALLS
        and not value.args
        and not value.keywords
    ):
        return _EMPTY_CALLS[value.func.id]
    return None


def initial_state(cls: type) -> dict[str, Callable[[], Any]]:
    """``self.<name> = <empty container or constant>`` in ``cls.__init__``: name -> factory
    (the first assignment of a name wins)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls.__init__)))  # type: ignore[misc]
    out: dict[str, Callable[[], Any]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        if (
            isinstance(target, ast.Attribute)
            and isinstance(target.value, ast.Name)
            and target.value.id == "self"
            and target.attr not in out
        ):
            factory = _initial(value)
            if factory is not None:
                out[target.attr] = factory
    return out


class FutureTransfer:
    """``transfer_ctx`` whose ``submit_retrieve`` returns the next future of :attr:`queue`."""

    def __init__(self) -> None:
        self.queue: deque[Any] = deque()

    def submit_retrieve(self, *args: Any, **kwargs: Any) -> Any:
        return self.queue.popleft()


class _StartedHeartbeat:
    """``_heartbeat`` of a worker whose heartbeat is running (nothing runs)."""


def worker_without_server(
    cls: type, *, model_name: str = "m", block_size: int = 16, chunk_size: int = 256
) -> tuple[Any, FutureTransfer]:
    """The release's ``LMCacheMPWorkerAdapter`` ``cls``, built without its ``__init__`` (see the
    module doc), and the transfer stand-in that hands out its retrieve futures."""
    from lmcache_compat import MPConfig
    from lmcache_compat.mp import mp_init_kwargs

    module = sys.modules[cls.__module__]
    engine: Any = object.__new__(cls)
    for name, factory in initial_state(cls).items():
        setattr(engine, name, factory())
    kwargs = mp_init_kwargs(
        cls,
        MPConfig(["tcp://127.0.0.1:9"], model_name, block_size),
        None,
        parallel_strategy_cls=vars(module).get("ParallelStrategy"),
    )
    health = threading.Event()
    health.set()
    transfer = FutureTransfer()
    engine.__dict__.update(
        model_name=model_name,
        instance_id=1,  # __init__ draws a random one
        parallel_strategy=kwargs.get("parallel_strategy"),
        lmcache_tokens_per_chunk=chunk_size,
        blocks_in_chunk=chunk_size // block_size,
        _health_event=health,
        _heartbeat=_StartedHeartbeat(),
        _heartbeat_lock=threading.Lock(),
        transfer_ctx=transfer,
    )
    return engine, transfer
