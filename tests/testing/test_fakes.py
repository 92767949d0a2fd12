"""lmcache_compat.testing: every fake of every shipped release is the row it was made from."""

from __future__ import annotations

import inspect
import time

import pytest

from lmcache_compat import ConnectorAdapter, probe
from lmcache_compat.core.catalog import Capability, owned_by
from lmcache_compat.core.roles import CONNECTOR, MP_SCHEDULER, role_named
from lmcache_compat.core.signatures import to_json
from lmcache_compat.errors import LMCacheVersionError, NotInMatrixError
from lmcache_compat.mp import MPSchedulerAdapter
from lmcache_compat.testing import (
    empty_value,
    fail_loads,
    fake,
    fake_class,
    kv_events,
    lost_reply,
    set_raises,
    set_result,
    short_retrieve,
    slow_wait_for_save,
    unhealthy,
)
from lmcache_compat.upstream.matrix import load_matrix
from tools.generated_fakes import live_facts

MATRIX = load_matrix()
PAIRS = [(r.version, n) for r in MATRIX.rows for n in r.surfaces]


@pytest.mark.parametrize(("version", "name"), PAIRS)
def test_fake_is_the_row(version: str, name: str) -> None:
    row = MATRIX.row(version)
    cls = fake_class(version, name)
    live = live_facts(cls)
    assert live == row.facts(name)
    # literal defaults too (facts compare only whether a default exists)
    details = {m: to_json(f)[1] for m, f in live.items() if f.kind == "method"}
    assert {m: d for m, d in details.items() if d} == dict(row.details.get(name, {}))
    role = role_named(name)
    if role is not None:
        assert probe(cls).as_dict(role) == {c.value: row.has(c) for c in owned_by(role)}


def test_every_release_and_class_is_covered() -> None:
    assert len({v for v, _ in PAIRS}) == len(MATRIX.rows) == 35
    assert {n for _, n in PAIRS} >= {
        "LMCacheConnectorV1Impl",
        "LMCacheMPSchedulerAdapter",
        "LMCacheMPWorkerAdapter",
        "LMCacheEngine",
        "LMCacheEngineBuilder",
        "LoadStoreOp",
        "ParallelStrategy",
    }


def test_unknown_release_names_the_closest() -> None:
    with pytest.raises(
        NotInMatrixError, match=r"0\.3\.8 .*closest known releases are 0\.3\.7 and 0\.3\.9"
    ):
        fake_class("0.3.8", CONNECTOR.name)
    from packaging.version import Version

    from lmcache_compat.upstream.matrix import load_matrix

    final = [v for v in load_matrix().versions if not Version(v).is_prerelease][-1]
    # one release, and a final one (not the newer pre-release)
    with pytest.raises(NotInMatrixError, match=rf"closest known release is {final} \(fix: pick it"):
        fake_class("9.0", CONNECTOR.name)
    with pytest.raises(LMCacheVersionError, match="not a PEP 440 version"):
        fake_class("banana", CONNECTOR.name)
    with pytest.raises(LookupError, match=r"0\.3\.0 has no class 'LMCacheMPWorkerAdapter'"):
        fake_class("0.3.0", "LMCacheMPWorkerAdapter")


def test_instances_record_calls_and_answer_by_the_rule() -> None:
    engine = fake("0.5.6", CONNECTOR.name)
    # built with no arguments; the class keeps the release's constructor signature
    assert list(inspect.signature(type(engine)).parameters) == ["vllm_config", "role", "parent"]
    assert engine.get_finished({"r"}) == (set(), set())
    assert engine.request_finished("req", [1]) == (False, {})
    assert engine.calls[0].name == "get_finished" and engine.calls[0].args == ()
    assert engine.calls[0].kwargs == {"finished_req_ids": {"r"}}
    set_result(engine, "get_num_new_matched_tokens", (5, False))
    assert engine.get_num_new_matched_tokens("req", 0) == (5, False)
    set_raises(engine, "wait_for_save", RuntimeError("engine down"))
    with pytest.raises(RuntimeError, match="engine down"):
        engine.wait_for_save()
    with pytest.raises(
        AttributeError, match=r"0\.5\.6 LMCacheConnectorV1Impl has no member 'nope'"
    ):
        set_result(engine, "nope", 1)
    with pytest.raises(TypeError, match="not a fake"):
        set_result(object(), "shutdown", 1)


