"""migrate: the renames and safe moves, each with its source; comments, order and quoting kept;
a key with no safe mapping left in place with the reason; the input never overwritten unless
asked; --from inferred only where that is unambiguous."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from lmcache_compat.config.migrate import migrate_file, migrate_text, plan_migration
from lmcache_compat.config.schema import load_schemas
from lmcache_compat.config.yamlread import read_config_bytes
from lmcache_compat.errors import MigrationError

CONFIG_0_3_5 = """\
# LMCache configuration (written for 0.3.5)
chunk_size: 256        # tokens per chunk
local_cpu: yes
max_local_cpu_size: 5.0
remote_url: "lm://localhost:65432"

# blending
blend_recompute_ratio: 0.15
plugin_locations: ['/opt/lmcache/plugins']  # plugins
external_backends: ["my_backend"]
cufile_buffer_size: 512
error_handling: false
"""


def _write(tmp_path: Path, text: str, name: str = "lmcache.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_0_3_5_to_0_5_6_keeps_comments_order_and_quoting(tmp_path: Path) -> None:
    path = _write(tmp_path, CONFIG_0_3_5)
    result = migrate_file(path, "0.5.6", source="0.3.5")
    assert result.written is None and path.read_text() == CONFIG_0_3_5  # input untouched
    text = result.text
    assert text.splitlines()[0] == "# LMCache configuration (written for 0.3.5)"
    assert "chunk_size: 256        # tokens per chunk" in text
    assert "local_cpu: yes" in text  # YAML 1.1 boolean kept as written
    assert "runtime_plugin_locations: ['/opt/lmcache/plugins'] # plugins" in text
    assert 'storage_plugins: ["my_backend"]' in text
    assert "blend_recompute_ratios: [0.15]" in text
    assert "gds_buffer_size: 512" in text
    keys = list(yaml.safe_load(text))
    assert keys == [
        "chunk_size", "local_cpu", "max_local_cpu_size", "remote_url", "blend_recompute_ratios",
        "runtime_plugin_locations", "storage_plugins", "gds_buffer_size", "error_handling",
    ]  # fmt: skip
    plan = result.plan
    assert [(r.old, r.new) for r in plan.rewrites] == [
        ("blend_recompute_ratio", "blend_recompute_ratios"),
        ("plugin_locations", "runtime_plugin_locations"),
        ("external_backends", "storage_plugins"),
        ("cufile_buffer_size", "gds_buffer_size"),
    ]
    sources = {r.old: r.sources for r in plan.rewrites}
    assert "alias table" in sources["plugin_locations"][0]
    assert sources["blend_recompute_ratio"][0].startswith("0.3.6: ")
    assert [(x.key, x.reason) for x in plan.left] == [
        ("error_handling", "removed in 0.3.6, no replacement")
    ]


def test_the_migrated_file_checks_clean_but_for_what_was_left(tmp_path: Path) -> None:
    from lmcache_compat.config.check import check_file

    out = tmp_path / "new.yaml"
    migrate_file(_write(tmp_path, CONFIG_0_3_5), "0.5.6", source="0.3.5", out=out)
    assert [f.key for f in check_file(out, "0.5.6") if f.ignored] == ["error_handling"]


def test_from_is_inferred_where_only_one_release_reads_every_key(tmp_path: Path) -> None:
    result = migrate_file(_write(tmp_path, CONFIG_0_3_5), "0.5.6")
    assert result.plan.source == "0.3.5"
    assert result.plan.inferred == "LMCache 0.3.5 is the only release that reads every key"


def test_from_is_inferred_when_every_candidate_migrates_alike(tmp_path: Path) -> None:
    result = migrate_file(_write(tmp_path, "chunk_size: 256\nlocal_cpu: true\n"), "0.5.6")
    assert "read every key, and all migrate it the same way" in (result.plan.inferred or "")
    assert result.plan.rewrites == () and result.text == "chunk_size: 256\nlocal_cpu: true\n"


def test_from_is_required_when_no_release_reads_every_key(tmp_path: Path) -> None:
    path = _write(tmp_path, "enable_nixl: true\nruntime_plugin_locations: []\n")
    with pytest.raises(MigrationError, match=r"no LMCache release reads every key.*--from"):
        migrate_file(path, "0.5.6")


def test_from_is_required_when_the_candidates_disagree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lmcache_compat.config import migrate

    monkeypatch.setattr(migrate.MigrationPlan, "same_outcome", lambda self, other: False)
    with pytest.raises(MigrationError, match="and migrate it differently: pass --from VERSION"):
        migrate_file(_write(tmp_path, "chunk_size: 256\n"), "0.5.6")


def test_a_fallback_name_of_the_source_is_read_as_its_key(tmp_path: Path) -> None:
    plan = migrate_file(_write(tmp_path, "nixl_peer_port: 55555\n"), "0.3.4", source="0.3.0").plan
    assert [(r.old, r.new) for r in plan.rewrites] == [("nixl_peer_port", "nixl_receiver_port")]
    assert "code fallback" in plan.rewrites[0].sources[0]


def test_a_downgrade_undoes_plain_renames_only(tmp_path: Path) -> None:
    text = "runtime_plugin_locations: [/p]\nblend_recompute_ratios: [0.2]\nnew_in_056: 1\n"
    plan = migrate_file(_write(tmp_path, text), "0.3.5", source="0.5.6").plan
    assert [(r.old, r.new) for r in plan.rewrites] == [
        ("runtime_plugin_locations", "plugin_locations")
    ]
    left = {x.key: x.reason for x in plan.left}
    assert left["blend_recompute_ratios"].startswith("added in 0.3.6")
    assert "does not read it either" in left["new_in_056"]


def test_duplicates_are_refused(tmp_path: Path) -> None:
    with pytest.raises(MigrationError, match=r"lines 1, 2 \(LMCache keeps line 2"):
        migrate_file(_write(tmp_path, "chunk_size: 1\nchunk_size: 2\n"), "0.5.6", source="0.3.5")


def test_output_and_in_place(tmp_path: Path) -> None:
    path = _write(tmp_path, CONFIG_0_3_5)
    os.chmod(path, 0o640)
    with pytest.raises(MigrationError, match="pass --in-place"):
        migrate_file(path, "0.5.6", source="0.3.5", out=path)
    assert path.read_text() == CONFIG_0_3_5
    result = migrate_file(path, "0.5.6", source="0.3.5", in_place=True)
    assert result.written == str(path) and "runtime_plugin_locations" in path.read_text()
    assert (path.stat().st_mode & 0o777) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lmcache.yaml"]  # no temp left


def test_a_key_from_a_merge_is_left_where_the_anchor_is(tmp_path: Path) -> None:
    text = "base: &b {plugin_locations: [/p]}\n<<: *b\nchunk_size: 1\n"
    plan = migrate_file(_write(tmp_path, text), "0.5.6", source="0.3.5").plan
    reasons = {x.key: x.reason for x in plan.left}
    assert reasons["plugin_locations"].startswith("comes from a merge key")


def test_the_rewrite_is_proven_against_the_original() -> None:
    doc = read_config_bytes(CONFIG_0_3_5.encode(), "x")
    schemas = load_schemas()
    plan = plan_migration(doc, schemas.row("0.5.6"), schemas.row("0.3.5"))
    out = yaml.safe_load(migrate_text(CONFIG_0_3_5, plan))
    before = yaml.safe_load(CONFIG_0_3_5)
    assert out["blend_recompute_ratios"] == [before["blend_recompute_ratio"]]
    assert out["local_cpu"] is True and out["remote_url"] == before["remote_url"]


def test_the_plan_as_json(tmp_path: Path) -> None:
    data = migrate_file(_write(tmp_path, CONFIG_0_3_5), "0.5.6", source="0.3.5").plan.to_json()
    assert data["source"] == "0.3.5" and data["target"] == "0.5.6"
    assert data["rewrites"][0]["transforms"] == ["wrap"]
    assert data["left"][0]["key"] == "error_handling"
