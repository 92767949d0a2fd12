"""The LMCACHE_* environment against a release, and the configuration a process would load."""

from __future__ import annotations

from pathlib import Path

from lmcache_compat.config.check import Finding, check_active, check_environment


def _by_key(findings: list[Finding]) -> dict[str, Finding]:
    return {f.key: f for f in findings}


def test_names_the_release_reads_are_not_findings() -> None:
    env = {
        "LMCACHE_CHUNK_SIZE": "256",
        "LMCACHE_LOG_LEVEL": "INFO",  # read by LMCache itself, not a key
        "LMCACHE_EC_CHUNK_SIZE": "128",  # the EC overrides' prefix
        "LMCACHE_CONTROLLER_CONTROLLER_PORT": "9000",  # the cache controller's own key
        "PATH": "/bin",
    }
    assert check_environment(env, "0.5.6") == []


def test_a_variable_nothing_reads_is_ignored_silently() -> None:
    found = _by_key(check_environment({"LMCACHE_CHUNKSIZE": "256"}, "0.5.6"))
    assert found["LMCACHE_CHUNKSIZE"].kind == "ignored"
    assert found["LMCACHE_CHUNKSIZE"].source == "env"


def test_lmcache_compat_variables_are_its_own_not_dropped_ones() -> None:
    # LMCACHE_COMPAT_* is this library's namespace (its sglang mode, the test tiers' settings):
    # LMCache never reads those names, and nobody should be told to unset them
    env = {"LMCACHE_COMPAT_SGLANG_MODE": "mp", "LMCACHE_COMPAT_RELEASE": "release-0.5.6"}
    assert check_environment(env, "0.5.6") == []
    # a neighbouring name outside the namespace still is a finding
    assert [f.key for f in check_environment({"LMCACHE_COMPATS": "1"}, "0.5.6")] == [
        "LMCACHE_COMPATS"
    ]


def test_renamed_and_removed_variables() -> None:
    found = _by_key(
        check_environment(
            {
                "LMCACHE_PLUGIN_LOCATIONS": "/p",
                "LMCACHE_ENABLE_XPYD": "true",
                "LMCACHE_BLEND_RECOMPUTE_RATIO": "0.2",
            },
            "0.5.6",
        )
    )
    assert found["LMCACHE_PLUGIN_LOCATIONS"].fix == "set LMCACHE_RUNTIME_PLUGIN_LOCATIONS instead"
    assert found["LMCACHE_ENABLE_XPYD"].ignored  # read (an alias name), logged unknown
    assert found["LMCACHE_ENABLE_XPYD"].fix.startswith("set LMCACHE_ENABLE_PD instead")
    assert found["LMCACHE_BLEND_RECOMPUTE_RATIO"].kind == "removed"


def test_old_and_new_variables_the_old_wins() -> None:
    found = _by_key(
        check_environment(
            {"LMCACHE_PLUGIN_LOCATIONS": "/old", "LMCACHE_RUNTIME_PLUGIN_LOCATIONS": "/new"},
            "0.5.6",
        )
    )
    assert found["LMCACHE_RUNTIME_PLUGIN_LOCATIONS"].ignored
    assert "LMCACHE_PLUGIN_LOCATIONS also sets" in found["LMCACHE_RUNTIME_PLUGIN_LOCATIONS"].detail


def test_values_parsed_differently() -> None:
    found = _by_key(
        check_environment(
            {
                "LMCACHE_SAVE_DECODE_CACHE": "yes",
                "LMCACHE_LOCAL_CPU": " true ",
                "LMCACHE_CHUNK_SIZE": "abc",
                "LMCACHE_LOOKUP_SERVER_WORKER_IDS": "[1, 2]",
            },
            "0.5.6",
        )
    )
    assert found["LMCACHE_SAVE_DECODE_CACHE"].effect == "changed"
    assert "LMCACHE_LOCAL_CPU" not in found  # 0.5.6 strips the value
    assert found["LMCACHE_CHUNK_SIZE"].effect == "dropped"
    assert "comma-separated, not JSON" in found["LMCACHE_LOOKUP_SERVER_WORKER_IDS"].detail
    old = _by_key(check_environment({"LMCACHE_LOCAL_CPU": " true "}, "0.3.5"))
    assert old["LMCACHE_LOCAL_CPU"].effect == "changed"  # no strip before 0.3.6
    assert (
        _by_key(check_environment({"LMCACHE_CHUNK_SIZE": "abc"}, "0.3.0"))[
            "LMCACHE_CHUNK_SIZE"
        ].effect
        == "fails"
    )


def test_variables_are_not_read_once_a_file_is_named_before_0_3_6() -> None:
    env = {"LMCACHE_CONFIG_FILE": "/etc/lmcache.yaml", "LMCACHE_CHUNK_SIZE": "512"}
    found = _by_key(check_environment(env, "0.3.5"))
    assert found["LMCACHE_CHUNK_SIZE"].fix == "put chunk_size in the file instead"
    assert check_environment(env, "0.3.6") == []


def test_a_key_without_a_converter_fails_over_a_file() -> None:
    env = {"LMCACHE_CONFIG_FILE": "/x.yaml", "LMCACHE_RETRIEVE_LOCATIONS": "LocalCPUBackend"}
    found = _by_key(check_environment(env, "0.4.2"))
    assert found["LMCACHE_RETRIEVE_LOCATIONS"].effect == "fails"
    assert check_environment(env, "0.5.6") == []


def test_the_active_configuration(tmp_path: Path) -> None:
    cfg = tmp_path / "lmcache.yaml"
    cfg.write_text("chunk_size: 256\nbogus: 1\n")
    env = {"LMCACHE_CONFIG_FILE": str(cfg), "LMCACHE_CHUNK_SIZE": "512"}
    path, findings = check_active(env, "0.5.6")
    assert path == str(cfg)
    found = _by_key(findings)
    assert found["bogus"].line == 2
    assert "LMCACHE_CHUNK_SIZE is set and overrides it" in found["chunk_size"].detail
    path, findings = check_active({}, "0.5.6")
    assert (path, findings) == (None, [])
