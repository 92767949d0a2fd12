"""``EngineAdapter`` and ``get_or_create_engine`` over fakes of every release's LMCacheEngine."""

from __future__ import annotations

from typing import Any

import pytest

from lmcache_compat import (
    Capability,
    EngineAdapter,
    MissingCapabilityError,
    UnsupportedArgumentError,
    get_or_create_engine,
)
from lmcache_compat.core.roles import ENGINE
from lmcache_compat.testing.faults import kv_events
from lmcache_compat.upstream.matrix import load_matrix
from tools.generated_fakes import GeneratedEngine, fake_module, instantiate

MATRIX = load_matrix()
VERSIONS = MATRIX.versions


def _engine(version: str, **options: Any) -> tuple[EngineAdapter, GeneratedEngine]:
    target = instantiate(fake_module(MATRIX.row(version)).LMCacheEngine)
    return EngineAdapter(target, **options), target


def _last(target: GeneratedEngine) -> tuple[str, tuple[Any, ...], dict[str, Any]]:
    return target._call_args[-1]


@pytest.mark.parametrize("version", VERSIONS)
def test_capabilities_match_the_row(version: str) -> None:
    adapter, _ = _engine(version)
    row = MATRIX.row(version)
    assert adapter.capabilities.as_dict(ENGINE) == {
        c.value: row.has(c) for c in Capability if ENGINE in c.spec.owners
    }


def test_lookup_id_mapping() -> None:
    new, t = _engine("0.3.4")
    new.lookup([1, 2], lookup_id="q", pin=True)
    passed = _last(t)[2]
    assert (passed["tokens"], passed["lookup_id"], passed["pin"]) == ([1, 2], "q", True)
    assert passed.get("request_configs") is None
    mid, t = _engine("0.3.3")  # lookup_id was request_id in 0.3.3
    mid.lookup([1, 2], lookup_id="q", pin=True)
    assert _last(t)[2] == {"tokens": [1, 2], "request_id": "q", "pin": True}
    old, t = _engine("0.3.2")  # no id at all: fine unpinned, refused pinned
    old.lookup([1, 2], lookup_id="q")
    assert _last(t)[2] == {"tokens": [1, 2]}
    with pytest.raises(UnsupportedArgumentError, match="never be unpinned"):
        old.lookup([1, 2], lookup_id="q", pin=True)


def test_request_configs_before_0_3_4() -> None:
    old, _ = _engine("0.3.3")
    with pytest.raises(UnsupportedArgumentError, match="request_configs"):
        old.lookup([1], request_configs={"a": 1})
    allowed, t = _engine("0.3.3", allow={"request_configs"})
    allowed.lookup([1], request_configs={"a": 1})
    assert "request_configs" not in _last(t)[2]


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        ("0.3.2", None),
        ("0.3.3", ((["q"],), {})),
        ("0.3.7", ((["q"],), {})),
        ("0.3.9", (("q",), {})),
    ],
)
def test_unpin_mapping(version: str, expected: Any) -> None:
    adapter, t = _engine(version)
    adapter.unpin("q")
    if expected is None:
        assert t._calls == []  # nothing is pinned by id before 0.3.3
    else:
        name, args, kwargs = _last(t)
        assert name == "lookup_unpin"
        assert list(args) + list(kwargs.values()) == list(expected[0])


def test_prefetch_mapping() -> None:
    new, t = _engine("0.3.6")
    new.prefetch([1, 2], lookup_id="q")
    assert _last(t) == ("async_lookup_and_prefetch", (), {"lookup_id": "q", "tokens": [1, 2]})
    old, t = _engine("0.3.5")
    old.prefetch([1, 2], lookup_id="q")
    assert _last(t) == ("prefetch", (), {"tokens": [1, 2]})


@pytest.mark.parametrize(
    ("version", "calls"), [("0.3.0", []), ("0.3.4", ["health"]), ("0.3.13", ["is_healthy"])]
)
def test_is_healthy_mapping(version: str, calls: list[str]) -> None:
    adapter, t = _engine(version)
    assert adapter.is_healthy() is True
    assert t._calls == calls


def test_health_code_nonzero_is_unhealthy() -> None:
    adapter, t = _engine("0.3.4")
    t.health = lambda: -1  # type: ignore[attr-defined]  # instance attribute: read at bind time
    adapter2 = EngineAdapter(t)
    assert adapter2.is_healthy() is False
    assert adapter.lmcache_version == adapter2.lmcache_version


def test_freeze_and_events() -> None:
    old, t = _engine("0.3.10")
    with pytest.raises(MissingCapabilityError, match=r"lmcache>=0\.3\.11"):
        old.freeze(True)
    assert old.is_frozen() is False
    assert old.get_kv_events() == []
    assert t._calls == []
    new, t = _engine("0.5.6")
    new.freeze(True)
    assert new.is_frozen() is False and t._calls == ["freeze", "is_frozen"]
    kv_events(t, ["e"])
    assert new.get_kv_events() == ["e"]


def test_pass_through_store_retrieve_close() -> None:
    adapter, t = _engine("0.3.0")
    adapter.store([1], None)
    adapter.retrieve([1], None)
    adapter.close()
    assert t._calls == ["store", "retrieve", "close"]


@pytest.mark.parametrize("version", ["0.3.3", "0.3.4", "0.3.5", "0.5.6"])
def test_get_or_create_broadcasts(version: str) -> None:
    builder = instantiate(fake_module(MATRIX.row(version)).LMCacheEngineBuilder)
    get_or_create_engine(builder, "id", "cfg", "meta", "gpu")
    name, _, kwargs = _last(builder)
    assert name == "get_or_create"
    if version in ("0.3.3", "0.3.4"):  # absent, or optional: nothing passed unasked
        assert "broadcast_fn" not in kwargs
    else:  # required from 0.3.5: single-process defaults
        assert kwargs["broadcast_fn"](object(), 0) is None
        marker = object()
        assert kwargs["broadcast_object_fn"](marker, 0) is marker
    fn = lambda t, s: None  # noqa: E731
    if version == "0.3.3":
        with pytest.raises(UnsupportedArgumentError, match="broadcast_fn"):
            get_or_create_engine(builder, "id", "cfg", "meta", "gpu", broadcast_fn=fn)
    else:
        get_or_create_engine(builder, "id", "cfg", "meta", "gpu", broadcast_fn=fn)
        assert _last(builder)[2]["broadcast_fn"] is fn
