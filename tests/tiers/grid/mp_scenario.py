"""Both MP connectors over one vLLM x LMCache pair, built and bound (no server needed).

Run by :mod:`tests.tiers.grid.driver` inside the child of one MP release (0.3.13 on; vLLM and
torch imported by the parent, the release's ``--target`` dir first on ``sys.path``). For each
connector of :data:`lmcache_compat.upstream.grid.MP_CONNECTOR_KEYS` -- ``vllm-mp``: whatever
vLLM runs as ``LMCacheMPConnector`` (its in-tree class, or LMCache's own module where vLLM hands
over: vLLM's module decides at import); ``compat-mp``: ``LMCacheCompatMPConnector`` -- it records
one cell per aspect of :data:`lmcache_compat.upstream.grid.MP_ASPECTS`:

* ``builds``: vLLM's real ``Scheduler`` builds the scheduler role through its real
  ``KVConnectorFactory`` (the connector's own ``__init__``: the release's
  ``LMCacheMPSchedulerAdapter`` is constructed against ``tcp://127.0.0.1:<unused port>``; ZMQ
  connects lazily, so no server is needed);
* ``worker``: ``KVConnectorFactory.create_connector`` builds the worker role (the call vLLM's
  ``ensure_kv_transfer_initialized`` makes) after a gloo ``init_distributed_environment``, then
  ``shutdown``.

Every detail is one deterministic line (machine paths, addresses and ports removed). The same
``kv_connector_extra_config`` (``lmcache.mp.host`` / ``lmcache.mp.port``) is given to both: the
class name is the only difference.
"""

from __future__ import annotations

import re
import signal
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.tiers.grid.mp_cells import NEEDS_SERVER, NEEDS_SERVER_PREFIX
from tests.tiers.real.scheduler import harness as h

#: connector key -> (kv_connector, kv_connector_module_path)
MP_CONNECTORS: dict[str, tuple[str, str | None]] = {
    "vllm-mp": ("LMCacheMPConnector", None),
    "compat-mp": ("LMCacheCompatMPConnector", "lmcache_compat.vllm"),
}
#: Seconds a request to the (absent) server waits: a connector that asks the server while it is
#: built fails after this (recorded), instead of waiting the default 300 s.
MQ_TIMEOUT = 2.0
#: Seconds a role may take to build: releases before 0.4.2 have no ``mq_timeout`` and wait for
#: the absent server without end (their first request, the chunk size, blocks in ZMQ).
BUILD_TIMEOUT = 15


class BuildTimeout(Exception):
    """Raised (by SIGALRM, in the forked child's main thread) into a build that waits."""


@contextmanager
def time_limit(seconds: int) -> Iterator[None]:
    def expire(signum: int, frame: object) -> None:
        raise BuildTimeout(f"{NEEDS_SERVER}: still waiting for the server after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


_PATH = re.compile(r"(?<![\w:/])(/[^\s:'\"]+)+")
_PORT = re.compile(r"127\.0\.0\.1:\d+")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _line(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    text = _PATH.sub("<path>", _PORT.sub("127.0.0.1:PORT", text))
    return f"{type(exc).__name__}: {text}".strip()[:300]


def cell(status: str, detail: str) -> dict[str, str]:
    return {"status": status, "detail": detail}


def run_mp_connector(key: str, tmp: Path) -> dict[str, Any]:
    """Every MP aspect of one connector; ``facts`` says which class vLLM ran."""
    from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory
    from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorRole

    name, module = MP_CONNECTORS[key]
    tmp.mkdir(parents=True, exist_ok=True)
    extra = {
        "lmcache.mp.host": "tcp://127.0.0.1",
        "lmcache.mp.port": _free_port(),
        "lmcache.mp.mq_timeout": MQ_TIMEOUT,
    }
    cells: dict[str, dict[str, str]] = {}
    facts: dict[str, Any] = {}
    try:  # VllmConfig itself imports the connector class
        config = h.make_vllm_config(tmp, name, module, extra_config=extra)
        with time_limit(BUILD_TIMEOUT):
            scheduler = h.make_scheduler(config)
    except BaseException as exc:
        line = _line(exc)
        if NEEDS_SERVER in line:  # the release's adapter connects while it is built
            cells["builds"] = cell("n/a", NEEDS_SERVER_PREFIX + line)
        else:
            cells["builds"] = cell("broken", f"the scheduler role does not build: {line}")
        return {"cells": cells, "facts": facts}
    connector = scheduler.connector
    cls = type(connector)
    facts["class"] = f"{cls.__module__}.{cls.__qualname__}"
    reference = getattr(connector, "reference", None)
    if reference is not None:
        facts["reference"] = reference.name
        facts["keys"] = sorted(reference.keys)
    cells["builds"] = cell("ok", f"scheduler role: {facts['class']}")
    with _suppress():
        scheduler.shutdown()
    try:
        h.init_worker_process(config, tmp)
        with time_limit(BUILD_TIMEOUT):
            worker = KVConnectorFactory.create_connector(
                config, KVConnectorRole.WORKER, h.make_kv_cache_config(config, 64)
            )
    except BaseException as exc:
        line = _line(exc)
        if NEEDS_SERVER in line:
            cells["worker"] = cell("n/a", NEEDS_SERVER_PREFIX + line)
        else:
            cells["worker"] = cell("broken", f"the worker role does not build: {line}")
        return {"cells": cells, "facts": facts}
    try:
        worker.shutdown()
        cells["worker"] = cell("ok", "worker role built and shut down")
    except BaseException as exc:
        cells["worker"] = cell("degraded", f"worker role built; shutdown raises {_line(exc)}")
    return {"cells": cells, "facts": facts}


class _suppress:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> bool:
        return True
