"""Fake LMCache classes generated from a row of the shipped release matrix.

Each generated class has exactly the row's methods, parameter names, parameter kinds, defaults,
return annotations (as text) and properties; dataclasses (``LoadStoreOp``, ``ParallelStrategy``)
are real dataclasses with the row's fields and field annotations. Probing them sees what probing
the real release sees; the ``releases`` and ``real`` tiers prove the rows against the releases.
"""

from __future__ import annotations

import keyword
import sys
import types
from collections.abc import Mapping
from typing import Any

from lmcache_compat.core.roles import CONNECTOR
from lmcache_compat.upstream.matrix import ReleaseRow

#: What generated methods return (the shape each real method returns).
RESULTS: dict[str, Any] = {
    "get_finished": (None, None),
    "request_finished": (False, None),
    "get_num_new_matched_tokens": 0,
    "get_inference_info": {"fake": True},
    "check_lookup_result": 0,
    "num_blocks_per_chunk": 16,
    "reset_cache": True,
    "health": 0,
    "is_healthy": True,
    "lookup": 0,
    "is_frozen": False,
    "get_finished_with_lazy_offload": (set(), set()),
}


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


#: Default of generated optional parameters: calls record only what the caller passed.
UNSET: Any = _Unset()


class GeneratedEngine:
    """Base of generated fakes: records calls; drains failed blocks like the real release."""

    def _setup(self, *args: Any, **kwargs: Any) -> None:
        self._init = (args, {k: v for k, v in kwargs.items() if v is not UNSET})
        self._calls: list[str] = []
        self._call_args: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
        self._invalid_block_ids: set[int] = set()
        self._events: list[Any] = []
        self._failed_requests: set[str] = set()

    def _called(self, name: str, *args: Any, **kwargs: Any) -> Any:
        self._calls.append(name)
        passed = {k: v for k, v in kwargs.items() if v is not UNSET}
        self._call_args.append((name, args, passed))
        if name == "get_block_ids_with_load_errors":
            ids, self._invalid_block_ids = self._invalid_block_ids, set()
            return ids
        if name == "get_kv_events":
            events, self._events = self._events, []
            return events
        if name == "get_failed_request_ids":
            failed, self._failed_requests = self._failed_requests, set()
            return failed
        return RESULTS.get(name)


def _param_source(
    params: list[str], optional: set[str], annotations: Mapping[str, str]
) -> tuple[str, str]:
    """(signature source without self, the call forwarding every parameter). Annotations are
    the row's source text, kept as strings (never evaluated)."""
    sig, call = [], []
    for token in params:
        name = token.lstrip("*")
        if token not in ("/", "*"):
            assert name.isidentifier() and not keyword.iskeyword(name), token
        text = f"{token}: {annotations[name]!r}" if name in annotations else token
        sig.append(f"{text}=UNSET" if token in optional else text)
        if token.startswith("**"):
            call.append(f"**{name}")
        elif token.startswith("*") and token != "*":
            call.append(f"*{name}")
        elif token not in ("/", "*"):
            call.append(f"{name}={name}")
    return ", ".join(sig), ", ".join(call)


def _dataclass_source(cls_name: str, params: list[str], detail: Mapping[str, Any]) -> list[str]:
    fields = detail.get("annotations", {})
    optional = set(detail.get("optional", ()))
    lines = ["@dataclasses.dataclass", f"class {cls_name}:"]
    for token in params:
        if token == "*":
            lines.append("    _: dataclasses.KW_ONLY")
            continue
        default = " = None" if token in optional else ""
        lines.append(f"    {token}: {fields.get(token) or 'object'!r}{default}")
    return lines


def _class_source(row: ReleaseRow, cls_name: str) -> list[str]:
    surface = row.surfaces[cls_name]
    details = row.details.get(cls_name, {})
    init_detail = details.get("__init__", {})
    if init_detail.get("dataclass"):
        return _dataclass_source(cls_name, surface["__init__"], init_detail)
    lines = [f"class {cls_name}(GeneratedEngine):"]
    for name, params in surface.items():
        detail = details.get(name, {})
        sig, call = _param_source(
            params, set(detail.get("optional", ())), detail.get("annotations", {})
        )
        returns = f" -> {detail['returns']!r}" if "returns" in detail else ""
        target = "_setup" if name == "__init__" else "_called"
        first = "" if name == "__init__" else f"{name!r}, "
        define = "async def" if detail.get("async") else "def"
        lines.append(f"    {define} {name}(self{', ' if sig else ''}{sig}){returns}:")
        lines.append(f"        return self.{target}({first}{call})")
    for name in row.properties.get(cls_name, ()):
        value = RESULTS.get(name)
        lines.append(f"    @property\n    def {name}(self):\n        return {value!r}")
    if "__init__" not in surface:
        lines.append("    def __init__(self):\n        self._setup()")
    return lines


def pack_token_ids(token_ids: Any) -> bytes:
    """A stand-in for LMCache 0.5.7rc2's ``token_codec.pack_token_ids`` (big-endian uint32);
    the real tier compares the adapters' output with the real codec."""
    import struct

    ids = list(token_ids)
    return struct.pack(f">{len(ids)}I", *ids)


def fake_module(row: ReleaseRow) -> types.ModuleType:
    """A module holding fakes of every class the row describes (cached per release)."""
    name = f"fake_lmcache_{row.version.replace('.', '_')}"
    if name in sys.modules:
        return sys.modules[name]
    module = types.ModuleType(name)
    module.__dict__.update(
        {
            "GeneratedEngine": GeneratedEngine,
            "UNSET": UNSET,
            "dataclasses": __import__("dataclasses"),
            # the release's token codec (0.5.7rc2), found beside the adapter class
            "pack_token_ids": pack_token_ids,
        }
    )
    source: list[str] = []
    for cls_name in row.surfaces:
        source += [*_class_source(row, cls_name), ""]
    sys.modules[name] = module
    code = compile(
        "\n".join(source), f"<fakes of LMCache {row.version}>", "exec", dont_inherit=True
    )
    exec(code, module.__dict__)
    for value in module.__dict__.values():
        if isinstance(value, type):
            value.__module__ = name
    return module


def fake_from_row(row: ReleaseRow, cls_name: str = CONNECTOR.name) -> type[GeneratedEngine]:
    """The fake class of ``cls_name`` for the row's release."""
    cls: type[GeneratedEngine] = getattr(fake_module(row), cls_name)
    return cls


def instantiate(cls: type[GeneratedEngine]) -> GeneratedEngine:
    """An instance without running the generated ``__init__``'s real-release arguments."""
    engine = cls.__new__(cls)
    engine._setup()
    return engine
