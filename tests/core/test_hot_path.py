"""Decide once, call fast: what an adapter call executes contains no per-call decisions."""

from __future__ import annotations

import dis
import types
from collections.abc import Callable
from typing import Any

import pytest

from lmcache_compat import ConnectorAdapter
from tests.support.fakes import FAKES

FORBIDDEN_NAMES = {
    "getattr",
    "hasattr",
    "callable",
    "installed_distribution_version",
    "installed_version",
    "installed_package",
    "probe",
}
OPTIONAL = (
    "get_finished",
    "request_finished",
    "get_inference_info",
    "get_block_ids_with_load_errors",
    "shutdown",
    "get_kv_events",
    "register_kv_caches",
)


def _hot_code(adapter: ConnectorAdapter, fn: Callable[..., Any]) -> types.CodeType | None:
    """The code object a call runs in lmcache_compat, or None if it goes straight to the
    engine's own method."""
    if isinstance(fn, types.MethodType):
        if fn.__self__ is adapter.engine:
            return None
        assert fn.__self__ is adapter
        fn = fn.__func__
    assert isinstance(fn, types.FunctionType)
    assert fn.__module__.startswith("lmcache_compat"), fn
    return fn.__code__


@pytest.mark.parametrize("release", sorted(FAKES))
@pytest.mark.parametrize("strict", [False, True])
def test_adapter_calls_do_no_lookups_or_try(release: str, strict: bool) -> None:
    a = ConnectorAdapter(FAKES[release](), strict=strict)
    checked = 0
    for name in OPTIONAL:
        code = _hot_code(a, getattr(a, name))
        if code is None:
            continue
        checked += 1
        names = set(code.co_names)
        assert not names & FORBIDDEN_NAMES, (name, names & FORBIDDEN_NAMES)
        ops = {ins.opname for ins in dis.get_instructions(code)}
        assert "PUSH_EXC_INFO" not in ops and "SETUP_FINALLY" not in ops, name  # no try
        assert not code.co_exceptiontable if hasattr(code, "co_exceptiontable") else True
    assert checked  # every shape runs some lmcache_compat code (fallback or result check)
