"""The shipped configuration schema: one block per release of the matrix, from the same
artifacts, and the facts the issue names (read from the data, not restated by the code)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import lmcache_compat.config.schema as schema_mod
from lmcache_compat.config.check import check_config
from lmcache_compat.config.resolver import resolve_name
from lmcache_compat.config.schema import DATA_FILE, load_schemas, schema_for
from lmcache_compat.errors import NotInMatrixError
from lmcache_compat.upstream.matrix import load_matrix
from lmcache_compat.upstream.shipped import read_data


def test_one_block_per_release_of_the_matrix_from_the_same_artifact() -> None:
    data = json.loads(read_data(DATA_FILE))
    assert data["generated_by"] == "scripts/build_config_schema.py"
    rows = {r.version: r for r in load_matrix().rows}
    assert [b["version"] for b in data["releases"]] == list(rows)
    for block in data["releases"]:
        row = rows[block["version"]]
        assert (block["artifact"], block["sha256"]) == (row.artifact, row.sha256)


def test_key_counts() -> None:
    schemas = load_schemas()
    assert len(schemas.row("0.3.0").keys) == 28
    assert len(schemas.row("0.5.6").keys) == 108


def _applied(version: str) -> dict[str, str | None]:
    schema = load_schemas().row(version)
    return {old: resolve_name(schema, old).key for old in schema.aliases}


def test_0_3_9_applies_none_of_its_ten_aliases() -> None:
    applied = _applied("0.3.9")
    assert len(applied) == 10
    assert all(key in (None, old) for old, key in applied.items()), applied


def test_0_5_6_applies_only_the_two_plugin_aliases() -> None:
    applied = {old: key for old, key in _applied("0.5.6").items() if key not in (None, old)}
    assert applied == {
        "plugin_locations": "runtime_plugin_locations",
        "external_backends": "storage_plugins",
    }
    schema = load_schemas().row("0.5.6")
    for listed in ("enable_xpyd", "nixl_peer_host", "controller_url"):
        assert resolve_name(schema, listed).log == "unknown", listed
    # still a key: read as itself, its alias bypassed without a word
    assert resolve_name(schema, "nixl_buffer_size").key == "nixl_buffer_size"


def test_names_read_that_are_not_keys() -> None:
    schema = load_schemas().row("0.5.6")
    assert {"LMCACHE_CONFIG_FILE", "LMCACHE_LOG_LEVEL", "LMCACHE_SERVER_URL"} <= schema.env_names
    assert 38 <= len(schema.env_names) <= 45
    assert "LMCACHE_EC_" in schema.env_prefixes
    assert not any(n == schema.env_name(k) for k in schema.keys for n in schema.env_names)


def test_loader_facts_change_where_the_code_changed() -> None:
    schemas = load_schemas()
    assert schemas.row("0.3.3").style == "fields" and schemas.row("0.3.4").style == "table"
    assert schemas.row("0.3.5").loader.env_with_file == "ignored"
    assert schemas.row("0.3.6").loader.env_with_file == "overrides"
    assert schemas.row("0.3.11").loader.conversion_error == "raise"
    assert schemas.row("0.3.12").loader.conversion_error == "none"
    assert schemas.row("0.3.3").loader.unknown_file_key == "silent"
    assert schemas.row("0.3.0").file_fallbacks == {
        "nixl_peer_host": "nixl_receiver_host",
        "nixl_peer_port": "nixl_receiver_port",
    }
    assert "torch" in schemas.row("0.3.11").config_imports
    assert schemas.row("0.3.13").config_imports == ("requests", "yaml")


def test_mp_commands_per_release() -> None:
    schemas = load_schemas()
    assert "server" not in schemas.row("0.3.9").mp_commands
    assert set(schemas.row("0.5.6").mp_commands) == {
        "server", "http_server", "cli_server", "cli_coordinator"
    }  # fmt: skip
    http = schemas.row("0.5.6").mp_commands["http_server"]
    assert http["--http-host"].default == "127.0.0.1"
    assert schemas.row("0.5.6").mp_commands["cli_server"] == http


def test_deprecation_messages_written_as_one_element_tuples_read_as_text() -> None:
    message = load_schemas().row("0.3.11").deprecated["plugin_locations"]
    assert message.startswith("plugin_locations is deprecated")


def test_schema_for_a_release_neither_shipped_nor_installed() -> None:
    with pytest.raises(NotInMatrixError, match="not in the shipped configuration data"):
        schema_for("0.0.1")


def test_an_installed_release_newer_than_the_data_is_read_from_its_files(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Day one: a release the shipped data does not list is checked from its own code."""
    from lmcache_compat.upstream import config_scan
    from tests.upstream.test_config_scan import _release

    wheel = _release(tmp_path)
    real_scan = config_scan.scan_config
    monkeypatch.setattr(schema_mod, "installed_version", lambda name: "9.0.0")
    monkeypatch.setattr(config_scan, "scan_config", lambda target=None: real_scan(wheel))
    schema_mod._scanned_installed.cache_clear()
    found = schema_for(None)
    assert (found.version, found.source) == ("9.0.0", "scanned")
    (finding,) = check_config({"listed_only": 1}, found)
    assert "maps only deprecated names" in finding.detail
    schema_mod._scanned_installed.cache_clear()


def test_checking_a_mapping_needs_no_yaml_library() -> None:
    code = (
        "import sys\n"
        "from lmcache_compat.config import check_config\n"
        "assert check_config({'chunk_size': 256}, '0.5.6') == []\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('yaml', 'ruamel', 'lmcache')]\n"
        "sys.exit(1 if bad else 0)\n"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
