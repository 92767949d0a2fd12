"""The ``releases`` tier: one real LMCache release per tox env (``pip install --no-deps``).

tox sets ``LMCACHE_RELEASE`` (and, for 0.3.0, which cannot be installed here, ``LMCACHE_ARTIFACT``
to its sdist fetched from PyPI). Nothing here imports LMCache.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from lmcache_compat import installed_lmcache_version
from lmcache_compat.matrix import load_matrix
from lmcache_compat.scanner import scan
from lmcache_compat.versions import parse_version
from tests.behaviour import check_row_behaviour

pytestmark = pytest.mark.release

RELEASE = os.environ.get("LMCACHE_RELEASE", "")
ARTIFACT = os.environ.get("LMCACHE_ARTIFACT", "")


@pytest.fixture(scope="module")
def row():  # type: ignore[no-untyped-def]
    assert RELEASE, "run through tox: LMCACHE_RELEASE names the release under test"
    return load_matrix().row(RELEASE)


def _target() -> str | None:
    return ARTIFACT or None


def test_scan_equals_the_shipped_row(row) -> None:  # type: ignore[no-untyped-def]
    data = scan(_target()).to_json()
    expected = row.scan_json()
    keys = (
        "lmcache_version",
        "capabilities",
        "surfaces",
        "properties",
        "details",
        "missing_classes",
    )
    for key in keys:
        assert data[key] == expected[key], key


def test_installed_version_is_right(row) -> None:  # type: ignore[no-untyped-def]
    if ARTIFACT:
        # 0.3.0 ships only an sdist whose build needs CUDA: nothing is installed, and the
        # version comes from the sdist's PKG-INFO instead.
        assert installed_lmcache_version() is None
        assert Path(ARTIFACT).name == row.artifact
        assert scan(ARTIFACT).version == RELEASE
    else:
        assert installed_lmcache_version() == parse_version(RELEASE)


def test_adapters_over_fakes_of_this_row_behave_per_catalog(row) -> None:  # type: ignore[no-untyped-def]
    check_row_behaviour(row)


def test_scanning_imported_nothing() -> None:
    code = (
        f"import sys; from lmcache_compat.scanner import scan; scan({_target()!r}); "
        "bad = [m for m in sys.modules if m.split('.')[0] in ('lmcache', 'torch', 'vllm')]; "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_doctor_reports_this_release(row) -> None:  # type: ignore[no-untyped-def]
    r = subprocess.run(
        [sys.executable, "-m", "lmcache_compat", "doctor", "--json"], capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr
    import json

    report = json.loads(r.stdout)
    assert report["lmcache"] == (None if ARTIFACT else RELEASE)
    if not ARTIFACT:  # what doctor expects from the version is what the release has
        expected = {c["capability"]: c["expected"] == "yes" for c in report["capabilities"]}
        assert expected == dict(row.capabilities)
