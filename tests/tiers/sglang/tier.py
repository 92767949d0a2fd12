"""The sglang tier's plumbing: where prepare.py put things, child processes with one LMCache
(and sglang) release first on ``PYTHONPATH``, and real MP servers on loopback."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from tools.paths import ROOT

HERE = Path(__file__).resolve().parent
STUBS = HERE / "stubs"
#: Stand-ins for modules the older sglang releases import at module top and the CPU pins leave
#: out (xgrammar): only on their children's path.
GPU_ONLY_STUBS = HERE / "stubs_gpu_only"
FIXTURE = HERE / "fixtures" / "tiny-llama"
#: Quiet, local, bounded: what every child gets.
ENV = {
    "LMCACHE_TRACK_USAGE": "false",
    "DO_NOT_TRACK": "1",
    "LMCACHE_USAGE_TRACK_URL": "http://127.0.0.1:9/",
    "HF_HUB_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
}
CHILD_TIMEOUT = 240.0


def env_dir() -> Path:
    value = os.environ.get("LMCACHE_COMPAT_SGLANG_ENV")
    if not value:
        raise RuntimeError(
            "run through tox (tox -e sglang-0.5.23): LMCACHE_COMPAT_SGLANG_ENV is unset"
        )
    return Path(value)


def lmcache_target(version: str) -> Path:
    return env_dir() / "lmcache-releases" / version


def sglang_target(version: str) -> Path | None:
    """The ``--target`` dir of an sglang release other than the env's own (``None``)."""
    from importlib import metadata

    if version == metadata.version("sglang"):
        return None
    return env_dir() / "sglang-releases" / version


def child_env(
    lmcache: str, sglang: str | None = None, extra_env: dict[str, str] | None = None
) -> dict[str, str]:
    """The environment of a child with LMCache ``lmcache`` (and sglang ``sglang``) first."""
    path: list[str] = []
    target = sglang_target(sglang) if sglang is not None else None
    if target is not None:
        path.append(str(target))
        extras = target.with_name(f"{target.name}-extras")
        if extras.is_dir():  # its own transformers (constraints/sglang-V-extras.txt)
            path.append(str(extras))
    path += [str(lmcache_target(lmcache)), str(STUBS)]
    if target is not None:
        path.append(str(GPU_ONLY_STUBS))
    path.append(str(ROOT))
    return {**os.environ, **ENV, **(extra_env or {}), "PYTHONPATH": os.pathsep.join(path)}


def child_code(code: str, *, lmcache: str, timeout: float = CHILD_TIMEOUT) -> dict[str, Any]:
    """``python -c code`` beside LMCache ``lmcache``; its last ``RESULT:`` line."""
    return _run([sys.executable, "-c", code], child_env(lmcache), timeout)


def child(
    module: str,
    *args: str,
    lmcache: str,
    sglang: str | None = None,
    extra_env: dict[str, str] | None = None,
    timeout: float = CHILD_TIMEOUT,
) -> dict[str, Any]:
    """Run ``python -m module args`` with LMCache ``lmcache`` (and sglang ``sglang``) first on
    the path; the last ``RESULT: {json}`` line it prints (or the failure)."""
    return _run(
        [sys.executable, "-m", module, *args], child_env(lmcache, sglang, extra_env), timeout
    )


def _run(cmd: list[str], env: dict[str, str], timeout: float) -> dict[str, Any]:
    try:
        proc = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            env=env,
            cwd=str(ROOT),
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"child timed out after {timeout:.0f} s", "identical": False}
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT: ")]
    if not lines:
        return {"error": f"no RESULT (exit {proc.returncode})", "stderr": proc.stderr[-3000:]}
    result: dict[str, Any] = json.loads(lines[-1][len("RESULT: ") :])
    return result


def job(
    name: str,
    module: str,
    arg: str,
    *,
    lmcache: str,
    sglang: str | None = None,
    env: dict[str, str] | None = None,
    timeout: float = CHILD_TIMEOUT,
) -> dict[str, Any]:
    """One job for :func:`batch`: ``module.run(arg)`` with LMCache ``lmcache`` (and sglang
    ``sglang``) first on the path."""
    path = child_env(lmcache, sglang)["PYTHONPATH"].split(os.pathsep)
    return {
        "name": name,
        "module": module,
        "arg": arg,
        "path": path,
        "env": {**ENV, **(env or {})},
        "timeout": timeout,
    }


def batch(jobs: Sequence[dict[str, Any]], work: Path) -> dict[str, Any]:
    """Every job in a child forked from one driver that imported torch once (two at a time):
    ``{name: result}``."""
    work.mkdir(parents=True, exist_ok=True)
    spec = work / "jobs.json"
    spec.write_text(json.dumps(list(jobs)))
    timeout = sum(j["timeout"] for j in jobs) / 2 + 120
    out = _run(
        [sys.executable, "-m", "tests.tiers.sglang.driver", str(spec), str(work)],
        {**os.environ, **ENV, "PYTHONPATH": str(ROOT)},
        timeout,
    )
    if "error" in out and not any(j["name"] in out for j in jobs):
        raise RuntimeError(f"the sglang driver failed: {out}")
    return out


@contextlib.contextmanager
def server(version: str, tmp: Path, *, unified: bool) -> Iterator[Any]:
    """The release's real MP server on 127.0.0.1 (``unified``: with the CPU transfer mode the
    unified connector needs)."""
    from tests.tiers.mp_server.server import mp_server
    from tests.tiers.mp_server.venvs import ensure_venv, venv_root

    python = ensure_venv(version, venv_root())
    extra = ["--supported-transfer-mode", "auto"] if unified else []
    with mp_server(python, tmp, chunk_size=32, l1_size_gb=0.25, extra_args=extra) as running:
        yield running
