"""The MP server command-line translator: the flags that work for release A, the flags for
release B, or the reason it cannot."""

from __future__ import annotations

import pytest

from lmcache_compat.config.mpflags import FLAG_MOVES, parse_flags, translate_mp_flags
from lmcache_compat.config.schema import load_schemas
from lmcache_compat.errors import MPFlagsError

TIER_0_3_13 = ["--host", "127.0.0.1", "--port", "5555", "--chunk-size", "256"]


def test_the_l1_size_moved() -> None:
    out = translate_mp_flags([*TIER_0_3_13, "--cpu-buffer-size", "4"], "0.3.13", "0.5.6")
    assert out.argv == ("--host", "127.0.0.1", "--port", "5555", "--chunk-size", "256",
                        "--l1-size-gb", "4")  # fmt: skip
    assert out.changes[0].startswith("0.3.14: --cpu-buffer-size -> --l1-size-gb")


def test_a_required_flag_the_command_line_cannot_give() -> None:
    with pytest.raises(MPFlagsError, match="requires --eviction-policy \\(one of LRU"):
        translate_mp_flags([*TIER_0_3_13, "--cpu-buffer-size", "4"], "0.3.13", "0.4.1")


def test_lazy_allocation_off_has_no_spelling_in_0_3_14_to_0_4_1() -> None:
    argv = [*TIER_0_3_13, "--cpu-buffer-size", "4", "--disable-lazy-alloc"]
    with pytest.raises(MPFlagsError, match="--no-l1-use-lazy"):
        translate_mp_flags(argv, "0.3.13", "0.4.1")
    out = translate_mp_flags(argv, "0.3.13", "0.5.6")
    assert "--no-l1-use-lazy" in out.argv


def test_http_server_host_and_port_changed_meaning() -> None:
    argv = ["--host", "0.0.0.0", "--port", "8000", "--zmq-host", "127.0.0.1", "--zmq-port",
            "5555", "--cpu-buffer-size", "4"]  # fmt: skip
    out = translate_mp_flags(argv, "0.3.13", "0.5.6", "http_server")
    assert out.argv[:8] == ("--http-host", "0.0.0.0", "--http-port", "8000", "--host",
                            "127.0.0.1", "--port", "5555")  # fmt: skip


def test_values_renamed_and_defaults_kept() -> None:
    out = translate_mp_flags(
        ["--transfer-mode", "non_gpu", "--l1-size-gb", "4", "--eviction-policy", "LRU"],
        "0.4.6",
        "0.5.6",
    )
    assert out.argv[:2] == ("--supported-transfer-mode", "engine_driven")
    out = translate_mp_flags(["--l1-size-gb", "4", "--eviction-policy", "LRU"], "0.5.2", "0.5.6")
    assert "--separate-object-groups" in out.argv  # 0.5.2's default True, 0.5.6's False
    assert out.argv[-2:] == ("--supported-transfer-mode", "auto") or "auto" in out.argv
    plain = translate_mp_flags(
        ["--l1-size-gb", "4", "--eviction-policy", "LRU"], "0.5.2", "0.5.6", keep_defaults=False
    )
    assert plain.argv == ("--l1-size-gb", "4", "--eviction-policy", "LRU")


def test_a_hidden_deprecated_flag_is_renamed() -> None:
    argv = ["--l1-size-gb", "4", "--eviction-policy", "LRU", "--coordinator-l2-event-reporting"]
    out = translate_mp_flags(argv, "0.4.7", "0.5.6", "http_server", keep_defaults=False)
    assert "--coordinator-event-reporting" in out.argv


def test_a_downgrade_that_loses_a_flag_says_why_or_drops_it_when_allowed() -> None:
    argv = ["--l1-size-gb", "4", "--eviction-policy", "LRU", "--transport", "zmq"]
    with pytest.raises(MPFlagsError, match="--transport: not yet a flag in LMCache"):
        translate_mp_flags(argv, "0.5.6", "0.5.4", keep_defaults=False)
    out = translate_mp_flags(argv, "0.5.6", "0.5.4", keep_defaults=False, allow_loss=True)
    assert "--transport" not in out.argv and out.lost


def test_bad_command_lines() -> None:
    flags = load_schemas().row("0.5.6").mp_commands["server"]
    with pytest.raises(MPFlagsError, match="'--nope' is not a flag"):
        parse_flags(["--nope"], flags, "x")
    with pytest.raises(MPFlagsError, match="needs a value"):
        parse_flags(["--l1-size-gb"], flags, "x")
    with pytest.raises(MPFlagsError, match="takes no value"):
        parse_flags(["--no-l1-use-lazy=1"], flags, "x")
    assert parse_flags(["--l1-size-gb=4"], flags, "x")[0].values == ("4",)
    with pytest.raises(MPFlagsError, match="has no server MP command line"):
        translate_mp_flags([], "0.3.9", "0.5.6")


def test_every_move_names_its_evidence() -> None:
    assert all(m.evidence for m in FLAG_MOVES)
