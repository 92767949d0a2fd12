"""The live probe over the hand-written fakes of the real releases. Expectations come from the
shipped matrix; facts pinned on purpose are named ``PINNED`` (or asserted with a ``# pinned:``
comment) with the upstream change they pin."""

from __future__ import annotations

import functools
import gc
import threading
import weakref
from typing import Any
from unittest import mock

import pytest

from lmcache_compat import Capabilities, Capability, clear_probe_cache, probe
from lmcache_compat.core.probes import live_surface
from lmcache_compat.core.surface import render_surface
from lmcache_compat.upstream.matrix import load_matrix
from tests.support.fakes import (
    CONNECTOR_CAPS,
    FAKES,
    Fake_0_3_0,
    Fake_0_3_9,
    Fake_0_3_9_post1,
    Fake_0_3_13,
    Fake_0_5_6,
)

C = Capability

#: What each historical shape must report: the connector capabilities of that release's row
#: of the shipped matrix (derived from its stored surfaces), so the hand-written fakes are
#: checked against the real releases and a new catalog row needs no edit here.
EXPECTED: dict[str, set[Capability]] = {
    release: {c for c in CONNECTOR_CAPS if load_matrix().row(release).has(c)} for release in FAKES
}

#: Facts pinned on purpose (the convention: ``PINNED`` names, each entry commented with the
#: upstream change it pins): the derivation above must still agree with them.
PINNED: dict[str, set[Capability]] = {
    # pinned: LMCache 0.3.9.post1 added get_block_ids_with_load_errors (load_error_reporting)
    "0.3.9.post1": {C.LOAD_ERROR_REPORTING},
    # pinned: LMCache 0.3.10.post2 added get_kv_events (kv_events)
    "0.3.10.post2": {C.KV_EVENTS},
}


def test_the_derived_expectations_keep_the_pinned_facts() -> None:
    for release, caps in PINNED.items():
        assert caps <= EXPECTED[release], release
    assert C.LOAD_ERROR_REPORTING not in EXPECTED["0.3.9"]  # pinned: as above
    assert C.KV_EVENTS not in EXPECTED["0.3.10"]  # pinned: as above
    assert EXPECTED["0.3.0"] == set()  # pinned: 0.3.0's connector has no optional method


@pytest.mark.parametrize("release", sorted(FAKES))
def test_each_historical_shape(release: str) -> None:
    caps = probe(FAKES[release])
    assert set(caps) == EXPECTED[release]
    assert caps.as_dict() == {c.value: c in EXPECTED[release] for c in Capability}
    # instance and class agree
    assert probe(FAKES[release]()) == caps


def test_capabilities_object_api() -> None:
    caps = probe(Fake_0_3_9_post1)
    assert Capability.LOAD_ERROR_REPORTING in caps
    assert "load_error_reporting" in caps
    assert "kv_events" not in caps
    assert "no_such_capability" not in caps
    assert 3 not in caps
    assert list(caps) == [c for c in Capability if c in caps]  # catalog order
    assert len(caps) == len(EXPECTED["0.3.9.post1"])
    assert Capability.KV_EVENTS in caps.missing
    assert list(caps.as_dict()) == [c.value for c in Capability]
    with pytest.raises(AttributeError):
        caps.cls_name = "x"  # type: ignore[misc]
    assert "Fake_0_3_9_post1" in repr(caps)
    assert hash(caps) == hash(probe(Fake_0_3_9_post1()))


def test_probe_never_evaluates_properties_or_calls_methods() -> None:
    engine = Fake_0_3_13()  # its properties raise AssertionError if evaluated
    caps = probe(engine)
    assert set(caps) == set(CONNECTOR_CAPS)
    assert engine._calls == []


class _Odd(Fake_0_3_0):
    # not callable: not a capability
    shutdown = None
    get_kv_events = 42
    # a property with the method's name: never evaluated, so not a capability

    @property
    def get_block_ids_with_load_errors(self) -> Any:
        raise AssertionError("evaluated")

    # wrong arity: calling it as the adapter would fails, so it is not the capability
    def register_kv_caches(self) -> None:
        raise AssertionError("called")

    # a required keyword-only argument cannot be satisfied either
    def get_finished(self, finished_req_ids: set[str], *, strict: bool) -> None:
        raise AssertionError("called")

    @functools.cached_property
    def request_finished(self) -> Any:
        raise AssertionError("evaluated")

    def __getattr__(self, name: str) -> Any:  # permissive: must never be consulted
        raise AssertionError(f"__getattr__({name!r}) consulted")


