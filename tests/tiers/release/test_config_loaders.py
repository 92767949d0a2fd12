"""The ``releases`` tier: this release's real configuration loader proves the shipped schema
and lmcache-compat's model of the loader (``tests/support/config_probes.py``).

The loader runs in a subprocess (``lmcache.v1.config`` is imported there); this process imports
no LMCache. A release whose config module needs torch (the shipped ``config_imports``: 0.3.0 ...
0.3.11, through ``lmcache.config``) cannot load it here, where torch is absent: that failure is
asserted (it proves the shipped fact), and the ``grid-vllm0.32.0`` tier, which has torch, runs
the same probes for those releases (``tests/tiers/real/test_config_loaders.py``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from lmcache_compat.config.schema import DATA_FILE, ReleaseSchema, load_schemas, shipped_block
from lmcache_compat.upstream.config_scan import scan_config
from lmcache_compat.upstream.matrix import load_matrix
from lmcache_compat.upstream.shipped import read_data
from tests.support.config_probes import (
    build_request,
    extract_sources,
    mismatches,
    probe_fails_without_torch,
    round_trip_plan,
    run_probe,
    unknown_warnings,
)

pytestmark = pytest.mark.release

RELEASE = os.environ.get("LMCACHE_COMPAT_RELEASE", "").removeprefix("release-")


@pytest.fixture(scope="module")
def schema() -> ReleaseSchema:
    assert RELEASE, "run through tox: LMCACHE_COMPAT_RELEASE names the release under test"
    return load_schemas().row(RELEASE)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path | None:
    """The sources of a release that is not installed here (0.3.0: its sdist), else ``None``
    (the installed release)."""
    artifact = load_matrix().row(RELEASE).artifact
    if artifact.endswith(".tar.gz"):
        sdist = Path(os.environ["LMCACHE_COMPAT_ENV_TMP"]) / artifact
        return extract_sources(sdist, tmp_path_factory.mktemp("sdist"))
    return None


@pytest.fixture(scope="module")
def request_(schema: ReleaseSchema) -> dict[str, Any]:
    return build_request(schema)


@pytest.fixture(scope="module")
def real(schema: ReleaseSchema, request_: dict[str, Any], site: Path | None) -> dict[str, Any]:
    if "torch" in schema.config_imports:
        error = probe_fails_without_torch(request_, site)
        assert "No module named 'torch'" in error, error[-2000:]
        return {}
    return run_probe(request_, site)


def test_a_scan_of_this_release_is_its_shipped_block() -> None:
    """What ``scripts/build_config_schema.py`` wrote for this release is what a scan of the
    installed files (0.3.0: the fetched sdist) reads today."""
    row = load_matrix().row(RELEASE)
    target = (
        str(Path(os.environ["LMCACHE_COMPAT_ENV_TMP"]) / row.artifact)
        if row.artifact.endswith(".tar.gz")
        else None
    )
    shipped = next(
        b for b in json.loads(read_data(DATA_FILE))["releases"] if b["version"] == RELEASE
    )
    assert shipped_block(scan_config(target), row.artifact, row.sha256) == shipped


def test_the_real_loader_proves_the_schema_and_the_model(
    schema: ReleaseSchema, request_: dict[str, Any], real: dict[str, Any]
) -> None:
    if not real:  # needs torch: the failure above is the check here; the grid tier loads it
        assert "torch" in schema.config_imports
        return
    assert mismatches(schema, request_, real) == []


def test_a_config_migrated_from_0_3_5_loads_without_unknown_keys(
    schema: ReleaseSchema, real: dict[str, Any]
) -> None:
    """The issue's round trip: a config in 0.3.5's documented shape, migrated to this release,
    logs no "Unknown configuration key" but for the keys the migration left in place."""
    plan = round_trip_plan(schema)
    if RELEASE == "0.5.6":
        assert plan.left == () and len(plan.rewrites) == 4, plan
    if not real:
        assert "torch" in schema.config_imports
        return
    expected = {x.key for x in plan.left} if schema.loader.unknown_file_key == "logged" else set()
    assert unknown_warnings(real, "round_trip") == expected
    assert "error" not in real["probes"]["round_trip"], real["probes"]["round_trip"]
