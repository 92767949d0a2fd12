"""tox.ini's lists of releases are copies of the shipped matrix, kept equal by this test."""

from __future__ import annotations

import configparser
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


def _section(name: str) -> configparser.SectionProxy:
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(ROOT / "tox.ini")
    return parser[f"testenv:{name}"]


def test_the_fuzz_env_passes_its_profile() -> None:
    """``LMCACHE_COMPAT_FUZZ_PROFILE=thorough tox -e fuzz`` runs the thorough profile: tox
    passes the variable (without it, the ci profile ran silently)."""
    assert "LMCACHE_COMPAT_FUZZ_PROFILE" in _section("fuzz")["pass_env"].split()
    source = ROOT.joinpath("tests", "tiers", "fuzz", "test_fuzz_config.py").read_text()
    assert 'os.environ.get("LMCACHE_COMPAT_FUZZ_PROFILE"' in source


def test_the_scan_python_envs_run_the_reader_contract_and_symlink_tests() -> None:
    """Issue 26: the reader-contract and symlink tests run on every supported Python, with the
    config extra (recursion windows and integer digit limits differ between interpreters)."""
    section = _section("scan-python{310,312,313}")
    assert section["extras"].strip() == "config"
    commands = section["commands"]
    for path in ("tests/test_inputs.py", "tests/config/test_migrate_writes.py"):
        assert path in commands.split(), path
        assert ROOT.joinpath(path).is_file(), path
