"""The connector's shutdown steps (lmcache_compat.vllm.shutdown) against fakes that mirror LMCache's
in-process offload server (class ``ZMQOffloadServer``: a thread blocked reading a socket, a
``close()`` that closes the socket, then joins), reached as the real engine reaches it
(``LMCacheConnectorV1Impl._manager._offload_server``, LMCache 0.4.6 ... 0.5.7rc2)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from lmcache_compat.vllm import shutdown


class ZMQOffloadServer:  # the racy order of every release 0.3.6 ... 0.5.7rc2
    def __init__(self) -> None:
        self.socket = "socket"
        self.running = True
        self.woken = threading.Event()
        self.thread = threading.Thread(target=self.woken.wait, daemon=True)
        self.thread.start()

    def offload(self, hashes: Any, slot_mapping: Any, offsets: Any) -> bool:
        raise AssertionError("the wake-up request must not store")

    def close(self) -> None:
        self.running = False
        self.socket.close(linger=0)  # type: ignore[attr-defined]
        self.thread.join(timeout=5.0)


class JoiningFirst(ZMQOffloadServer):
    def close(self) -> None:
        self.running = False
        self.thread.join(timeout=5.0)
        self.socket.close(linger=0)  # type: ignore[attr-defined]


class Manager:
    def __init__(self, server: Any) -> None:
        self._offload_server = server


class Impl:
    def __init__(self, server: Any) -> None:
        self._manager = Manager(server)


def test_the_race_is_read_from_close() -> None:
    assert shutdown.closes_under_reader(ZMQOffloadServer)
    assert not shutdown.closes_under_reader(JoiningFirst)


def test_found_by_class_name_through_the_manager() -> None:
    server = ZMQOffloadServer()
    assert list(shutdown.offload_servers(Impl(server))) == [server]
    assert list(shutdown.offload_servers(Impl(None))) == []
    server.woken.set()


def test_racy_thread_stopped_before_close(monkeypatch: pytest.MonkeyPatch) -> None:
    server = ZMQOffloadServer()
    woke: list[Any] = []

    def wake(target: Any) -> None:  # stands for the request sent to the server's socket
        woke.append(target)
        assert target.offload(hashes=[], slot_mapping=[], offsets=[]) is True
        target.woken.set()

    monkeypatch.setattr(shutdown, "_wake", wake)
    assert shutdown.stop_offload_threads(Impl(server)) == ["ZMQOffloadServer thread stopped"]
    assert woke == [server] and not server.running and not server.thread.is_alive()


def test_joining_first_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    server = JoiningFirst()
    monkeypatch.setattr(shutdown, "_wake", lambda target: pytest.fail("woken"))
    assert shutdown.stop_offload_threads(Impl(server)) == []
    assert server.running
    server.woken.set()


def test_no_zmq_no_socket_files(tmp_path: Any) -> None:
    assert shutdown.bound_socket_files(Impl(None)) == []
    left = tmp_path / "lmcache_rpc_x"
    left.write_text("")
    shutdown.remove_socket_files([str(left), str(tmp_path / "gone")])
    assert not left.exists()
