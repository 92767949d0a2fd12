"""The real configuration loaders of the releases whose config module needs torch (the shipped
``config_imports``: 0.3.0 ... 0.3.11), beside this tier's torch: they prove the shipped schema
and the loader model as the ``releases`` tier does for the others
(``tests/tiers/release/test_config_loaders.py``, ``tests/support/config_probes.py``).

Runs in ``grid-vllm0.32.0`` (tox.ini sets ``LMCACHE_COMPAT_CONFIG_LOADERS``); the wheel releases
come from the grid tier's ``--target`` installs, 0.3.0 from its sdist's sources (sha256 checked).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lmcache_compat.config.schema import load_schemas
from lmcache_compat.upstream.matrix import load_matrix
from tests.support.config_probes import (
    build_request,
    extract_sources,
    mismatches,
    round_trip_plan,
    run_probe,
    unknown_warnings,
)
from tests.tiers.release.fetch_sdist import main as fetch_sdist
from tools.lmcache_targets import install

pytestmark = [
    pytest.mark.real,
    pytest.mark.skipif(
        not os.environ.get("LMCACHE_COMPAT_CONFIG_LOADERS"),
        reason="runs in grid-vllm0.32.0 (tox.ini sets LMCACHE_COMPAT_CONFIG_LOADERS)",
    ),
]

TORCH_RELEASES = [r.version for r in load_schemas().rows if "torch" in r.config_imports]


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("config-loaders")


def _site(version: str, work: Path) -> Path:
    artifact = load_matrix().row(version).artifact
    if artifact.endswith(".tar.gz"):
        fetch_sdist(version, str(work))
        return extract_sources(work / artifact, work / f"src-{version}")
    return install(version, work / "releases")


def test_the_releases_needing_torch_are_the_old_ones() -> None:
    assert TORCH_RELEASES and TORCH_RELEASES[0] == load_schemas().rows[0].version


@pytest.mark.parametrize("version", TORCH_RELEASES)
def test_the_real_loader_proves_the_schema_and_the_model(version: str, work: Path) -> None:
    schema = load_schemas().row(version)
    request = build_request(schema)
    real = run_probe(request, _site(version, work))
    assert mismatches(schema, request, real) == []
    plan = round_trip_plan(schema)
    expected = {x.key for x in plan.left} if schema.loader.unknown_file_key == "logged" else set()
    assert unknown_warnings(real, "round_trip") == expected
