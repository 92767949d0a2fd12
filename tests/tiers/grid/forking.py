"""Run jobs in forked children of an interpreter that already imported the heavy modules.

The grid driver imports vLLM and torch once, then forks one child per LMCache release: each
child starts with those modules in memory (copy-on-write) and imports only what differs. A
child reports through a JSON file it rewrites after each step (:class:`Progress`), so a child
that crashes or hangs still leaves what it did up to that step; the parent never waits on a
child longer than its timeout (the child's whole process group is killed then).

POSIX only (``os.fork``). Nothing here imports vLLM.
"""

from __future__ import annotations

import contextlib
import faulthandler
import json
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["ChildOutcome", "Job", "Progress", "run_forked"]


class Progress:
    """The child's report, rewritten atomically at every :meth:`save`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.data: dict[str, Any] = {"step": None}

    def step(self, name: str) -> None:
        """Record that the child is about to do ``name`` (what a crash interrupted)."""
        self.data["step"] = name
        self.save()

    def save(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=1, sort_keys=True, default=repr))
        tmp.replace(self.path)


@dataclass(frozen=True)
class Job:
    name: str
    run: Callable[[Progress], None]
    timeout: float


@dataclass(frozen=True)
class ChildOutcome:
    name: str
    #: The child's last saved report (``{}`` if it saved none).
    report: dict[str, Any]
    #: ``None`` when the child finished its job; else how it ended, deterministic text:
    #: ``"timed out after N s"``, ``"killed by signal SIGSEGV"``, ``"exit status N"``.
    failure: str | None
    wall: float
    log: Path


def _child_main(job: Job, progress: Progress, log: Path) -> None:
    """In the forked child: own process group, output to ``log``, run, ``os._exit``."""
    code = 70
    try:
        os.setpgid(0, 0)
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        # a child about to be killed for its timeout leaves every thread's stack in its log
        faulthandler.dump_traceback_later(max(job.timeout - 2.0, 1.0), exit=False)
        job.run(progress)
        progress.data["step"] = None
        progress.save()
        code = 0
    except BaseException:
        traceback.print_exc()
        progress.data["error"] = traceback.format_exc(limit=-3).strip().splitlines()[-1]
        progress.save()
        code = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _ended(status: int) -> str | None:
    if os.WIFSIGNALED(status):
        return f"killed by signal {signal.Signals(os.WTERMSIG(status)).name}"
    code = os.WEXITSTATUS(status)
    return None if code == 0 else f"exit status {code}"


def run_forked(
    jobs: Sequence[Job], work: Path, *, parallel: int = 2, poll: float = 0.05
) -> dict[str, ChildOutcome]:
    """Fork one child per job, ``parallel`` at a time; each is killed (with its process group)
    once it has run ``job.timeout`` seconds. Returns each job's outcome by name."""
    work.mkdir(parents=True, exist_ok=True)
    pending = list(jobs)
    running: dict[int, tuple[Job, float, Path, Path]] = {}
    outcomes: dict[str, ChildOutcome] = {}

    def finish(pid: int, failure: str | None) -> None:
        job, start, report_path, log = running.pop(pid)
        try:
            report: dict[str, Any] = json.loads(report_path.read_text())
        except (OSError, ValueError):
            report = {}
        if failure is None and report.get("error"):
            failure = "exit status 1"
        outcomes[job.name] = ChildOutcome(
            job.name, report, failure, round(time.perf_counter() - start, 3), log
        )

    while pending or running:
        while pending and len(running) < parallel:
            job = pending.pop(0)
            report_path = work / f"{job.name}.json"
            log = work / f"{job.name}.log"
            report_path.unlink(missing_ok=True)
            progress = Progress(report_path)
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:  # pragma: no cover - the child never returns
                _child_main(job, progress, log)
            with contextlib.suppress(OSError):  # also here: a kill never misses the group
                os.setpgid(pid, pid)
            running[pid] = (job, time.perf_counter(), report_path, log)
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid in running:
            finish(pid, _ended(status))
            continue
        now = time.perf_counter()
        for pid, (job, start, _, _) in list(running.items()):
            if now - start > job.timeout:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                finish(pid, f"timed out after {job.timeout:g} s")
        time.sleep(poll)
    return outcomes
