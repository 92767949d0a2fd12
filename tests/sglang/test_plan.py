"""What the lmcache-compat backend builds for every (sglang, LMCache) pair of the shipped grid:
one rule (``plan``), read by the plugin, doctor and the grid's table."""

from __future__ import annotations

import pytest
from packaging.version import Version

from lmcache_compat import Capability
from lmcache_compat.sglang import VARIANTS, plan
from lmcache_compat.sglang.known.grid import load_sglang_grid
from lmcache_compat.sglang.variants import RADIX_FACTS, variant_for, variant_named
from lmcache_compat.upstream import locations as loc
from lmcache_compat.upstream.matrix import load_matrix

GRID = load_sglang_grid()
MATRIX = load_matrix()


def test_every_grid_release_with_a_registry_has_its_variant() -> None:
    used = set()
    for release in GRID.releases:
        facts = GRID.facts(release.sglang)
        classes = tuple(i["cache_class"] for i in facts["integration"])
        found = variant_for(classes, facts["internals"], loc.SGLANG_LMC_UNIFIED_CACHE.name)
        if release.registry:
            assert found is not None and found.name == release.variant, release.sglang
            used.add(found.name)
        else:
            assert release.variant is None
    assert used == {v.name for v in VARIANTS}, "every variant serves some release"


def test_the_radix_variants_differ_in_what_they_rely_on() -> None:
    radix = [v for v in VARIANTS if v.kind == "radix"]
    assert len({tuple(sorted(v.internals.items())) for v in radix}) == len(radix)
    for v in radix:
        assert set(v.internals) == set(RADIX_FACTS)


@pytest.mark.parametrize("sglang", GRID.versions)
def test_the_plan_for_every_pair(sglang: str) -> None:
    facts = GRID.facts(sglang)
    release = GRID.release(sglang)
    for row in MATRIX.rows:
        found = plan(facts, row.version, row.capabilities, config_file=True)
        if not release.registry:
            assert not found.serves and "no radix-cache registry" in found.reason
            continue
        variant = variant_named(str(release.variant))
        if variant.kind == "unified":
            assert found.serves == row.has(Capability.SGLANG_UNIFIED_MP), row.version
            if not found.serves:
                assert f">= {Capability.SGLANG_UNIFIED_MP.since}" in found.reason
            continue
        in_process, mp = row.has(Capability.SGLANG_IN_PROCESS), row.has(Capability.SGLANG_MP)
        assert found.serves == (in_process or mp), row.version
        if found.serves:
            assert found.mode == ("mp" if mp else "in-process")
            assert found.line().startswith(f"lmcache-compat serves sglang {sglang}")
        else:
            assert "< 0.5.7rc2" in found.reason and "\n" not in found.line()


def test_modes_are_chosen_as_asked_and_refused_where_the_release_lacks_them() -> None:
    sglang = next(r.sglang for r in GRID.releases if r.variant and r.variant.startswith("radix"))
    facts = GRID.facts(sglang)
    only_in_process = next(
        r
        for r in MATRIX.rows
        if r.has(Capability.SGLANG_IN_PROCESS) and not r.has(Capability.SGLANG_MP)
    )
    both = MATRIX.row(Capability.SGLANG_UNIFIED_MP.since)
    assert plan(facts, both.version, both.capabilities).mode == "in-process"  # no config file
    assert plan(facts, both.version, both.capabilities, config_file=True).mode == "mp"
    assert (
        plan(facts, both.version, both.capabilities, mode="in-process", config_file=True).mode
        == "in-process"
    )
    refused = plan(facts, only_in_process.version, only_in_process.capabilities, mode="mp")
    assert not refused.serves and f">= {Capability.SGLANG_MP.since}" in refused.reason


def test_pairs_the_tests_do_not_round_trip_say_so() -> None:
    radix = next(v for v in VARIANTS if v.kind == "radix" and v.tested_on)
    facts = GRID.facts(str(radix.tested_on))
    for row in MATRIX.rows:
        found = plan(facts, row.version, row.capabilities, mode="in-process")
        if not found.serves:
            continue
        verified = radix.verifies("in-process", row.version)
        assert (found.note == "") == verified, row.version
        if Version(row.version) < Version("0.4.6"):
            assert "needs CUDA" in found.note


def test_an_sglang_whose_internals_match_no_variant_is_refused() -> None:
    sglang = next(r.sglang for r in GRID.releases if r.variant and r.variant.startswith("radix"))
    facts = GRID.facts(sglang)
    facts["internals"] = {  # a combination no sglang release has
        "radix_key_raw_token_ids": False,
        "radix_key_cache_salt": True,
        "record_store_event": False,
        "req_flat_kv": True,
    }
    found = plan(facts, "0.5.6", MATRIX.row("0.5.6").capabilities)
    assert not found.serves and "match no variant" in found.reason
