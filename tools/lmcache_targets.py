"""LMCache releases installed side by side (``uv pip install --no-deps --target DIR/VERSION``)
and the quiet environment a fresh process imports vLLM or LMCache in: what the real tiers, the
grid's ``prepare`` step and the benchmarks share."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from tools.uv_install import uv_install


def quiet_env(tmp: Path) -> dict[str, str]:
    """Environment for importing vLLM/LMCache offline without writing outside ``tmp``."""
    env = dict(os.environ)
    for key, sub in {
        "VLLM_CACHE_ROOT": "vllm",
        "XDG_CACHE_HOME": "xdg",
        "HF_HOME": "hf",
        "PROMETHEUS_MULTIPROC_DIR": "prometheus",
        "TORCHINDUCTOR_CACHE_DIR": "inductor",
        "TMPDIR": "tmp",
    }.items():
        (tmp / sub).mkdir(parents=True, exist_ok=True)
        env[key] = str(tmp / sub)
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", LMCACHE_DISABLE_BANNER="1")
    return env


def release_installed(target: Path, version: str) -> bool:
    return (target / "lmcache").is_dir() and (target / f"lmcache-{version}.dist-info").is_dir()


def install_release(version: str, releases_dir: Path) -> Path:
    """``uv pip install --no-deps --target RELEASES_DIR/VERSION lmcache==VERSION`` (kept if
    present)."""
    target = releases_dir / version
    if release_installed(target, version):
        return target
    if target.exists():
        shutil.rmtree(target)
    uv_install(f"lmcache=={version}", target=target)
    return target


def release_dir(version: str, dest: Path) -> Path:
    """Where :func:`install` puts (or finds) LMCache ``version``: the grid tier's shared
    ``$LMCACHE_COMPAT_GRID_RELEASES/VERSION`` when it holds the release, else ``dest/VERSION``."""
    shared = os.environ.get("LMCACHE_COMPAT_GRID_RELEASES")
    if shared and (Path(shared) / version / "lmcache").is_dir():
        return Path(shared) / version
    return dest / version


def install(version: str, dest: Path) -> Path:
    """LMCache ``version`` installed with ``--no-deps --target`` (kept if present; the grid
    tier's copy when there is one, see :func:`release_dir`)."""
    target = release_dir(version, dest)
    if (target / "lmcache").is_dir():
        return target
    return install_release(version, dest)
