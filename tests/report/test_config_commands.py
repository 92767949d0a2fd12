"""``lmcache-compat config check | migrate | mp-flags``: output, JSON, and exit statuses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lmcache_compat.report.cli import main
from lmcache_compat.report.statuses import STATUSES

CONFIG = "# for 0.3.5\nchunk_size: 256\nplugin_locations: [/p]\nerror_handling: false\n"


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("LMCACHE_")}
    return subprocess.run(
        [sys.executable, "-m", "lmcache_compat", *args],
        capture_output=True,
        text=True,
        env={**clean, **(env or {})},
    )


@pytest.fixture
def cfg(tmp_path: Path) -> Path:
    path = tmp_path / "lmcache.yaml"
    path.write_text(CONFIG)
    return path


def test_check_exits_1_when_something_would_be_ignored(cfg: Path) -> None:
    r = _run("config", "check", str(cfg), "--lmcache", "0.5.6")
    assert r.returncode == 1, r.stderr
    assert f"{cfg}:3: plugin_locations: RENAMED (read)" in r.stdout
    assert f"{cfg}:4: error_handling: REMOVED (dropped)" in r.stdout
    assert "fix: removed in 0.3.6, no replacement" in r.stdout
    ok = _run("config", "check", str(cfg), "--lmcache", "0.3.5")
    assert ok.returncode == 0 and "nothing would be ignored" in ok.stdout


def test_check_json_and_the_environment(cfg: Path) -> None:
    env = {"LMCACHE_CONFIG_FILE": str(cfg), "LMCACHE_NOPE": "1"}
    r = _run("config", "check", "--lmcache", "0.5.6", "--json", env=env)
    data = json.loads(r.stdout)
    assert data["file"] == str(cfg) and data["lmcache"] == "0.5.6"
    assert {(f["key"], f["source"]) for f in data["findings"]} >= {
        ("LMCACHE_NOPE", "env"),
        ("plugin_locations", "file"),
    }
    assert data["ignored"] == 2 and r.returncode == 1
    quiet = _run("config", "check", str(cfg), "--lmcache", "0.3.5", "--no-env", env=env)
    assert quiet.returncode == 0


def test_check_errors_have_their_statuses(tmp_path: Path) -> None:
    codes = {s.code for s in STATUSES}
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(b"x: !!python/object/apply:os.system ['true']\n")
    assert _run("config", "check", str(bad), "--lmcache", "0.5.6").returncode == 5
    bad.write_bytes(b"a: [1\n")
    assert _run("config", "check", str(bad), "--lmcache", "0.5.6").returncode == 6
    bad.write_bytes(b"\xff: 1\n")
    r = _run("config", "check", str(bad), "--lmcache", "0.5.6")
    assert r.returncode == 6 and "not UTF-8" in r.stderr and len(r.stderr.splitlines()) == 1
    assert _run("config", "check", str(tmp_path / "no.yaml"), "--lmcache", "0.5.6").returncode == 3
    assert _run("config", "check", str(bad), "--lmcache", "9.9").returncode == 3
    assert {1, 2, 3, 5, 6, 8} <= codes


def test_without_the_extra_the_command_says_how_to_install_it(cfg: Path) -> None:
    code = (
        "import sys; sys.modules['yaml'] = None\n"
        "from lmcache_compat.report.cli import main\n"
        f"sys.exit(main(['config', 'check', {str(cfg)!r}, '--lmcache', '0.5.6']))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 8
    assert r.stderr.strip() == (
        "lmcache-compat config check: error: reading a YAML configuration needs 'yaml', which "
        "is not installed (HINT: pip install '.[config]')"  # from this checkout (install_hint)
    )


def test_migrate_prints_the_file_and_reports_on_stderr(cfg: Path) -> None:
    r = _run("config", "migrate", str(cfg), "--to", "0.5.6", "--from", "0.3.5")
    assert r.returncode == 1  # error_handling is left in place
    assert r.stdout == "# for 0.3.5\nchunk_size: 256\nruntime_plugin_locations: [/p]\n" + (
        "error_handling: false\n"
    )
    assert "line 3: plugin_locations -> runtime_plugin_locations" in r.stderr
    assert "error_handling LEFT IN PLACE: removed in 0.3.6, no replacement" in r.stderr
    assert cfg.read_text() == CONFIG


def test_migrate_writes_atomically_and_never_over_its_input(cfg: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.yaml"
    r = _run("config", "migrate", str(cfg), "--to", "0.5.6", "-o", str(out), "--json")
    data = json.loads(r.stdout)
    assert data["written"] == str(out) and out.read_text().count("runtime_plugin_locations") == 1
    same = _run("config", "migrate", str(cfg), "--to", "0.5.6", "-o", str(cfg))
    assert same.returncode == 2 and "--in-place" in same.stderr
    assert cfg.read_text() == CONFIG
    both = _run("config", "migrate", str(cfg), "--to", "0.5.6", "-o", str(out), "--in-place")
    assert both.returncode == 2


def test_mp_flags(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        ["config", "mp-flags", "--from", "0.3.13", "--to", "0.5.6", "--", "--cpu-buffer-size", "4"]
    )
    out, err = capsys.readouterr()
    assert code == 0 and out.strip() == "--l1-size-gb 4"
    assert "--cpu-buffer-size -> --l1-size-gb" in err
    code = main(
        ["config", "mp-flags", "--from", "0.5.6", "--to", "0.5.4", "--", "--transport", "zmq"]
    )
    assert code == 1 and "not yet a flag" in capsys.readouterr().err


def test_config_without_a_subcommand_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config"]) == 2
