"""commands_pre of the ``sglang-0.5.23`` tox env: sglang 0.5.23's CPU recipe, every LMCache
release with an SGLang connector, the other sglang releases the backend's variants are verified
on, and the MP-server venvs of the releases the MP tests run against.

    python -m tests.tiers.sglang.prepare ENV_DIR

1. ``uv pip install --no-deps -r tests/tiers/sglang/constraints/sglang-0.5.23-cpu.txt`` into
   this interpreter's venv (torch 2.13.0's CPU build from ``UV_FIND_LINKS``: never a CUDA
   download); the installed sglang must be 0.5.23 and torch 2.13.0's CPU build;
2. each LMCache wheel release that has an SGLang connector (the shipped matrix:
   ``sglang_in_process`` or ``sglang_unified_mp``) with ``uv pip install --no-deps --target
   ENV_DIR/lmcache-releases/V``, once;
3. each sglang release a backend variant is verified on (``Variant.tested_on``) other than
   0.5.23, ``--no-deps --target ENV_DIR/sglang-releases/V`` (it runs beside these pins, with the
   stand-ins in ``stubs_gpu_only``), and what it needs besides
   (``constraints/sglang-V-extras.txt``, its own transformers) into ``.../V-extras``;
4. the MP-server venvs of the LMCache releases the MP tests use
   (``tests/tiers/mp_server/venvs.py``, under ``LMCACHE_COMPAT_MP_TIER_VENVS``).

Prints the wall time of each part.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from importlib import metadata
from pathlib import Path

from tools.lmcache_targets import install_release, release_installed
from tools.uv_install import uv_install

HERE = Path(__file__).resolve().parent
SGLANG = "0.5.23"
TORCH = "2.13.0"
CONSTRAINTS = HERE / "constraints" / f"sglang-{SGLANG}-cpu.txt"
#: The LMCache releases whose MP servers the tier starts (the unified connector's, and the
#: legacy MP connector's verified one).
MP_SERVERS = ("0.5.6", "0.5.7rc2")


def sglang_releases() -> list[str]:
    from lmcache_compat.sglang.variants import VARIANTS

    return sorted({v.tested_on for v in VARIANTS if v.tested_on and v.tested_on != SGLANG})


def lmcache_releases() -> list[str]:
    """Every LMCache wheel release with an SGLang connector."""
    from lmcache_compat.core.catalog import Capability
    from lmcache_compat.upstream.matrix import load_matrix

    wanted = (Capability.SGLANG_IN_PROCESS, Capability.SGLANG_UNIFIED_MP)
    return [
        r.version
        for r in load_matrix().rows
        if r.artifact.endswith(".whl") and any(r.has(c) for c in wanted)
    ]


def extras_file(version: str) -> Path:
    """What sglang ``version`` needs beside the 0.5.23 pins (may not exist: nothing)."""
    return HERE / "constraints" / f"sglang-{version}-extras.txt"


def install_sglang(version: str, root: Path) -> Path:
    """sglang ``version`` into ``root/V``, and its extras (if any) into ``root/V-extras``."""
    target = root / version
    if not ((target / "sglang").is_dir() and (target / f"sglang-{version}.dist-info").is_dir()):
        if target.exists():
            shutil.rmtree(target)
        uv_install(f"sglang=={version}", target=target)
    extras = extras_file(version)
    if extras.is_file():
        side = root / f"{version}-extras"
        stamp = side / ".constraints"
        if not (stamp.is_file() and stamp.read_text() == extras.read_text()):
            if side.exists():
                shutil.rmtree(side)
            uv_install(requirements=extras, target=side)
            stamp.write_text(extras.read_text())
    return target


def check_versions() -> str:
    installed, torch = metadata.version("sglang"), metadata.version("torch")
    if installed != SGLANG:
        raise SystemExit(f"installed sglang is {installed}, this tier is sglang {SGLANG}")
    if torch != f"{TORCH}+cpu":
        raise SystemExit(f"installed torch is {torch}, not {TORCH}'s CPU build ({TORCH}+cpu)")
    return f"sglang {installed}, torch {torch}"


def main(env_dir: str) -> int:
    if not os.environ.get("UV_FIND_LINKS"):
        raise SystemExit("UV_FIND_LINKS is unset: uv would download a CUDA build of torch")
    root = Path(env_dir)
    start = time.perf_counter()
    uv_install(requirements=CONSTRAINTS)
    print(f"sglang prepare: {check_versions()} ({time.perf_counter() - start:.1f} s)")
    start = time.perf_counter()
    releases = lmcache_releases()
    dest = root / "lmcache-releases"
    dest.mkdir(parents=True, exist_ok=True)
    fresh = [v for v in releases if not release_installed(dest / v, v)]
    with ThreadPoolExecutor(max_workers=4) as pool:  # mostly downloads and hardlinks
        list(pool.map(lambda v: install_release(v, dest), fresh))
    for version in sglang_releases():
        install_sglang(version, root / "sglang-releases")
    print(
        f"sglang prepare: {len(releases)} LMCache releases ({len(fresh)} new), sglang "
        f"{', '.join(sglang_releases())} ({time.perf_counter() - start:.1f} s)"
    )
    start = time.perf_counter()
    from tests.tiers.mp_server.venvs import ensure_venv, venv_root

    for version in MP_SERVERS:
        ensure_venv(version, venv_root())
    spent = time.perf_counter() - start
    print(f"sglang prepare: MP-server venvs {', '.join(MP_SERVERS)} ({spent:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
