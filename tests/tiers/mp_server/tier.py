"""The MP-server tier's runner: every release's real server(s), at most two at a time, within
one wall-clock budget.

A job starts the server(s) it needs (``server.mp_server``: loopback only, stopped on exit),
runs ``compat_client.py`` under the release's venv (``venvs.ensure_venv``) against them and
records what came back, plus the server facts (ready time, RSS, listening addresses, stand-ins
imported, whether it is gone afterwards). Jobs run on two threads; a job holding two servers
takes both slots, so no more than two servers ever run at once. Every wait is bounded by the
job's cap and by what is left of the budget; a job that cannot start before the budget runs
out reports that (its tests fail, never skip).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.tiers.mp_server.server import (
    Release,
    RunningServer,
    ServerStartError,
    inspect_release,
    mp_server,
)
from tests.tiers.mp_server.survey import transfer_flags
from tests.tiers.mp_server.venvs import ensure_venv

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
CLIENT = HERE / "compat_client.py"
#: The adapters' mq_timeout in the tier: how long a lost reply takes to be noticed.
MQ_TIMEOUT = 2.0
#: Bound of each lookup poll (a live local server answers in milliseconds).
POLL_TIMEOUT = 20.0
#: How long the "server stopped answering" step waits before resuming the server: longer than
#: mq_timeout, after which releases with a health property have given up.
STALL_SECONDS = MQ_TIMEOUT + 1.0
#: The servers' L1 (CPU) cache: the tier stores a few chunks, and two servers run at once.
L1_SIZE_GB = 0.25
#: Servers and clients write the bytecode of what they import into the release's venv (uv
#: installs none): every later start of that release imports in about half the time. Only what
#: is imported is compiled (about 50 MB per venv, not the 285 MB of compiling everything).
BYTECODE = {"PYTHONDONTWRITEBYTECODE": ""}
#: Cap of one client process.
CLIENT_TIMEOUT = 240.0
#: Successful retrieves per release where the failed-retrieve steps run (8 releases: over 1,000
#: in all), each checked for a false failure; ``LMCACHE_COMPAT_MP_TIER_SUCCESSES`` overrides.
SUCCESSES = int(os.environ.get("LMCACHE_COMPAT_MP_TIER_SUCCESSES", "126"))
#: Measured (2026-12-03, real 0.4.6 and 0.4.7 servers, mq_timeout 2 s): a never-stored
#: retrieve's submit returns (after about 2 s on 0.4.6, 4 s on 0.4.7: the CPU transfer waits at
#: most mq_timeout for the server's reply, lmcache/v1/multiprocess/non_gpu_context_pickle.py:83
#: on 0.4.6) with the retrieve failed; and every later retrieve on that worker fails the same way,
#: stored keys included (each submit waits mq_timeout again). There the successes step runs
#: RETRIEVES_AFTER_A_MISS retrieves (bounded) and the test asserts each is reported failed.
RETRIEVES_FAIL_AFTER_A_MISS = ("0.4.6", "0.4.7")
RETRIEVES_AFTER_A_MISS = 3


class BudgetExhausted(RuntimeError):
    pass


@dataclass
class Budget:
    seconds: float
    start: float = field(default_factory=time.monotonic)

    def left(self) -> float:
        return self.seconds - (time.monotonic() - self.start)

    def cap(self, wanted: float) -> float:
        left = self.left()
        if left <= 1.0:
            raise BudgetExhausted(f"the tier's {self.seconds:.0f} s budget is spent")
        return min(wanted, left)


class Slots:
    """At most ``capacity`` servers at once; a job takes all the slots it needs atomically."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.free = capacity
        self.cond = threading.Condition()
        self.peak = 0

    @contextlib.contextmanager
    def take(self, n: int, budget: Budget) -> Iterator[None]:
        n = min(n, self.capacity)
        with self.cond:
            while self.free < n:
                self.cond.wait(timeout=budget.cap(5.0))
            self.free -= n
            self.peak = max(self.peak, self.capacity - self.free)
        try:
            yield
        finally:
            with self.cond:
                self.free += n
                self.cond.notify_all()


