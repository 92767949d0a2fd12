"""tox's inline plugin (tox 4 loads ``toxfile.py`` beside ``tox.ini``): the tiers that need another
Python find it on any machine, and a missing one is reported, not guessed at.

The ``scan-python3XX`` envs run on CPython 3.XX. It is looked for, in order, on ``PATH``
(``python3.XX``; a pyenv shim for a version pyenv has not activated fails to run and is passed
over), under pyenv (``$PYENV_ROOT``, else ``~/.pyenv``: ``versions/3.XX.*``, the newest patch
release first) and among uv's managed interpreters already installed (``uv python find
--managed-python``, never a download). Each candidate is run once to check what it is.

When none is found, the env is not run: one line names the interpreter and how to get it here
(the distribution's package where its package index has one, else pyenv, else uv), and the rest
of the run goes on. With ``CI`` set the same line fails the env, so CI still proves every tier.
The line is also written to ``{work_dir}/not-run-<env>.txt`` for ``.ci/summary.py``.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

_Hook = TypeVar("_Hook", bound=Callable[..., None])


def _impl(func: _Hook) -> _Hook:
    """tox's hook marker (a plain function where tox is absent: the unit tests)."""
    try:
        from tox.plugin import impl
    except ImportError:  # imported by tests/test_toxfile.py, where tox is not installed
        return func
    marked: _Hook = impl(func)
    return marked


#: tox env name -> the CPython ``major.minor`` it runs on.
ENV = re.compile(r"^scan-python(3)(\d+)$")
#: What each candidate prints when run.
_PROBE = "import sys; print(sys.implementation.name, '%d.%d' % sys.version_info[:2])"
#: env name -> the "not run" line, for the envs whose interpreter is missing.
MISSING: dict[str, str] = {}


def wanted_version(env_name: str) -> str | None:
    match = ENV.match(env_name)
    return f"{match.group(1)}.{match.group(2)}" if match else None


def is_cpython(path: str | Path, version: str) -> bool:
    """Whether ``path`` runs, and is CPython ``version``."""
    try:
        done = subprocess.run(
            [str(path), "-c", _PROBE], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0 and done.stdout.split() == ["cpython", version]


def _on_path(version: str, path: str) -> list[Path]:
    out = []
    for folder in path.split(os.pathsep):
        candidate = Path(folder or ".") / f"python{version}"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            out.append(candidate)
    return out


def pyenv_root(environ: dict[str, str]) -> Path:
    return Path(environ.get("PYENV_ROOT") or Path(environ.get("HOME", "~")).expanduser() / ".pyenv")


def _under_pyenv(version: str, environ: dict[str, str]) -> list[Path]:
    versions = pyenv_root(environ) / "versions"
    if not versions.is_dir():
        return []
    found = []
    for entry in versions.iterdir():
        match = re.fullmatch(rf"{re.escape(version)}\.(\d+)", entry.name)  # 3.10.13, not 3.10-dev
        if match:
            found.append((int(match.group(1)), entry / "bin" / f"python{version}"))
    return [path for _, path in sorted(found, reverse=True) if path.is_file()]


def _uv_managed(version: str, environ: dict[str, str]) -> list[Path]:
    uv = shutil.which("uv", path=environ.get("PATH"))
    if uv is None:
        return []
    argv = [uv, "python", "find", "--managed-python", "--no-python-downloads", "--no-project"]
    try:
        done = subprocess.run(
            [*argv, version], capture_output=True, text=True, timeout=60, env=environ, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return []
    line = done.stdout.strip()
    return [Path(line)] if done.returncode == 0 and line else []


def find_python(version: str, environ: dict[str, str] | None = None) -> Path | None:
    """CPython ``version`` (``"3.10"``): on PATH, under pyenv, or managed by uv; ``None``."""
    env = dict(os.environ if environ is None else environ)
    for candidate in _on_path(version, env.get("PATH", "")):
        if is_cpython(candidate, version):
            return candidate
    for candidate in _under_pyenv(version, env):
        if is_cpython(candidate, version):
            return candidate
    for candidate in _uv_managed(version, env):  # asked only when nothing else has it
        if is_cpython(candidate, version):
            return candidate
    return None


def _apt_candidate(package: str) -> bool:
    """Whether the distribution's package index (as apt last read it) has ``package``."""
    if shutil.which("apt-cache") is None:
        return False
    try:
        done = subprocess.run(
            ["apt-cache", "policy", package],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    match = re.search(r"^\s*Candidate:\s*(\S+)", done.stdout, re.M)
    return match is not None and match.group(1) != "(none)"


def how_to_get(version: str, environ: dict[str, str] | None = None) -> str:
    """The way to get CPython ``version`` that works on this machine: the distribution's
    package if its index has one, else pyenv or uv where installed, else a plain statement."""
    env = dict(os.environ if environ is None else environ)
    if _apt_candidate(f"python{version}"):
        return f"apt-get install python{version} python{version}-venv"
    if shutil.which("pyenv", path=env.get("PATH")) or (pyenv_root(env) / "bin" / "pyenv").is_file():
        return f"pyenv install {version} (tox finds it under {pyenv_root(env)}/versions)"
    if shutil.which("uv", path=env.get("PATH")):
        return f"uv python install {version}"
    return f"install CPython {version} and put python{version} on PATH"


def not_run_line(env_name: str, version: str, environ: dict[str, str] | None = None) -> str:
    return (
        f"{env_name}: not run: CPython {version} not found (PATH, pyenv, uv's managed "
        f"interpreters); get it: {how_to_get(version, environ)}"
    )


@functools.cache
def _found(version: str) -> Path | None:
    return find_python(version)


@_impl
def tox_add_env_config(env_conf: Any, state: Any) -> None:
    """Point a ``scan-python3XX`` env at its interpreter; without one, make it an env that
    installs nothing (on tox's own interpreter) and that ``tox_before_run_commands`` ends."""
    version = wanted_version(env_conf.name)
    if version is None:
        return
    from tox.config.loader.memory import MemoryLoader

    found = _found(version)
    if found is not None:
        MISSING.pop(env_conf.name, None)
        env_conf.loaders.insert(0, MemoryLoader(base_python=[str(found)]))
        return
    MISSING[env_conf.name] = not_run_line(env_conf.name, version)
    env_conf.loaders.insert(
        0,
        MemoryLoader(
            base_python=[sys.executable],
            package="skip",
            deps=[],
            dependency_groups=[],
            commands_pre=[],
            commands=[],
        ),
    )


@_impl
def tox_before_run_commands(tox_env: Any) -> None:
    from tox.tox_env.errors import Fail, Skip

    name = tox_env.conf.name
    work_dir = Path(tox_env.core["work_dir"])
    marker = work_dir / f"not-run-{name}.txt"
    line = MISSING.get(name)
    if line is None:
        marker.unlink(missing_ok=True)
        return
    work_dir.mkdir(parents=True, exist_ok=True)
    marker.write_text(line + "\n", encoding="utf-8")
    (work_dir / f"junit-{name}.xml").unlink(missing_ok=True)  # no stale report passes for it
    if os.environ.get("CI"):
        raise Fail(f"{line} (CI is set: every tier must run)")
    raise Skip(line)
