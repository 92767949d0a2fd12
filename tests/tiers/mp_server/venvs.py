"""One venv per LMCache release, built with uv from ``constraints/lmcache-<v>.txt``.

``uv venv`` + ``uv pip install --no-deps -r constraints/lmcache-<v>.txt`` + ``uv pip install
--no-deps lmcache==<v>``: the release's own runtime dependencies at the pins generated from its
metadata (minus GPU-only packages; see ``scripts/build_mp_server_constraints.py``), torch's CPU
build from ``/opt/wheels`` (``--find-links``). uv hardlinks from its cache, so a venv costs a
few MB of disk and about a second once the cache is warm. A venv is reused while its stamp (the
constraints file's sha256 and the release) matches, and rebuilt otherwise.

    python -m tests.tiers.mp_server.venvs ROOT 0.5.6 0.5.7rc2     # build (or check) venvs
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from tools.uv_install import uv, uv_install

HERE = Path(__file__).resolve().parent
CONSTRAINTS = HERE / "constraints"
FIND_LINKS = Path("/opt/wheels")
STAMP = ".lmcache-compat-stamp"


def venv_root() -> Path:
    """Where the release venvs live: ``$LMCACHE_COMPAT_MP_TIER_VENVS`` (tox sets it under the env's
    work dir), else a folder under ``/tmp`` that survives between runs."""
    return Path(os.environ.get("LMCACHE_COMPAT_MP_TIER_VENVS", "/tmp/lmcache-compat-mp-venvs"))


def constraints_file(version: str) -> Path:
    return CONSTRAINTS / f"lmcache-{version}.txt"


def releases() -> list[str]:
    """Every release with a constraints file, oldest first."""
    from packaging.version import Version

    names = [p.name[len("lmcache-") : -len(".txt")] for p in CONSTRAINTS.glob("lmcache-*.txt")]
    return sorted(names, key=Version)


def _stamp(version: str) -> str:
    digest = hashlib.sha256(constraints_file(version).read_bytes()).hexdigest()
    return f"lmcache=={version} {digest}\n"


def ensure_venv(version: str, root: Path, *, timeout: float = 900.0) -> Path:
    """The venv's Python for ``version`` under ``root``, built first if missing or stale."""
    venv = root / version
    python = venv / "bin" / "python"
    stamp = venv / STAMP
    if python.exists() and stamp.is_file() and stamp.read_text() == _stamp(version):
        return python
    if venv.exists():
        shutil.rmtree(venv)
    root.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    if FIND_LINKS.is_dir():
        env.setdefault("UV_FIND_LINKS", str(FIND_LINKS))
    deadline = time.monotonic() + timeout

    def left() -> float:
        return max(1.0, deadline - time.monotonic())

    cmd = [*uv(), "venv", "--quiet", "--python", sys.executable, str(venv)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=left())
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr[-3000:]}")
    try:
        uv_install(
            python=python,
            requirements=constraints_file(version),
            env=env,
            timeout=left(),
            compile_bytecode=False,
        )
        uv_install(
            f"lmcache=={version}", python=python, env=env, timeout=left(), compile_bytecode=False
        )
    except RuntimeError as exc:
        raise RuntimeError(f"building the lmcache {version} venv failed: {exc}") from None
    stamp.write_text(_stamp(version))
    return python


def main(argv: list[str]) -> int:
    root = Path(argv[0])
    for version in argv[1:] or releases():
        t0 = time.monotonic()
        python = ensure_venv(version, root)
        print(f"{version}: {python} ({time.monotonic() - t0:.1f} s)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
