"""check_config / check_file over configurations in the shape of the releases' own documented
examples (the 0.3.0 sdist's examples/*.yaml and docs), against the releases they move across."""

from __future__ import annotations

from pathlib import Path

import pytest

from lmcache_compat.config.check import Finding, check_config, check_file
from lmcache_compat.errors import ConfigFileError

OFFLOAD = {"chunk_size": 256, "local_cpu": True, "max_local_cpu_size": 5.0}
DISAGG_0_3_0 = {  # examples/disagg_prefill/configs/lmcache-prefiller-config.yaml
    "local_cpu": False,
    "max_local_cpu_size": 0,
    "max_local_disk_size": 0,
    "remote_serde": None,
    "enable_nixl": True,
    "nixl_role": "sender",
    "nixl_peer_host": "localhost",
    "nixl_peer_port": 55555,
    "nixl_buffer_size": 1073741824,
    "nixl_buffer_device": "cuda",
    "nixl_enable_gc": True,
}
P2P_0_3_0 = {  # examples/kv_cache_reuse/share_across_instances/p2p_sharing/example1.yaml
    "chunk_size": 256,
    "local_cpu": True,
    "max_local_cpu_size": 5,
    "enable_p2p": True,
    "lookup_url": "localhost:8100",
    "distributed_url": "localhost:8200",
}
CONTROLLER_0_3_0 = {  # examples/cache_controller/example.yaml
    "chunk_size": 256,
    "local_cpu": True,
    "max_local_cpu_size": 5,
    "enable_controller": True,
    "lmcache_instance_id": "lmcache_default_instance",
    "controller_url": "localhost:9001",
    "lmcache_worker_url": "localhost:8001",
}
PLUGINS_0_3_9 = {"chunk_size": 256, "plugin_locations": ["/opt/p"], "external_backends": ["b"]}


def _by_key(findings: list[Finding]) -> dict[str, Finding]:
    return {f.key: f for f in findings}


@pytest.mark.parametrize("version", ["0.3.0", "0.3.5", "0.3.10.post1", "0.4.4", "0.5.6"])
def test_the_plain_offload_example_is_read_everywhere(version: str) -> None:
    assert check_config(OFFLOAD, version) == []


def test_the_disagg_example_across_its_moves() -> None:
    # 0.3.0: nixl_peer_* are the hand-written reader's fallbacks for nixl_receiver_*
    old = _by_key(check_config(DISAGG_0_3_0, "0.3.0"))
    assert old["nixl_peer_host"].kind == "renamed" and old["nixl_peer_host"].fix == (
        "use nixl_receiver_host"
    )
    assert not any(f.ignored for f in old.values())
    # 0.3.5: nixl_peer_host is the xpyd key, nixl_peer_port is deprecated and mapped
    mid = _by_key(check_config(DISAGG_0_3_0, "0.3.5"))
    assert "nixl_peer_host" not in mid
    assert mid["nixl_peer_port"].kind == "renamed" and mid["nixl_peer_port"].effect == "read"
    # 0.3.7 on: the P/D keys: enable_nixl has no one-to-one replacement; the alias table's
    # renames are listed but not applied, so the values are dropped
    new = _by_key(check_config(DISAGG_0_3_0, "0.5.6"))
    assert new["enable_nixl"].kind == "removed" and new["enable_nixl"].ignored
    assert new["enable_nixl"].fix.startswith("removed in 0.3.7, no one-to-one replacement")
    assert new["nixl_role"].fix.startswith("use pd_role (renamed in 0.3.7")
    assert "maps only deprecated names" in new["nixl_role"].detail
    assert new["nixl_enable_gc"].fix == "removed in 0.3.7, no replacement"
    assert new["nixl_peer_port"].detail.startswith("deprecated: LMCache 0.5.6 logs")
    assert "nixl_buffer_size" not in new  # still a key (the nixl storage buffer)


def test_the_p2p_and_controller_examples() -> None:
    p2p = _by_key(check_config(P2P_0_3_0, "0.3.7"))
    assert {k for k, f in p2p.items() if f.ignored} == {"lookup_url", "distributed_url"}
    assert "p2p_lookup_ports" in p2p["lookup_url"].fix
    ctl = _by_key(check_config(CONTROLLER_0_3_0, "0.3.9"))
    assert ctl["controller_url"].fix.startswith("use controller_pull_url")
    assert ctl["lmcache_worker_url"].kind == "ignored"
    assert ctl["lmcache_worker_url"].fix.startswith("remove it: not a key of any LMCache release")