def run_client(
    python: Path, spec: dict[str, Any], env: dict[str, str], budget: Budget
) -> dict[str, Any]:
    timeout = budget.cap(CLIENT_TIMEOUT)
    spec = {**spec, "hang_report_s": max(5.0, timeout - 5.0)}
    t0 = time.monotonic()
    try:
        proc = subprocess.run(
            [str(python), str(CLIENT), json.dumps(spec)],
            capture_output=True,
            text=True,
            env=env,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        tail = (exc.stderr or b"")[-3000:]
        return {"fatal": f"client timed out after {timeout:.0f} s", "stderr": str(tail)}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        return {"fatal": f"no JSON (exit {proc.returncode})", "stderr": proc.stderr[-4000:]}
    out: dict[str, Any] = json.loads(lines[-1])
    out["client_wall_s"] = round(time.monotonic() - t0, 2)
    if "fatal" in out:
        out["stderr"] = proc.stderr[-4000:]
    return out


def server_facts(server: RunningServer) -> dict[str, Any]:
    return {
        "version": server.release.version,
        "url": server.url,
        "http_port": server.http_port,
        "frontend": server.frontend,
        "ready_s": round(server.ready_seconds, 2),
        "rss_mb": server.rss_bytes() >> 20,
        "listening": server.listening(),
        "stubs_offered": list(server.stubs),
        "stubs_used": server.stubs_used(),
        "pid": server.pid,
        "port": server.port,
    }


def stopped(facts: dict[str, Any]) -> bool:
    """After the ``with``: the process is gone and its port closed."""
    if Path(f"/proc/{facts['pid']}").exists():
        return False
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", facts["port"])) != 0


def frontend_for(release: Release) -> str:
    """The HTTP front end where the release's own one starts on CPU with these pins (0.4.x on:
    it has --http-host/--http-port); the 0.3.x front ends do not start here (stubs/README.md)."""
    return "http" if "--http-port" in release.http_args else "zmq"


class Tier:
    def __init__(
        self, venv_root: Path, tmp: Path, budget_s: float, *, max_servers: int = 2
    ) -> None:
        self.venv_root = venv_root
        self.tmp = tmp
        self.budget = Budget(budget_s)
        self.slots = Slots(max_servers)
        self.pool = ThreadPoolExecutor(max_workers=max_servers, thread_name_prefix="mp-tier")
        self.jobs: dict[str, Future[dict[str, Any]]] = {}
        self.venv_lock = threading.Lock()
        self.venv_seconds: dict[str, float] = {}

    # --- plumbing --------------------------------------------------------------------------

    def python(self, version: str) -> Path:
        with self.venv_lock:  # uv shares one cache: build one venv at a time
            t0 = time.monotonic()
            python = ensure_venv(version, self.venv_root, timeout=self.budget.cap(900.0))
            self.venv_seconds.setdefault(version, round(time.monotonic() - t0, 2))
            return python

    def _run(self, name: str, fn: Any, *args: Any) -> dict[str, Any]:
        t0 = time.monotonic()
        out: dict[str, Any] = {"job": name, "started_at_s": round(t0 - self.budget.start, 1)}
        try:
            out.update(fn(*args))
        except BudgetExhausted as exc:
            out["fatal"] = str(exc)
        except Exception as exc:
            out["fatal"] = f"{type(exc).__name__}: {exc}"
        out["job_s"] = round(time.monotonic() - t0, 2)
        out["finished_at_s"] = round(time.monotonic() - self.budget.start, 1)
        return out

    def submit(self, name: str, fn: Any, *args: Any) -> None:
        self.jobs[name] = self.pool.submit(self._run, name, fn, *args)

    def result(self, name: str) -> dict[str, Any]:
        return self.jobs[name].result(timeout=max(1.0, self.budget.left() + 60.0))

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)

    # --- jobs --------------------------------------------------------------------------------

    def release_job(self, version: str, multi: bool) -> dict[str, Any]:
        """Every step for one release: bare start (where stand-ins are needed), its server with
        the stand-ins and its CPU transfer flag, our adapters against it (and a second server
        where the release has several)."""
        python = self.python(version)
        release = inspect_release(python)
        flags = transfer_flags(release)
        front = frontend_for(release)
        tmp = self.tmp / f"release-{version}"
        out: dict[str, Any] = {
            "needs": list(release.missing_gpu_modules),
            "transfer_flags": flags,
            "frontend": front,
        }
        with self.slots.take(2 if multi else 1, self.budget):
            if release.missing_gpu_modules:
                try:
                    with mp_server(
                        release,
                        tmp / "bare",
                        stubs="never",
                        extra_env=BYTECODE,
                        l1_size_gb=L1_SIZE_GB,
                        ready_timeout=self.budget.cap(90),
                    ):
                        out["bare_start"] = "started"
                except ServerStartError as exc:
                    out["bare_start"] = "failed"
                    out["bare_error"] = exc.first_error
            with contextlib.ExitStack() as stack:
                servers = self._start(
                    stack, release, tmp, front=front, flags=flags, n=2 if multi else 1
                )
                main = servers[0]
                out["servers"] = [server_facts(s) for s in servers]
                spec: dict[str, Any] = {
                    "mode": "release",
                    "url": main.url,
                    "http_url": self._http(main),
                    "mq_timeout": MQ_TIMEOUT,
                    "poll_timeout": POLL_TIMEOUT,
                    "worker": flags is not None,
                    "server_pgid": main.pid,
                    "stall_seconds": STALL_SECONDS,
                    "successes": (
                        RETRIEVES_AFTER_A_MISS
                        if version in RETRIEVES_FAIL_AFTER_A_MISS
                        else SUCCESSES
                    ),
                }
                if multi:
                    spec["multi"] = {"url": servers[1].url, "http_url": self._http(servers[1])}
                out["client"] = run_client(python, spec, main.client_env(), self.budget)
                out["server_errors"] = _log_errors(main)
        out["stopped"] = all(stopped(f) for f in out["servers"])
        return out

    def mixed_job(self, client_version: str, server_version: str) -> dict[str, Any]:
        """Our adapters of ``client_version`` against a ``server_version`` server."""
        client_py = self.python(client_version)
        server_py = self.python(server_version)
        release = inspect_release(server_py)
        tmp = self.tmp / f"mixed-{client_version}-{server_version}"
        out: dict[str, Any] = {}
        with self.slots.take(1, self.budget), contextlib.ExitStack() as stack:
            (server,) = self._start(stack, release, tmp, front="http", flags=None, n=1)
            out["servers"] = [server_facts(server)]
            spec = {
                "mode": "mixed",
                "url": server.url,
                "http_url": self._http(server),
                "mq_timeout": MQ_TIMEOUT,
                "poll_timeout": 3 * MQ_TIMEOUT,
            }
            out["client"] = run_client(client_py, spec, server.client_env(), self.budget)
            out["server_errors"] = _log_errors(server)
        out["stopped"] = all(stopped(f) for f in out["servers"])
        return out

    def _http(self, server: RunningServer) -> str | None:
        return None if server.http_port is None else f"http://127.0.0.1:{server.http_port}"

    def _start(
        self,
        stack: contextlib.ExitStack,
        release: Release,
        tmp: Path,
        *,
        front: str,
        flags: list[str] | None,
        n: int,
    ) -> list[RunningServer]:
        """``n`` servers, one after the other (each stopped when ``stack`` closes): the first
        writes the bytecode of what a server imports, the next ones start in half the time."""
        servers = []
        for i in range(n):
            servers.append(
                stack.enter_context(
                    mp_server(
                        release,
                        tmp / f"server-{i}",
                        frontend="http" if front == "http" else "zmq",
                        extra_args=flags or (),
                        extra_env=BYTECODE,
                        l1_size_gb=L1_SIZE_GB,
                        ready_timeout=self.budget.cap(120.0),
                    )
                )
            )
        return servers


def _log_errors(server: RunningServer, limit: int = 8) -> list[str]:
    out = []
    for line in server.log_text().splitlines():
        if " ERROR" in line or line.startswith(("Traceback", "msgspec.")):
            out.append(line[:300])
    return out[:limit]


def default_budget() -> float:
    return float(os.environ.get("LMCACHE_COMPAT_MP_TIER_BUDGET_S", "900"))
