"""tox.ini's lists of releases are copies of the shipped matrix, kept equal by this test."""

from __future__ import annotations

import re
from pathlib import Path

from lmcache_compat.report.releases import render, select
from lmcache_compat.upstream.matrix import load_matrix

ROOT = Path(__file__).resolve().parent.parent


def test_every_release_list_in_tox_ini_is_the_matrix() -> None:
    text = ROOT.joinpath("tox.ini").read_text()
    lists = re.findall(r"release-\{([^}]*)\}", text)
    assert len(lists) >= 4  # env_list, the ci and releases labels, the section header
    for found in lists:
        assert found.split(",") == load_matrix().versions, (
            "tox.ini's release list differs from lmcache_compat/upstream/data/releases/index.json"
        )


def test_the_example_tox_envs_are_the_distinct_releases() -> None:
    """examples/connector/tox.ini is what ``lmcache-compat releases --distinct --format tox``
    prints today."""
    text = ROOT.joinpath("examples", "connector", "tox.ini").read_text()
    assert f"env_list = {render(select('distinct'), 'tox')}\n" in text
