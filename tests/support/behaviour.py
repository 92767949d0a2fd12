"""Assertions shared by the unit tier (every matrix row) and the releases tier (the installed
row): an adapter over a fake of a release behaves as the catalog says."""

from __future__ import annotations

import pytest

from lmcache_compat import CATALOG, Capability, ConnectorAdapter, MissingCapabilityError
from lmcache_compat.core.roles import CONNECTOR
from lmcache_compat.testing.faults import fail_loads
from lmcache_compat.upstream.matrix import ReleaseRow, load_matrix
from tests.support.fakes import connector_view
from tools.generated_fakes import fake_from_row, instantiate

#: How a connector calls an optional method whose arguments matter to a fake; any other is
#: called with one placeholder per catalog parameter (:func:`_arguments`).
CALLS: dict[str, tuple[object, ...]] = {
    "get_finished": ({"r1"},),
    "request_finished": (object(), [1, 2]),
    "get_inference_info": (),
    "get_block_ids_with_load_errors": (),
    "shutdown": (),
    "get_kv_events": (),
    "register_kv_caches": ({"layer.0": object()},),
}


def _arguments(method: str, params: tuple[str, ...]) -> tuple[object, ...]:
    return CALLS.get(method) or tuple(object() for _ in params)


def check_row_behaviour(row: ReleaseRow) -> None:
    engine = instantiate(fake_from_row(row))
    adapter = ConnectorAdapter(engine)
    assert adapter.capabilities.as_dict(CONNECTOR) == connector_view(dict(row.capabilities))
    matrix = load_matrix()
    for spec in CATALOG:
        if spec.owner != CONNECTOR or spec.fallback is None:
            continue
        method = getattr(adapter, spec.method)
        before = len(engine._calls)
        result = method(*_arguments(spec.method, spec.params))
        if row.has(spec.capability):
            assert engine._calls[before:] == [spec.method], (row.version, spec.method)
        else:
            assert engine._calls[before:] == [], (row.version, spec.method)
            # the documented fallback (the catalog's words) is what the call returned
            assert spec.fallback_result.startswith(repr(result)), (row.version, spec.method)
            with pytest.raises(MissingCapabilityError) as info:
                ConnectorAdapter(engine, require=[spec.capability])
            assert f"lmcache>={matrix.since(spec.capability)}'" in str(info.value)
    # the seed scenario on this release's shape
    fail_loads(engine, {4, 9})
    reported = adapter.get_block_ids_with_load_errors()
    if row.has(Capability.LOAD_ERROR_REPORTING):
        assert reported == {4, 9}
        assert adapter.get_block_ids_with_load_errors() == set()
    else:
        assert reported == set()
