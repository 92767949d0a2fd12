"""The radix cache the lmcache-compat backend builds on sglang 0.5.13 ... 0.5.20: sglang's own
``RadixCache`` plus LMCache I/O through the lmcache-compat adapters, in-process or MP.

It does what sglang's own ``LMCRadixCache`` of the same release does, with three differences:
the connector is an adapter bound to whichever LMCache release is installed (0.3.6 ... 0.5.6:
in-process wherever the release has it, not only on xpu; MP from 0.4.6), the metadata are
built by :class:`~lmcache_compat.sglang.metadata.MetadataBuilder` (``request_id`` kept where
the release has it), and the streams are the device's own (none on CPU, where sglang's
``create_device_stream`` fails). The internals it touches differ between sglang runs; the
variant (:mod:`~lmcache_compat.sglang.variants`) decides each once, at construction.

The class is made on first use (:func:`radix_cache_class`): it subclasses the running sglang's
``RadixCache``, so this module imports sglang and torch only then.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lmcache_compat.sglang.adapters import SGLangLayerwiseAdapter, SGLangMPAdapter
from lmcache_compat.sglang.metadata import MetadataBuilder
from lmcache_compat.sglang.variants import Variant
from lmcache_compat.upstream import locations as loc
from lmcache_compat.upstream.resolve import find

__all__ = ["RadixSettings", "radix_cache_class"]


@dataclass(frozen=True, slots=True)
class RadixSettings:
    """What the factory decided for one cache (from the build context and the plan)."""

    mode: str
    variant: Variant
    model_config: Any
    tp_size: int
    rank: int
    tp_group: Any
    config_file: str | None
    speculative_eagle_topk: int | None


def _stream(torch: Any, device: Any) -> Any:
    """A side stream on ``device`` (``None`` on CPU: everything runs on the caller's thread)."""
    if device.type == "cpu":
        return None
    return torch.get_device_module(device).Stream()


class _LayerCounter:
    """sglang's per-layer hook (``register_layer_transfer_counter``): after a layer is done the
    KV pool calls ``wait_until(layer_id)``, which loads that layer through the adapter."""

    def __init__(self, num_layers: int, stream: Any, load_layer: Callable[[int], None]) -> None:
        self.num_layers = num_layers
        self.load_stream = stream
        self._load_layer = load_layer

    def wait_until(self, layer_id: int) -> None:
        if self.load_stream is None:
            self._load_layer(layer_id)
            return
        self.load_stream.synchronize()
        with self.load_stream:
            self._load_layer(layer_id)


@dataclass(frozen=True, slots=True)
class _Sglang:
    """What the radix cache uses of the running sglang (found by name once) and torch."""

    torch: Any
    radix_key: Any
    tree_node: Any
    match_params: Any
    match_result: Any
    evict_params: Any
    evict_result: Any


if TYPE_CHECKING:
    _RadixBase = Any  # the running sglang's RadixCache: unknown statically
else:
    _RadixBase = object


class _CompatRadix(_RadixBase):  # type: ignore[misc]
    """The radix cache's own part: mixed in before the running sglang's ``RadixCache`` by
    :func:`radix_cache_class`, which also sets :attr:`_sgl` (sglang's classes and torch)."""

    _sgl: _Sglang

    def __init__(self, params: Any, settings: RadixSettings) -> None:
        super().__init__(params)
        self.settings = settings
        self.load_stream = _stream(self._sgl.torch, self.device)
        self.store_stream = _stream(self._sgl.torch, self.device)
        self._connector = self._connect(params.page_size, settings)
        self.lmcache_connector = self._connector
        self._metadata = MetadataBuilder()
        self._chunk_size = self._connector.chunk_size()
        self._bind_variant(settings.variant.internals)
        self._in_flight: list[Any] = []
        self._node_lock = threading.Lock()
        self._markers: dict[str, tuple[Any, int]] = {}

    def _connect(self, page_size: int, settings: RadixSettings) -> Any:
        """The adapter of the cache's mode over sglang's KV pool (in-process: layerwise, with
        sglang's per-layer hook registered)."""
        kvcache = self.token_to_kv_pool_allocator.get_kvcache()
        if settings.mode == "mp":
            return SGLangMPAdapter.create(
                sgl_config=settings.model_config,
                tp_size=settings.tp_size,
                rank=settings.rank,
                page_size=page_size,
                k_pool=kvcache.k_buffer,
                v_pool=kvcache.v_buffer,
                tp_group=settings.tp_group,
                config_file=settings.config_file,
            )
        connector = SGLangLayerwiseAdapter.create(
            sgl_config=settings.model_config,
            tp_size=settings.tp_size,
            rank=settings.rank,
            k_pool=kvcache.k_buffer,
            v_pool=kvcache.v_buffer,
            tp_group=settings.tp_group,
            config_file=settings.config_file,
        )
        layers = settings.model_config.num_hidden_layers if settings.model_config else 0
        self.layer_done_executor = _LayerCounter(
            layers, self.load_stream, connector.load_kv_layerwise
        )
        kvcache.register_layer_transfer_counter(self.layer_done_executor)
        return connector

    def _bind_variant(self, internals: Mapping[str, bool]) -> None:
        """The variant's decisions, once: how a key gives its token ids and is rebuilt, where
        store events go, where a request keeps its KV state."""
        radix_key = self._sgl.radix_key
        raw = internals["radix_key_raw_token_ids"]
        self._token_ids: Callable[[Any], list[int]] = (
            (lambda key: key.raw_token_ids()) if raw else (lambda key: key.token_ids)
        )
        self._snapshot: Callable[[Any, list[int]], Any]
        self._finished_key: Callable[[list[int], Any], Any]
        if internals["radix_key_cache_salt"]:
            self._snapshot = lambda key, ids: radix_key(
                ids, key.extra_key, key.is_bigram, cache_salt=key.cache_salt
            )
            self._finished_key = lambda ids, req: radix_key(
                ids, req.extra_key, cache_salt=req.cache_salt
            )
        elif raw:
            self._snapshot = lambda key, ids: radix_key(ids, key.extra_key, key.is_bigram)
            self._finished_key = lambda ids, req: radix_key(ids, req.extra_key)
        else:
            self._snapshot = lambda key, ids: key
            self._finished_key = lambda ids, req: radix_key(ids, req.extra_key)
        self._record = (
            self._record_store_event
            if internals["record_store_event"]
            else self.kv_events.record_store
        )
        self._kv_state: Callable[[Any], tuple[int, int]] = (
            (lambda req: (req.kv_committed_len, req.req_pool_idx))
            if internals["req_flat_kv"]
            else (lambda req: (req.kv.kv_committed_len, req.kv.req_pool_idx))
        )

    # --- sglang's hooks ------------------------------------------------------------------

    def reset(self) -> None:
        super().reset()
        if hasattr(self, "_in_flight"):  # the base constructor resets before ours ran
            with self._node_lock:
                self._in_flight.clear()
            self._markers.clear()

    def match_prefix(self, params: Any) -> Any:
        key = params.key
        if self.disable or not key:
            return super().match_prefix(params)
        if self.page_size != 1:
            key = key[: len(key) // self.page_size * self.page_size]
        base = super().match_prefix(params)
        value, last_node = base.device_indices, base.last_device_node
        if self.settings.mode == "mp":
            if params.req is None:
                return base
            return self._mp_match(key, base, value, last_node, params.req)
        return self._ip_match(key, base, value, last_node)

    def init_load_back(self, params: Any) -> Any:
        req = params.req
        key, value_numel = self._markers.pop(req.rid)
        last_node = params.best_match_node
        result = self._load_back(
            key,
            value_numel,
            params.host_hit_length,
            last_node,
            lambda sm, pp: self._mp_load(key, value_numel, req.rid, sm, pp),
        )
        if result is None:
            self._connector.release_pending(req.rid)
            return self._sgl.torch.empty(
                (0,), dtype=self._sgl.torch.int64, device=self.device
            ), last_node
        return result

    def cache_finished_req(self, req: Any, is_insert: bool = True, **kwargs: Any) -> None:
        super().cache_finished_req(req, is_insert=is_insert, **kwargs)
        mp = self.settings.mode == "mp"
        if not is_insert:
            if mp:
                self._markers.pop(req.rid, None)
                self._connector.end_session(req.rid)
            return
        committed, pool_idx = self._kv_state(req)
        topk = self.settings.speculative_eagle_topk
        if topk is not None and topk != 1:
            committed = len(req.origin_input_ids) + max(len(req.output_ids) - 1, 0)
        token_ids = (req.origin_input_ids + req.output_ids)[:committed]
        kv_indices = self.req_to_token_pool.req_to_token[pool_idx, :committed]
        found = super().match_prefix(self._sgl.match_params(key=self._finished_key(token_ids, req)))
        node = found.last_device_node
        self.inc_lock_ref(node)
        store = self._metadata.store(node, token_ids, kv_indices, 0, request_id=req.rid)
        if mp:
            self._connector.store_kv(store)
            self._markers.pop(req.rid, None)
            self.dec_lock_ref(node)
            self._connector.end_session(req.rid)
            return
        with self._on(self.store_stream):
            self._connector.store_kv(store)
        with self._node_lock:
            self._in_flight.append(node)

    def evict(self, params: Any) -> Any:
        if self.disable:
            return self._sgl.evict_result()
        if self.store_stream is not None:
            self.store_stream.synchronize()
        with self._node_lock:
            for node in self._in_flight:
                self.dec_lock_ref(node)
            self._in_flight.clear()
        return super().evict(params)

    # --- loads ---------------------------------------------------------------------------

    def _on(self, stream: Any) -> Any:
        return contextlib.nullcontext() if stream is None else stream

    def _mp_match(self, key: Any, base: Any, value: Any, last_node: Any, req: Any) -> Any:
        token_ids = self._token_ids(key)
        matched = self._connector.lookup_kv(token_ids, req.rid)
        if matched <= value.numel():
            self._connector.release_pending(req.rid)
            return base
        if token_ids is key.token_ids:
            token_ids = token_ids[:]
        self._markers[req.rid] = (self._snapshot(key, token_ids), int(value.numel()))
        return self._sgl.match_result(
            device_indices=value,
            last_device_node=last_node,
            last_host_node=last_node,
            best_match_node=last_node,
            host_hit_length=matched - int(value.numel()),
        )

    def _ip_match(self, key: Any, base: Any, value: Any, last_node: Any) -> Any:
        uncached = len(key) - value.numel()
        if uncached <= 0:
            return base
        token_ids = self._token_ids(key)
        numel = int(value.numel())
        found = self._load_back(
            key,
            numel,
            uncached,
            last_node,
            lambda sm, pp: self._ip_load(token_ids, numel, sm, pp),
        )
        if found is None:
            return base
        slots, node = found
        return self._sgl.match_result(
            device_indices=self._sgl.torch.cat([value, slots]),
            last_device_node=node,
            last_host_node=node,
            best_match_node=node,
        )

    def _load_back(
        self,
        key: Any,
        value_numel: int,
        uncached: int,
        last_node: Any,
        load: Callable[[Any, int], int],
    ) -> tuple[Any, Any] | None:
        prefix_pad = value_numel % self._chunk_size
        allocator = self.token_to_kv_pool_allocator
        if allocator.available_size() < uncached:
            self.evict(self._sgl.evict_params(num_tokens=uncached))
        slots = allocator.alloc(uncached)
        if slots is None:
            return None
        mapping = self._sgl.torch.empty(
            value_numel + slots.numel(), dtype=self._sgl.torch.int64, device=self.device
        )
        mapping[:value_numel].fill_(-1)
        mapping[value_numel:].copy_(slots)
        retrieved = load(mapping, prefix_pad)
        if retrieved <= 0:
            allocator.free(slots)
            return None
        fetched = retrieved - prefix_pad
        allocator.free(slots[fetched:])
        node = self._sgl.tree_node(priority=last_node.priority)
        node.key = key[value_numel : value_numel + fetched]
        node.value = slots[:fetched]
        node.parent = last_node
        last_node.children[node.key.child_key(self.page_size)] = node
        self.evictable_size_ += fetched
        self._update_leaf_status(last_node)
        self._update_leaf_status(node)
        self._record(node.parent)
        self._record(node)
        return slots[:fetched], node

    def _mp_load(
        self, key: Any, value_numel: int, request_id: str, mapping: Any, prefix_pad: int
    ) -> int:
        load = self._metadata.load(
            key.token_ids,
            mapping,
            value_numel - prefix_pad,
            prefix_pad=prefix_pad,
            request_id=request_id,
        )
        if self.load_stream is None:
            return int(self._connector.retrieve_kv(load))
        current = self._sgl.torch.get_device_module(self.device).current_stream()
        self.load_stream.wait_stream(current)
        with self.load_stream:
            retrieved = int(self._connector.retrieve_kv(load))
        current.wait_stream(self.load_stream)
        return retrieved

    def _ip_load(self, token_ids: Any, value_numel: int, mapping: Any, prefix_pad: int) -> int:
        load = self._metadata.load(token_ids, mapping, value_numel - prefix_pad)
        with self._on(self.load_stream):
            return int(self._connector.start_load_kv(load))


@functools.cache
def radix_cache_class() -> type:
    """The backend's radix cache class, over the running sglang's ``RadixCache``."""
    import torch  # lazy: sglang is running (the factory is called by its registry)

    sgl = _Sglang(
        torch=torch,
        radix_key=find(loc.SGLANG_RADIX_KEY),
        tree_node=find(loc.SGLANG_TREE_NODE),
        match_params=find(loc.SGLANG_MATCH_PARAMS),
        match_result=find(loc.SGLANG_MATCH_RESULT),
        evict_params=find(loc.SGLANG_EVICT_PARAMS),
        evict_result=find(loc.SGLANG_EVICT_RESULT),
    )
    doc = "sglang's ``RadixCache`` with LMCache I/O through lmcache-compat."
    bases = (_CompatRadix, find(loc.SGLANG_RADIX_CACHE))
    # __module__ given: sglang's RadixCache is an ABC, and ABCMeta's frame would name ``abc``
    namespace = {"_sgl": sgl, "__doc__": doc, "__module__": __name__}
    return type("CompatRadixCache", bases, namespace)
