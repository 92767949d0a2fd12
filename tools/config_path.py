"""The path one ``lmcache-compat config check`` takes through ``lmcache_compat/config/``: the
files its calls enter, in order, and how often it goes back to a file it had already left.

A profiler (:func:`sys.setprofile`) records the file of every Python ``call`` event whose code
lives in ``lmcache_compat/config/`` (module bodies run by the command's lazy imports included);
consecutive repeats collapse into one visit. A file met again after another one is a *return*.
Arranged by question, each file is one stretch (no return).

    python -m tools.config_path            # the sample below, against LMCache 0.5.6
    python -m tools.config_path FILE [--lmcache VERSION] [--no-env]

Printed twice: counting every call, and counting only calls that enter a file from another
one (a file's calls to its own functions are not a visit).
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

#: A file a ``config check`` has something to say about on every line: a rename, a key removed
#: since, a duplicate, a value read differently, an unknown EC override, and plain keys.
SAMPLE = (
    "# written for 0.3.5\n"
    "chunk_size: 256\n"
    "plugin_locations: [/p]\n"
    "error_handling: false\n"
    "local_cpu: yes\n"
    "max_local_cpu_size: lots\n"
    "chunk_size: 512\n"
    "ec_nope: 1\n"
)
#: The environment beside it: a variable nothing reads, and a key's variable with a bad value.
SAMPLE_ENV = {"LMCACHE_NOPE": "1", "LMCACHE_CHUNK_SIZE": "abc"}


@dataclass(frozen=True)
class Visits:
    """The collapsed sequence of config/ files one run entered."""

    visits: tuple[str, ...]
    #: ``(caller, callee)`` for every call from one config/ file into another.
    edges: frozenset[tuple[str, str]] = frozenset()

    @property
    def files(self) -> int:
        return len(set(self.visits))

    @property
    def returns(self) -> int:
        """Visits to a file the run had already left."""
        return len(self.visits) - self.files


def _config_dir() -> str:
    from lmcache_compat import config

    return os.path.dirname(os.path.abspath(config.__file__)) + os.sep


@contextlib.contextmanager
def _recording(
    into: list[str], entered: bool, edges: set[tuple[str, str]] | None = None
) -> Iterator[None]:
    root = _config_dir()

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        name = frame.f_code.co_filename
        caller = frame.f_back.f_code.co_filename if frame.f_back else ""
        if name.startswith(root) and not (entered and caller == name):
            short = name[len(root) :]
            if edges is not None and caller.startswith(root) and caller != name:
                edges.add((caller[len(root) :], short))
            if not into or into[-1] != short:
                into.append(short)

    sys.setprofile(profile)
    try:
        yield
    finally:
        sys.setprofile(None)


def trace_check(
    argv: Sequence[str], environ: Mapping[str, str] | None = None, *, entered: bool = False
) -> Visits:
    """Run ``lmcache-compat config check ARGV`` in this process (output swallowed) with the
    ``LMCACHE_*`` variables of ``environ`` (the others kept), and return its path. ``entered``:
    count only calls from another file (a file *entered*), not a file's calls to itself."""
    from lmcache_compat.report.cli import main

    saved = {k: v for k, v in os.environ.items() if k.startswith("LMCACHE_")}
    for k in saved:
        del os.environ[k]
    os.environ.update(environ or {})
    visits: list[str] = []
    edges: set[tuple[str, str]] = set()
    try:
        with (
            contextlib.redirect_stdout(io.StringIO()),
            contextlib.redirect_stderr(io.StringIO()),
            _recording(visits, entered, edges),
        ):
            main(["config", "check", *argv])
    finally:
        for k in [k for k in os.environ if k.startswith("LMCACHE_")]:
            del os.environ[k]
        os.environ.update(saved)
    return Visits(tuple(visits), frozenset(edges))


def trace_sample(version: str = "0.5.6", *, entered: bool = False) -> Visits:
    """:func:`trace_check` on :data:`SAMPLE` with :data:`SAMPLE_ENV`, against ``version``."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "lmcache.yaml")
        path.write_text(SAMPLE)
        return trace_check([str(path), "--lmcache", version], SAMPLE_ENV, entered=entered)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    for entered in (False, True):
        path = (
            trace_check(args, os.environ, entered=entered)
            if args
            else trace_sample(entered=entered)
        )
        what = "files entered from another" if entered else "every call"
        print(f"{what}: {' -> '.join(path.visits)}")
        print(f"  files: {path.files}, visits: {len(path.visits)}, returns: {path.returns}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