def test_a_key_not_yet_in_the_target_says_where_it_starts() -> None:
    found = _by_key(check_config({"runtime_plugin_locations": ["/p"]}, "0.3.9"))
    assert found["runtime_plugin_locations"].kind == "ignored"
    assert found["runtime_plugin_locations"].fix.startswith("first a key in LMCache 0.3.10.post1")


def test_the_plugin_renames_are_read_with_a_warning() -> None:
    found = _by_key(check_config(PLUGINS_0_3_9, "0.5.6"))
    assert found["plugin_locations"].fix == "use runtime_plugin_locations"
    assert found["plugin_locations"].effect == "read" and not found["plugin_locations"].ignored


def test_typo_suggests_the_key() -> None:
    found = _by_key(check_config({"chunk_sise": 256}, "0.5.6"))
    assert found["chunk_sise"].fix.endswith("did you mean chunk_size?")


def test_legacy_configuration_keys_say_so() -> None:
    found = _by_key(check_config({"local_device": "cpu", "pipelined_backend": False}, "0.3.5"))
    assert all("legacy configuration" in f.fix for f in found.values())


@pytest.mark.parametrize(
    ("version", "value", "effect"),
    [
        ("0.3.0", "512", "changed"),  # kept as a string: 0.3.0 does not convert file values
        ("0.3.5", "512", None),  # int("512")
        ("0.3.5", "abc", "fails"),  # the conversion error propagates: the load fails
        ("0.5.6", "abc", "dropped"),  # a warning and None
        ("0.5.6", 256.7, "changed"),  # the fraction dropped
        ("0.5.6", True, "changed"),
        ("0.5.6", [1, 2], "fails"),  # TypeError is not caught
    ],
)
def test_values_read_differently(version: str, value: object, effect: str | None) -> None:
    found = check_config({"chunk_size": value}, version)
    assert [f.effect for f in found] == ([effect] if effect else [])
    assert all(f.kind == "retyped" for f in found)


def test_yaml_booleans() -> None:
    assert check_config({"save_decode_cache": True}, "0.5.6") == []
    (found,) = check_config({"save_decode_cache": "yes"}, "0.5.6")  # quoted: a string
    assert found.effect == "changed" and "reads as False" in found.detail


def test_ec_overrides() -> None:
    assert check_config({"ec_chunk_size": 128, "ec": {"local_cpu": True}}, "0.5.6") == []
    found = _by_key(check_config({"ec_bogus": 1, "ec": {"nope": 2}}, "0.5.6"))
    assert set(found) == {"ec_bogus", "ec.nope"}
    assert _by_key(check_config({"ec_chunk_size": 1}, "0.4.4"))["ec_chunk_size"].ignored


def test_check_file_lines_duplicates_and_empty(tmp_path: Path) -> None:
    cfg = tmp_path / "lmcache.yaml"
    cfg.write_text(
        "# written for 0.3.5\nchunk_size: 128\nplugin_locations: [/p]\nchunk_size: 512\n"
    )
    found = check_file(cfg, "0.5.6")
    assert [(f.line, f.key, f.kind) for f in found] == [
        (2, "chunk_size", "ignored"),
        (3, "plugin_locations", "renamed"),
    ]
    assert "line 4, which wins" in found[0].detail
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    assert check_file(empty, "0.5.6") == []
    with pytest.raises(ConfigFileError, match=r"LMCache 0\.3\.3's loader fails on an empty file"):
        check_file(empty, "0.3.3")


def test_a_finding_as_json_and_text() -> None:
    (found,) = check_config({"bogus": 1}, "0.5.6", lines={"bogus": 7})
    data = found.to_json()
    assert data == {
        "key": "bogus",
        "line": 7,
        "kind": "ignored",
        "effect": "dropped",
        "source": "file",
        "target": "0.5.6",
        "detail": "LMCache 0.5.6 logs 'Unknown configuration key' and drops it",
        "fix": "remove it: not a key of any LMCache release",
    }
    assert str(found).startswith("line 7: bogus: ignored")