@pytest.mark.parametrize(
    ("annotation", "value"),
    [
        (None, None),
        ("None", None),
        ("KVConnectorMetadata", None),
        ("int", 0),
        ("Optional[int]", 0),
        ("int | None", 0),
        ("bool", False),
        ("set[int]", set()),
        ("Iterable[CacheStoreEvent]", []),
        ("typing.List[int]", []),
        ("dict[str, int] | None", {}),
        ("tuple[bool, Optional[dict[str, Any]]]", (False, {})),
        ("tuple[int, ...]", ()),
        ("not an annotation (", None),
    ],
)
def test_the_one_result_rule(annotation: str | None, value: object) -> None:
    assert empty_value(annotation) == value
    assert type(empty_value(annotation)) is type(value)


def test_health_members_answer_healthy() -> None:
    sched = fake("0.5.6", MP_SCHEDULER.name)
    assert sched.is_healthy is True
    assert fake("0.5.6", "LMCacheEngine").is_healthy() is True
    assert fake("0.3.4", "LMCacheEngine").health() == 0


@pytest.mark.parametrize("version", MATRIX.versions)
def test_failed_loads_per_release(version: str) -> None:
    engine = fake(version, CONNECTOR.name)
    done = fail_loads(engine, {4, 9})
    adapter = ConnectorAdapter(engine)
    has = MATRIX.row(version).has(Capability.LOAD_ERROR_REPORTING)
    assert done.visible is has
    assert adapter.get_block_ids_with_load_errors() == ({4, 9} if has else set())
    assert adapter.get_block_ids_with_load_errors() == set()  # reported once
    if not has:
        assert "lacks load_error_reporting (since 0.3.9.post1)" in done.note
        assert "read as loaded" in done.note


@pytest.mark.parametrize("version", MATRIX.versions)
def test_kv_events_per_release(version: str) -> None:
    engine = fake(version, CONNECTOR.name)
    done = kv_events(engine, ["e1", "e2"])
    has = MATRIX.row(version).has(Capability.KV_EVENTS)
    assert done.visible is has
    assert list(ConnectorAdapter(engine).get_kv_events()) == (["e1", "e2"] if has else [])
    assert has or "never delivered" in done.note


def test_short_retrieve() -> None:
    engine = fake("0.5.6", "LMCacheEngine")
    assert short_retrieve(engine, 2, 4).visible
    assert engine.retrieve([1, 2, 3, 4]) == [True, True, False, False]
    old = fake("0.3.9", CONNECTOR.name)
    assert not short_retrieve(old, 2, 4, block_ids={7}).visible


def test_slow_wait_for_save() -> None:
    engine = fake("0.3.0", CONNECTOR.name)
    slow_wait_for_save(engine, 0.05)
    start = time.perf_counter()
    ConnectorAdapter(engine).wait_for_save()
    assert time.perf_counter() - start >= 0.05


MP = [r.version for r in MATRIX.rows if MP_SCHEDULER.name in r.surfaces]


@pytest.mark.parametrize("version", MP)
def test_mp_unhealthy_and_lost_reply(version: str) -> None:
    has = MATRIX.row(version).has(Capability.MP_HEALTH_CHECK)
    sched = fake(version, MP_SCHEDULER.name)
    assert unhealthy(sched).visible is has
    adapter = MPSchedulerAdapter(sched)
    if has:
        with pytest.raises(Exception, match="r1"):
            adapter.check_lookup_result("r1")
    else:
        assert adapter.check_lookup_result("r1") == 0  # read as a miss: the real exposure
    sched = fake(version, MP_SCHEDULER.name)
    done = lost_reply(sched)
    assert done.visible is has
    assert sched.check_lookup_result("r1") == (0 if has else None)
    assert has or "stays None" in done.note


def test_literal_defaults_are_the_releases() -> None:
    engine = fake_class("0.5.6", "LMCacheEngine")
    lookup = inspect.signature(engine.lookup).parameters
    assert lookup["pin"].default is False and lookup["search_range"].default is None
    instance = fake("0.5.6", "LMCacheEngine")
    instance.lookup([1])
    assert instance.calls[-1].kwargs == {"tokens": [1]}  # only what the caller passed


def test_a_fault_into_the_wrong_class_or_a_non_fake_is_one_clear_error() -> None:
    with pytest.raises(TypeError, match="injected into LMCacheMPSchedulerAdapter"):
        unhealthy(fake("0.5.6", CONNECTOR.name))
    with pytest.raises(TypeError, match=r"not <object object"):
        fail_loads(object(), {1})  # type: ignore[arg-type]