def test_odd_attributes_are_not_capabilities() -> None:
    assert set(probe(_Odd())) == set()


class _Flexible(Fake_0_3_0):
    @staticmethod
    def shutdown() -> None:
        pass

    @classmethod
    def get_kv_events(cls) -> list[Any]:
        return []

    def get_block_ids_with_load_errors(self, *args: Any, **kwargs: Any) -> set[int]:
        return set()

    def register_kv_caches(self, kv_caches: Any, extra: int = 0) -> None:
        pass

    # a callable object without __get__ is looked up as is (no self)
    get_inference_info: Any = staticmethod(dict)

    def get_num_new_matched_tokens(  # type: ignore[override]
        self, request: Any, num_computed_tokens: int
    ) -> int | None:
        return None


def test_static_class_methods_varargs_and_defaults_count() -> None:
    assert set(probe(_Flexible)) == {
        C.SHUTDOWN,
        C.KV_EVENTS,
        C.LOAD_ERROR_REPORTING,
        C.REGISTER_KV_CACHES,
        C.INFERENCE_INFO,
        C.ASYNC_LOOKUP,
    }


def test_wrapped_methods_are_read_through_functools_wraps() -> None:
    def annotate(func: Any) -> Any:  # like nvtx.annotate when nvtx is installed
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            return func(*args, **kwargs)

        return wrapper

    class Wrapped(Fake_0_3_0):
        @annotate
        def get_num_new_matched_tokens(
            self, request: Any, num_computed_tokens: int
        ) -> "int | None":  # noqa: UP037
            return None

        @annotate
        def shutdown(self) -> None:
            pass

    assert set(probe(Wrapped)) == {C.ASYNC_LOOKUP, C.SHUTDOWN}


def test_magicmock_without_spec_has_no_capabilities() -> None:
    m = mock.MagicMock()
    caps = probe(m)
    assert set(caps) == set()
    assert m.mock_calls == []  # nothing was looked up or called


def test_mock_with_spec_is_probed_as_its_spec_class() -> None:
    m = mock.MagicMock(spec=Fake_0_3_9_post1)
    assert probe(m) == probe(Fake_0_3_9_post1)
    assert m.mock_calls == []
    ms = mock.create_autospec(Fake_0_5_6, instance=True)
    assert set(probe(ms)) == set(CONNECTOR_CAPS)


def test_object_faking_its_class_is_probed_by_its_real_type() -> None:
    class Liar:
        @property  # type: ignore[misc]
        def __class__(self) -> type:
            raise AssertionError("__class__ evaluated")

    assert set(probe(Liar())) == set()


def test_plain_objects_and_builtins() -> None:
    for obj in (None, 3, "x", object(), [], {}, print, type):
        assert set(probe(obj)) == set()


def test_cache_is_per_class_and_does_not_pin_classes_or_engines() -> None:
    def make() -> type:
        class Tmp(Fake_0_3_0):
            def shutdown(self) -> None:
                pass

        return Tmp

    cls = make()
    engine = cls()
    assert Capability.SHUTDOWN in probe(engine)
    engine_ref = weakref.ref(engine)
    cls_ref = weakref.ref(cls)
    del engine, cls
    gc.collect()
    assert engine_ref() is None
    assert cls_ref() is None


def test_cache_is_per_class_not_per_instance() -> None:
    a, b = Fake_0_3_9_post1(), Fake_0_3_9_post1()
    b.shutdown = lambda: None  # type: ignore[attr-defined]  # instance attributes are ignored
    assert probe(a) is probe(b)
    assert Capability.SHUTDOWN not in probe(b)


def test_clear_cache_after_patching_a_class() -> None:
    class Patched(Fake_0_3_0):
        pass

    assert Capability.SHUTDOWN not in probe(Patched)
    Patched.shutdown = lambda self: None  # type: ignore[attr-defined]
    assert Capability.SHUTDOWN not in probe(Patched)  # cached: documented
    clear_probe_cache()
    assert Capability.SHUTDOWN in probe(Patched)


