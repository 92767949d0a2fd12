"""Fake engine classes generated from a row of the shipped release matrix.

Each generated class has exactly the row's ``LMCacheConnectorV1Impl`` methods, parameter names,
parameter kinds, defaults and return annotations (as text), so probing it sees what probing the
real release sees; the ``releases`` tier proves the rows against the real releases.
"""

from __future__ import annotations

import keyword
from typing import Any

from lmcache_compat.catalog import CONNECTOR_IMPL
from lmcache_compat.matrix import ReleaseRow

#: What generated methods return (the shape each real method returns).
RESULTS: dict[str, Any] = {
    "get_finished": (None, None),
    "request_finished": (False, None),
    "get_num_new_matched_tokens": 0,
    "get_inference_info": {"fake": True},
}


class GeneratedEngine:
    """Base of generated fakes: records calls; drains failed blocks like the real release."""

    def _setup(self) -> None:
        self._calls: list[str] = []
        self._invalid_block_ids: set[int] = set()
        self._events: list[Any] = []

    def _called(self, name: str) -> Any:
        self._calls.append(name)
        if name == "get_block_ids_with_load_errors":
            ids, self._invalid_block_ids = self._invalid_block_ids, set()
            return ids
        if name == "get_kv_events":
            events, self._events = self._events, []
            return events
        return RESULTS.get(name)


def _param_source(params: list[str], optional: set[str]) -> str:
    out = []
    for token in params:
        name = token.lstrip("*")
        if token not in ("/", "*"):
            assert name.isidentifier() and not keyword.iskeyword(name), token
        out.append(f"{token}=None" if token in optional else token)
    return ", ".join(["self", *out])


def fake_from_row(row: ReleaseRow, cls_name: str = CONNECTOR_IMPL) -> type[GeneratedEngine]:
    """A class whose surface is the row's ``cls_name`` surface."""
    lines = [f"class Fake_{row.version.replace('.', '_')}(GeneratedEngine):"]
    details = row.details.get(cls_name, {})
    for name, params in row.surfaces[cls_name].items():
        detail = details.get(name, {})
        sig = _param_source(params, set(detail.get("optional", ())))
        returns = f" -> {detail['returns']!r}" if "returns" in detail else ""
        body = "self._setup()" if name == "__init__" else f"return self._called({name!r})"
        lines.append(f"    def {name}({sig}){returns}:\n        {body}")
    namespace: dict[str, Any] = {"GeneratedEngine": GeneratedEngine}
    exec(compile("\n".join(lines), f"<fake of LMCache {row.version}>", "exec"), namespace)
    cls: type[GeneratedEngine] = namespace[lines[0][6:].split("(")[0]]
    return cls


def instantiate(cls: type[GeneratedEngine]) -> GeneratedEngine:
    """An instance without running the generated ``__init__``'s real-release arguments."""
    engine = cls.__new__(cls)
    engine._setup()
    return engine
