"""The catalog's rows. Expectations are derived from the catalog and the shipped matrix; the few
facts pinned on purpose are named ``PINNED`` and each entry is commented with the upstream
change it pins (``# pinned: ...``)."""

from __future__ import annotations

import pytest

from lmcache_compat import CATALOG, Capability
from lmcache_compat.core.catalog import spec_for
from lmcache_compat.upstream.matrix import load_matrix

#: pinned: the public names and first releases of the connector capabilities LMCache's own
#: releases introduced (0.3.1 get_finished/request_finished, 0.3.6 Optional lookup, 0.3.7
#: get_inference_info, 0.3.9.post1 get_block_ids_with_load_errors, 0.3.10 shutdown, 0.3.10.post2
#: get_kv_events, 0.3.12 register_kv_caches): a rename or a moved ``since`` is a user-visible
#: change; a new row is not.
PINNED_CONNECTOR_NAMES = {
    "get_finished": "0.3.1",
    "request_finished": "0.3.1",
    "async_lookup": "0.3.6",
    "inference_info": "0.3.7",
    "load_error_reporting": "0.3.9.post1",
    "shutdown": "0.3.10",
    "kv_events": "0.3.10.post2",
    "register_kv_caches": "0.3.12",
}


def test_engine_capabilities_have_the_public_names_and_first_releases() -> None:
    got = {
        row.capability.value: row.since
        for row in CATALOG
        if row.owner.name == "LMCacheConnectorV1Impl"
    }
    assert PINNED_CONNECTOR_NAMES.items() <= got.items()
    matrix = load_matrix()
    assert got == {c: matrix.since(c) for c in got}  # every row's since: the matrix's


def test_capability_is_a_str_enum_with_since_and_docs() -> None:
    assert isinstance(Capability.KV_EVENTS, str)
    assert Capability("kv_events") is Capability.KV_EVENTS
    assert Capability.KV_EVENTS.value == "kv_events"
    assert {"kv_events": 1}[Capability.KV_EVENTS] == 1  # hashes and compares as its str
    assert str(Capability.KV_EVENTS) == "kv_events"
    # pinned: 0.3.9.post1 added get_block_ids_with_load_errors
    assert Capability.LOAD_ERROR_REPORTING.since == "0.3.9.post1"
    for cap in Capability:
        assert cap.__doc__ is not None and cap.since in cap.__doc__


def test_every_member_has_exactly_one_row() -> None:
    assert [row.capability for row in CATALOG] == list(Capability)


def test_spec_for_unknown_name_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="unknown capability 'teleport'; known: get_finished"):
        spec_for("teleport")
    assert spec_for("shutdown").method == "shutdown"
