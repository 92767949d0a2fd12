"""The configuration scan reads a release's config modules with ast (nothing imported): key
tables, the loader facts read from the code, the environment names, the MP flags. Day one: a
release that moves its tables or changes its resolver is read from its own code."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from lmcache_compat.errors import NotLMCacheError
from lmcache_compat.upstream.config_scan import scan_config
from tests.support.archives import make_tree, make_wheel

CONFIG_BASE = """
import os, yaml
def _to_bool(value):
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in ["true", "1"]
def _apply_env_converter_safely(config_definitions, name, value):
    return value
def _resolve_config_aliases(
    config_dict, source, config_definitions, config_aliases, deprecated_configs
):
    resolved = {}
    for key, value in config_dict.items():
        if key in deprecated_configs:
            if key in config_aliases:
                resolved[config_aliases[key]] = value
        elif key in config_definitions:
            resolved[key] = value
        else:
            logger.warning("Unknown configuration key: %s (source: %s)", key, source)
    return resolved
def create_config_class(
    config_name, config_definitions, config_aliases=None, deprecated_configs=None,
    env_prefix="LMCACHE_",
):
    def _from_file(cls, file_path):
        with open(file_path) as fin:
            file_config = yaml.safe_load(fin) or {}
    def _update_config_from_env(self):
        all_keys = list(config_definitions.keys()) + list(config_aliases.keys())
        for name in all_keys:
            os.getenv(f"{env_prefix}{name.upper()}")
"""

CONFIG = """
from typing import Optional
from lmcache.v1.config_base import create_config_class, _to_bool
import requests
_CONFIG_DEFINITIONS = {
    "chunk_size": {"type": int, "default": 256, "env_converter": int},
    "local_cpu": {"type": bool, "default": True, "env_converter": _to_bool},
    "new_plugins": {"type": Optional[list[str]], "default": None, "env_converter": str},
}
_CONFIG_ALIASES = {"old_plugins": "new_plugins", "listed_only": "chunk_size"}
_DEPRECATED_CONFIGS = {"old_plugins": "old_plugins is deprecated, use new_plugins instead"}
LMCacheEngineConfig = create_config_class("LMCacheEngineConfig", _CONFIG_DEFINITIONS)
"""

UTILS = """
import os
def lmcache_get_or_create_config():
    if "LMCACHE_CONFIG_FILE" not in os.environ:
        config = LMCacheEngineConfig.from_env()
    else:
        config_file = os.environ["LMCACHE_CONFIG_FILE"]
        config = LMCacheEngineConfig.from_file(config_file)
        config.update_config_from_env()
    return config
"""

SERVER = """
import argparse
from lmcache.v1.multiprocess.config import add_mp_server_args
def parse_args():
    parser = argparse.ArgumentParser()
    add_mp_server_args(parser)
    parser.add_argument("--chunk-size", type=int, default=256)
    return parser.parse_args()
"""

MP_CONFIG = """
import argparse
DEFAULT_PORT = 5555
def add_mp_server_args(parser):
    group = parser.add_argument_group("mp")
    group.add_argument("--host", type=str, default="localhost")
    group.add_argument("--port", type=int, default=DEFAULT_PORT)
    group.add_argument("--lazy", action=argparse.BooleanOptionalAction, default=True)
    group.add_argument("--old-flag", help=argparse.SUPPRESS)
    os_name = "LMCACHE_SERVER_URL"
