"""The connector's configuration check when it is built (decided without vLLM): logged once per
process from the scheduler side; without PyYAML it says once that it skipped the check."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

import lmcache_compat.config.schema as schema_mod
from lmcache_compat.installation import install_hint
from lmcache_compat.vllm import startup_config as sc


class Role:
    def __init__(self, name: str) -> None:
        self.name = name


@pytest.fixture
def installed_0_5_6(monkeypatch: pytest.MonkeyPatch) -> None:
    shipped = schema_mod.load_schemas().row("0.5.6")
    monkeypatch.setattr(schema_mod, "schema_for", lambda version=None: shipped)


@pytest.fixture(autouse=True)
def fresh_process() -> None:
    sc.ONCE.reset()


def test_only_the_scheduler_side_checks() -> None:
    assert sc.wants_config_check(Role("SCHEDULER"))
    assert not sc.wants_config_check(Role("WORKER"))
    assert sc.wants_config_check(object())


def test_without_pyyaml_it_says_it_skipped_the_check() -> None:
    record = sc.startup_check({}, yaml_installed=False)
    assert record.level == logging.INFO
    assert record.lines == (
        "LMCacheCompatConnector: skipped checking the LMCache configuration: PyYAML is not "
        f"installed (HINT: {install_hint('config')})",
    )


def test_findings_are_a_warning_with_their_fixes(installed_0_5_6: None, tmp_path: Path) -> None:
    cfg = tmp_path / "lmcache.yaml"
    cfg.write_text("chunk_size: 256\nplugin_locations: [/p]\nerror_handling: true\n")
    record = sc.startup_check({"LMCACHE_CONFIG_FILE": str(cfg)}, yaml_installed=True)
    assert record.level == logging.WARNING
    head, *lines = record.lines
    assert head.startswith("LMCacheCompatConnector: LMCache 0.5.6 would ignore 1 and rename")
    assert lines[0].startswith("  line 2: plugin_locations: renamed")
    assert (
        lines[1].startswith("  line 3: error_handling: removed") and "fix: removed in" in lines[1]
    )


def test_a_clean_configuration_is_one_info_line(installed_0_5_6: None) -> None:
    record = sc.startup_check({"LMCACHE_CHUNK_SIZE": "256"}, yaml_installed=True)
    assert record == sc.StartupCheck(
        logging.INFO,
        ("LMCacheCompatConnector: LMCache 0.5.6 reads the LMCACHE_* environment as written",),
    )


def test_an_unreadable_file_is_a_warning_not_an_error(
    installed_0_5_6: None, tmp_path: Path
) -> None:
    record = sc.startup_check({"LMCACHE_CONFIG_FILE": str(tmp_path)}, yaml_installed=True)
    assert record.level == logging.WARNING and "could not check" in record.lines[0]


def test_a_missing_file_is_a_finding(installed_0_5_6: None) -> None:
    """LMCache's from_file fails on it at start-up: said as a finding, never "could not check"."""
    record = sc.startup_check({"LMCACHE_CONFIG_FILE": "/nonexistent.yaml"}, yaml_installed=True)
    assert record.level == logging.WARNING and "would ignore 1" in record.lines[0]
    assert "does not exist" in record.lines[1] and "FileNotFoundError" in record.lines[1]


def test_logged_once_per_process(installed_0_5_6: None, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="lmcache_compat.config"):
        assert sc.log_startup_check({}) is True
        assert sc.log_startup_check({}) is False
    assert [r.name for r in caplog.records] == ["lmcache_compat.config"]


def test_many_findings_are_cut_short(installed_0_5_6: None) -> None:
    env = {f"LMCACHE_NOPE_{i}": "1" for i in range(30)}
    record = sc.startup_check(env, yaml_installed=True)
    assert len(record.lines) == 1 + sc.SHOWN + 1
    assert record.lines[-1] == "  ... and 10 more"