def test_concurrent_probing_is_consistent() -> None:
    clear_probe_cache()
    classes = list(FAKES.values())
    results: list[list[Capabilities]] = []
    barrier = threading.Barrier(8)

    def work() -> None:
        barrier.wait()
        results.append([probe(cls()) for cls in classes for _ in range(20)])

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 8
    for r in results:
        assert r == results[0]


def test_live_surface_lists_public_methods_without_properties() -> None:
    surface = live_surface(Fake_0_3_13)
    assert surface["lmcache_engine"].kind == "property"  # known to exist, never evaluated
    assert "lmcache_engine" not in render_surface(surface)
    assert "_record" not in surface
    assert "__init__" in surface
    assert [p.name for p in surface["save_kv_layer"].params or ()] == [
        "layer_name",
        "kv_layer",
        "attn_metadata",
        "kwargs",
    ]
    assert surface["get_num_new_matched_tokens"].returns == "Optional[int]"


def _drain(self: Any) -> set[int]:
    invalid: set[int] = self._invalid_block_ids.copy()
    self._invalid_block_ids.clear()
    return invalid


def _wrapt_traced(func: Any) -> Any:
    """What tracing and instrumentation libraries install: a wrapt ``FunctionWrapper``."""
    import wrapt

    @wrapt.decorator
    def traced(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        return wrapped(*args, **kwargs)

    return traced(func)


def _cached(func: Any) -> Any:
    return functools.lru_cache(maxsize=None)(func)


class _Partial(Fake_0_3_9):
    def _report(self, which: str) -> set[int]:
        return _drain(self) if which == "invalid" else set()

    get_block_ids_with_load_errors = functools.partialmethod(_report, "invalid")


@pytest.mark.parametrize("wrap", [_wrapt_traced, _cached, "partialmethod"])
def test_methods_behind_binding_descriptors_are_capabilities(wrap: Any) -> None:
    """partialmethod, lru_cache and wrapt descriptors bind to a callable: their signature is
    read through to the function they wrap, and the adapter binds the engine's own method, so
    failed-load ids the engine holds are reported, never replaced by the empty fallback."""
    from lmcache_compat import ConnectorAdapter

    if wrap == "partialmethod":
        cls: type = _Partial
    else:

        class Wrapped(Fake_0_3_9):
            get_block_ids_with_load_errors = wrap(_drain)
            shutdown = wrap(lambda self: None)

        cls = Wrapped
    assert C.LOAD_ERROR_REPORTING in probe(cls)
    engine = cls()
    engine._invalid_block_ids.update({3, 7})
    adapter = ConnectorAdapter(engine, require=[C.LOAD_ERROR_REPORTING])
    assert adapter.get_block_ids_with_load_errors() == {3, 7}  # the engine's own answer


class _Opaque:
    """A descriptor that would return a callable, but only its ``__get__`` can say so."""

    def __get__(self, instance: Any, owner: Any = None) -> Any:
        raise AssertionError("a probe ran __get__")


def test_an_unreadable_descriptor_is_named_at_construction_never_silently_dropped() -> None:
    from lmcache_compat import ConnectorAdapter, MissingCapabilityError
    from lmcache_compat.core.adapter import UnreadableMethodWarning

    class Hidden(Fake_0_3_9):
        get_block_ids_with_load_errors = _Opaque()

    assert C.LOAD_ERROR_REPORTING not in probe(Hidden)
    with pytest.warns(UnreadableMethodWarning, match="get_block_ids_with_load_errors.*set()"):
        adapter = ConnectorAdapter(Hidden())
    assert adapter.get_block_ids_with_load_errors() == set()
    with pytest.warns(UnreadableMethodWarning, match="raises MissingCapabilityError"):
        strict = ConnectorAdapter(Hidden(), strict=True)
    with pytest.raises(MissingCapabilityError):
        strict.get_block_ids_with_load_errors()
    with pytest.raises(MissingCapabilityError):
        ConnectorAdapter(Hidden(), require=[C.LOAD_ERROR_REPORTING])