"""


def _release(tmp_path: Path, **extra: str) -> Path:
    files = {
        "lmcache/v1/__init__.py": "",
        "lmcache/v1/config.py": CONFIG,
        "lmcache/v1/config_base.py": CONFIG_BASE,
        "lmcache/integration/vllm/utils.py": UTILS,
        "lmcache/v1/multiprocess/server.py": SERVER,
        "lmcache/v1/multiprocess/config.py": MP_CONFIG,
        "lmcache/other.py": 'X = "LMCACHE_LOG_LEVEL"\nP = "LMCACHE_EC_"\n',
        **extra,
    }
    return make_wheel(tmp_path / "lmcache-9.0.0-py3-none-any.whl", files, version="9.0.0")


def test_a_release_is_read_from_its_own_code(tmp_path: Path) -> None:
    data = scan_config(_release(tmp_path))
    assert data["version"] == "9.0.0"
    assert list(data["keys"]) == ["chunk_size", "local_cpu", "new_plugins"]
    assert data["keys"]["local_cpu"]["converter"] == "_to_bool"
    assert data["keys"]["chunk_size"]["env"] == "LMCACHE_CHUNK_SIZE"
    assert data["aliases"] == {"old_plugins": "new_plugins", "listed_only": "chunk_size"}
    loader = data["loader"]
    assert loader["alias_rule"] == "deprecated-only"
    assert loader["conversion_error"] == "none"
    assert loader["env_with_file"] == "overrides"
    assert loader["config_file_env"] == "LMCACHE_CONFIG_FILE"
    assert loader["env_reads_aliases"] is True
    assert loader["unknown_file_key"] == "logged"
    assert loader["empty_file"] == "defaults"
    assert data["config_imports"] == ["requests", "yaml"]
    assert "LMCACHE_LOG_LEVEL" in data["environment"]["names"]
    assert data["environment"]["prefixes"] == ["LMCACHE_EC_"]
    flags = data["mp_commands"]["server"]
    assert list(flags) == ["--host", "--port", "--lazy", "--old-flag", "--chunk-size"]
    assert flags["--port"]["default"] == 5555  # a module constant followed
    assert flags["--lazy"]["negated"] == ["--no-lazy"]
    assert flags["--old-flag"]["hidden"] is True


def test_a_resolver_that_maps_every_alias_is_read_as_such(tmp_path: Path) -> None:
    always = CONFIG_BASE.replace(
        """        if key in deprecated_configs:
            if key in config_aliases:
                resolved[config_aliases[key]] = value
        elif""",
        """        if key in config_aliases:
            resolved[config_aliases[key]] = value
        elif""",
    )
    data = scan_config(_release(tmp_path, **{"lmcache/v1/config_base.py": always}))
    assert data["loader"]["alias_rule"] == "always"


def test_a_getter_that_reads_no_variable_over_a_file(tmp_path: Path) -> None:
    utils = UTILS.replace("        config.update_config_from_env()\n", "")
    data = scan_config(_release(tmp_path, **{"lmcache/integration/vllm/utils.py": utils}))
    assert data["loader"]["env_with_file"] == "ignored"


def test_a_table_moved_to_a_new_module_is_found_by_name(tmp_path: Path) -> None:
    files = {
        "lmcache/v1/__init__.py": "",
        "lmcache/v1/config.py": "",
        "lmcache/inprocess/settings.py": CONFIG.replace("lmcache.v1.config_base", "x"),
    }
    wheel = make_wheel(tmp_path / "lmcache-9.1.0-py3-none-any.whl", files, version="9.1.0")
    data = scan_config(wheel)
    assert data["config_module"] == "lmcache.inprocess.settings"
    assert list(data["keys"]) == ["chunk_size", "local_cpu", "new_plugins"]


def test_the_old_dataclass_style_with_its_fallbacks(tmp_path: Path) -> None:
    config = """
import torch
from dataclasses import dataclass
from typing import Optional
def _parse_local_disk(x): return x
@dataclass
class LMCacheEngineConfig:
    chunk_size: int
    local_disk: Optional[str]
    nixl_receiver_host: Optional[str]
    @staticmethod
    def from_file(file_path):
        config = yaml.safe_load(open(file_path))
        chunk_size = config.get("chunk_size", 256)
        local_disk = config.get("local_disk", None)
        nixl_receiver_host = config.get("nixl_receiver_host", None)
        if nixl_receiver_host is None:
            nixl_receiver_host = config.get("nixl_peer_host", None)
        local_disk_path = _parse_local_disk(local_disk)
    @staticmethod
    def from_env():
        def get_env_name(attr_name):
            return f"LMCACHE_{attr_name.upper()}"
        config.chunk_size = to_int(parse_env(get_env_name("chunk_size"), config.chunk_size))
"""
    tree = make_tree(
        tmp_path / "src", {"lmcache/v1/__init__.py": "", "lmcache/v1/config.py": config}
    )
    (tmp_path / "src" / "PKG-INFO").write_text(
        "Metadata-Version: 2.1\nName: lmcache\nVersion: 0.0.1\n"
    )
    data = scan_config(tree)
    assert data["style"] == "fields"
    assert data["keys"]["chunk_size"]["default"] == 256
    assert data["keys"]["chunk_size"]["env_converter"] == "to_int"
    assert data["keys"]["local_disk"]["converter"] == "_parse_local_disk"
    assert data["file_fallbacks"] == {"nixl_peer_host": "nixl_receiver_host"}
    assert data["loader"]["alias_rule"] == "none"
    assert data["loader"]["empty_file"] == "fails"
    assert data["config_imports"] == ["torch"]


def test_not_a_release_with_a_configuration(tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "src", {"lmcache/v1/__init__.py": ""})
    with pytest.raises(NotLMCacheError, match="no LMCache engine configuration"):
        scan_config(tree)


def test_scanning_imports_nothing(tmp_path: Path) -> None:
    import subprocess

    wheel = _release(tmp_path)
    code = (
        f"import sys; from lmcache_compat.upstream.config_scan import scan_config; "
        f"scan_config({str(wheel)!r}); "
        "bad = [m for m in sys.modules if m.split('.')[0] in ('lmcache', 'yaml', 'requests')]; "
        "sys.exit(1 if bad else 0)"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
