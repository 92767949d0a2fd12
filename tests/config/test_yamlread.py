"""YAML read as LMCache reads it (PyYAML safe_load), with line numbers, and every hostile input
one clear line: empty, not a mapping, duplicate keys, huge, not UTF-8, anchors and aliases
(merge keys, an alias bomb), a tag that would construct an object, nesting too deep."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from lmcache_compat.budgets import Budgets
from lmcache_compat.config.yamlread import read_config_bytes, read_config_file
from lmcache_compat.errors import (
    ConfigFileError,
    MissingExtraError,
    SourceNotFoundError,
    UnsafeConfigError,
)
from lmcache_compat.installation import install_hint


def _read(text: str | bytes, budgets: Budgets | None = None):  # type: ignore[no-untyped-def]
    data = text.encode() if isinstance(text, str) else text
    return read_config_bytes(data, "cfg.yaml", budgets)


def test_the_mapping_is_what_safe_load_returns() -> None:
    text = "chunk_size: 256\nlocal_cpu: yes\nmode: 0755\nlist: [1, 2]\nnothing:\n"
    doc = _read(text)
    assert doc.mapping == yaml.safe_load(text)
    assert doc.mapping is not None and doc.mapping["local_cpu"] is True  # YAML 1.1
    assert doc.mapping["mode"] == 0o755
    assert doc.lines == {"chunk_size": 1, "local_cpu": 2, "mode": 3, "list": 4, "nothing": 5}


def test_an_empty_file_is_no_mapping() -> None:
    assert _read("").mapping is None
    assert _read("# only a comment\n").mapping is None


@pytest.mark.parametrize(
    ("text", "kind"), [("- a\n- b\n", "a list"), ("just text\n", "a scalar"), ("42\n", "a scalar")]
)
def test_a_top_level_that_is_not_a_mapping(text: str, kind: str) -> None:
    with pytest.raises(
        ConfigFileError, match=f"cfg.yaml:1: the top level is {kind}, not a mapping"
    ):
        _read(text)


def test_duplicate_keys_say_which_line_wins() -> None:
    text = "chunk_size: 128\nlocal_cpu: true\nchunk_size: 512\n"
    doc = _read(text)
    assert doc.mapping == {"chunk_size": 512, "local_cpu": True} == yaml.safe_load(text)
    assert doc.duplicates == {"chunk_size": [1, 3]}
    assert doc.lines["chunk_size"] == 3  # the winner's line


def test_anchors_aliases_and_merge_keys_as_safe_load_reads_them() -> None:
    text = (
        "base: &base {chunk_size: 256, local_cpu: true}\n"
        "<<: *base\n"
        "local_cpu: false\n"
        "paths: &p [/a, /b]\n"
        "again: *p\n"
    )
    doc = _read(text)
    assert doc.mapping == yaml.safe_load(text)
    assert doc.merged == {"chunk_size"}  # local_cpu is written in the mapping itself
    assert doc.duplicates == {}


def test_an_alias_bomb_is_refused_within_its_budget() -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 9):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]")
    with pytest.raises(UnsafeConfigError, match=r"alias bomb.*config_nodes=100000"):
        _read("\n".join(lines) + "\n")


def test_a_huge_file_is_refused_before_it_is_parsed() -> None:
    budgets = Budgets(config_bytes=1000)
    with pytest.raises(UnsafeConfigError, match="config_bytes=1000"):
        _read("k: v\n" * 400, budgets)


def test_not_utf8_names_the_line_and_byte() -> None:
    with pytest.raises(ConfigFileError, match=r"cfg.yaml:2: not UTF-8 \(byte 16"):
        _read(b"chunk_size: 256\n\xff\xfe: 1\n")


def test_a_hostile_tag_is_refused_and_never_run(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    text = f"x: !!python/object/apply:os.system ['touch {marker}']\n"
    with pytest.raises(UnsafeConfigError, match=r"cfg\.yaml:1: .*construct an object is refused"):
        _read(text)
    assert not marker.exists()
    with pytest.raises(UnsafeConfigError, match="refused"):
        _read("x: !custom 1\n")


def test_invalid_yaml_and_deep_nesting_are_one_line() -> None:
    with pytest.raises(ConfigFileError, match=r"cfg.yaml:2: not valid YAML"):
        _read("a: [1, 2\nb: 3\n")
    with pytest.raises(ConfigFileError):
        _read("a: " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(ConfigFileError, match="unhashable"):
        _read("? [a, b]\n: 1\n")


def test_files_missing_special_or_too_big(tmp_path: Path) -> None:
    with pytest.raises(SourceNotFoundError):
        read_config_file(tmp_path / "absent.yaml")
    with pytest.raises(UnsafeConfigError, match="a directory"):
        read_config_file(tmp_path)
    big = tmp_path / "big.yaml"
    big.write_text("k: v\n" * 300_000)
    with pytest.raises(UnsafeConfigError, match="config_bytes"):
        read_config_file(big)


def test_without_pyyaml_one_line_names_the_extra(tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("chunk_size: 1\n")
    code = (
        "import sys; sys.modules['yaml'] = None\n"
        "from lmcache_compat.config.yamlread import read_config_file\n"
        f"read_config_file({str(cfg)!r})\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert "MissingExtraError" in done.stderr
    assert f"(HINT: {install_hint('config')})" in done.stderr  # this checkout's: '.[config]'
    assert MissingExtraError.__mro__[1].__name__ == "LMCacheCompatError"
