"""A CPU stand-in for what a GPU gives LMCache's SGLang MP connector (0.5.5 ... 0.5.6): its
REGISTER_KV_CACHE sends sglang's 2*L ``[slots, heads, dim]`` tensors with the ``k_v`` layout
hint, which the CPU server rejects (``'list' object has no attribute 'data_ptr'``: its CPU cache
context expects flat tensors); the same tensors viewed ``[blocks, page, heads, dim]`` with the
``unified`` hint register, store and retrieve on CPU (measured). Test code only: on a GPU the
connector's own layout is what the server takes.

Installed into the child process before sglang builds its cache: it wraps the release's
``RequestClientFactory.create`` so that the client's ``register_kv_cache`` re-sends the views.
"""

from __future__ import annotations

from typing import Any


def install(k_pool: list[Any], v_pool: list[Any], page_size: int) -> list[Any]:
    """Rewrite REGISTER_KV_CACHE; returns the list keeping the views alive (their shared-memory
    segments live as long as the wrapped tensor objects)."""
    from lmcache.integration.sglang import multi_process_adapter as mpa
    from lmcache.v1.platform.kv_wrap import wrap_one_kv_cache

    keep: list[Any] = []
    factory = mpa.RequestClientFactory
    real_create = factory.create

    def create(url: str, **kwargs: Any) -> Any:
        client = real_create(url, **kwargs)
        register = client.register_kv_cache

        def register_kv_cache(*args: Any) -> Any:
            # (instance_id, kv, model_name, world_size, engine_type, layout_hints, groups)
            instance_id, _, model, world, engine, _, groups = args
            views = [
                t.view(t.shape[0] // page_size, page_size, *t.shape[1:]) for t in [*k_pool, *v_pool]
            ]
            keep.extend(views)
            wrapped = [wrap_one_kv_cache(v) for v in views]
            layout = {"kv_list_layout": "unified", "tokens_per_block": page_size}
            return register(instance_id, wrapped, model, world, engine, layout, groups)

        client.register_kv_cache = register_kv_cache
        return client

    factory.create = staticmethod(create)
    return keep
