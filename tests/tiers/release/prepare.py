"""commands_pre of each ``release-X`` tox env: install LMCache X (``--no-deps``) and check it.

    python tests/tiers/release/prepare.py ENV_NAME ENV_TMP_DIR

``ENV_NAME`` is ``release-X``. A release whose only artifact is an sdist that cannot be built
here (0.3.0: its build compiles CUDA extensions) is fetched instead, its sha256 checked against
the shipped matrix, and scanned by the tests (``ENV_TMP_DIR/<artifact>``).
"""

from __future__ import annotations

import sys

from tests.tiers.release.check_installed import main as check_installed
from tests.tiers.release.fetch_sdist import main as fetch_sdist
from tools.uv_install import uv_install

PREFIX = "release-"


def release_of(env_name: str) -> str:
    if not env_name.startswith(PREFIX):
        raise SystemExit(f"{env_name}: not a release-X tox env")
    return env_name[len(PREFIX) :]


def main(env_name: str, tmp: str) -> int:
    from lmcache_compat.upstream.matrix import load_matrix

    version = release_of(env_name)
    row = load_matrix().row(version)
    if row.artifact.endswith(".tar.gz"):
        return fetch_sdist(version, tmp)
    uv_install(f"lmcache=={version}", compile_bytecode=False)
    return check_installed(version)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
