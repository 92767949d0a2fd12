"""Building the release's ``LoadMetadata`` / ``StoreMetadata`` from sglang's arguments.

:class:`MetadataBuilder` reads the two dataclasses' fields once (their ``__init__``), keeps
``prefix_pad`` and ``request_id`` where the release has them (0.4.6 on) and drops them where it
does not, saying what is lost (:attr:`MetadataBuilder.dropped`: the catalog's words). A call is
one dataclass construction: the keyword set was decided at construction.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lmcache_compat.core.catalog import Capability
from lmcache_compat.core.signatures import init_facts
from lmcache_compat.upstream import locations as loc

__all__ = ["MetadataBuilder"]

_PREFIX_PAD = Capability.SGLANG_PREFIX_PAD
_REQUEST_ID = Capability.SGLANG_REQUEST_ID


def _keyword(capability: Capability) -> str:
    keyword = capability.spec.keyword
    assert keyword is not None
    return keyword


class MetadataBuilder:
    """``load(...)`` / ``store(...)`` build the release's metadata records.

    ``load(token_ids, slot_mapping, offset, prefix_pad=0, request_id="")`` and
    ``store(last_node, token_ids, kv_indices, offset, request_id="")`` take the newest
    fields; the ones the release lacks are dropped (:attr:`dropped` says which, and what that
    loses)."""

    load: Callable[..., Any]
    store: Callable[..., Any]

    def __init__(self, load_cls: type | None = None, store_cls: type | None = None) -> None:
        # lazy: the classes live in LMCache's SGLang module, which imports torch
        from lmcache_compat.sglang.upstream import find_sglang

        self.load_cls = load_cls or find_sglang(loc.SGLANG_LOAD_METADATA)
        self.store_cls = store_cls or find_sglang(loc.SGLANG_STORE_METADATA)
        load_facts, store_facts = init_facts(self.load_cls), init_facts(self.store_cls)
        pad, rid = _keyword(_PREFIX_PAD), _keyword(_REQUEST_ID)
        self.load_keeps = frozenset(k for k in (pad, rid) if load_facts.accepts_keyword(k))
        self.store_keeps = frozenset(k for k in (rid,) if store_facts.accepts_keyword(k))
        self.dropped: dict[str, str] = {}
        for keyword, capability, kept in (
            (pad, _PREFIX_PAD, pad in self.load_keeps),
            (rid, _REQUEST_ID, rid in self.load_keeps and rid in self.store_keeps),
        ):
            if not kept:
                self.dropped[keyword] = capability.spec.fallback_result
        self.load = self._loader(pad in self.load_keeps, rid in self.load_keeps)
        self.store = self._storer(rid in self.store_keeps)

    def _loader(self, pad: bool, rid: bool) -> Callable[..., Any]:
        cls = self.load_cls
        if pad and rid:
            return cls
        if pad:

            def load_pad(
                token_ids: Any,
                slot_mapping: Any,
                offset: int,
                prefix_pad: int = 0,
                request_id: str = "",
            ) -> Any:
                return cls(token_ids, slot_mapping, offset, prefix_pad=prefix_pad)

            return load_pad
        if rid:

            def load(
                token_ids: Any,
                slot_mapping: Any,
                offset: int,
                prefix_pad: int = 0,
                request_id: str = "",
            ) -> Any:
                return cls(token_ids, slot_mapping, offset, request_id=request_id)

            return load

        def load_plain(
            token_ids: Any,
            slot_mapping: Any,
            offset: int,
            prefix_pad: int = 0,
            request_id: str = "",
        ) -> Any:
            return cls(token_ids, slot_mapping, offset)

        return load_plain

    def _storer(self, rid: bool) -> Callable[..., Any]:
        cls = self.store_cls
        if rid:
            return cls

        def store(
            last_node: Any, token_ids: Any, kv_indices: Any, offset: int, request_id: str = ""
        ) -> Any:
            return cls(last_node, token_ids, kv_indices, offset)

        return store

    def __repr__(self) -> str:
        lost = "; ".join(f"{k}: {v}" for k, v in self.dropped.items()) or "nothing dropped"
        return (
            f"<MetadataBuilder {self.load_cls.__qualname__}/{self.store_cls.__qualname__}: {lost}>"
        )
