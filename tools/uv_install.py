"""The one way the tiers install things: ``uv pip install --no-deps`` (nothing resolved at test
time; every version comes from a constraints file or an exact pin), into this interpreter's
environment, a ``--target`` folder, or another venv's Python."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path


def uv() -> list[str]:
    """``uv`` on ``PATH``, else the one installed in this interpreter."""
    found = shutil.which("uv")
    return [found] if found else [sys.executable, "-m", "uv"]


def uv_install(
    *what: str,
    python: str | Path = sys.executable,
    target: Path | None = None,
    requirements: Path | None = None,
    compile_bytecode: bool = True,
    env: dict[str, str] | None = None,
    timeout: float | None = None,
) -> None:
    """``uv pip install --no-deps --quiet`` of ``what`` (requirement specs or artifact paths)
    and/or ``-r requirements``, for ``python`` (or into ``target``). Raises on failure with
    uv's own error output."""
    cmd: list[str] = [*uv(), "pip", "install", "--quiet", "--no-deps", "--python", str(python)]
    if compile_bytecode:
        cmd.append("--compile-bytecode")
    if target is not None:
        cmd += ["--target", str(target)]
    if requirements is not None:
        cmd += ["-r", str(requirements)]
    cmd += what
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr[-3000:]}")
