"""sglang's real registry builds the lmcache-compat backend, which stores and then loads KV
through real LMCache: one child process per (sglang, LMCache) pair.

    python -m tests.tiers.sglang.registry_child SPEC_JSON

``SPEC_JSON``: ``{"mode": "unified" | "in-process" | "mp", "mp_port": int | null,
"fixture": path of a tiny model config dir, "tmp": dir}``.

Steps, all on CPU: ``sglang.srt.plugins.load_plugins()`` runs the installed entry points (ours
registers ``lmcache-compat``); a second ``register()`` is a no-op; real sglang CPU pools
(``ReqToTokenPool``, ``MHATokenToKVPool``, ``PagedTokenToKVPoolAllocator``) and a published
``ServerArgs(radix_cache_backend="lmcache-compat", lmcache_config_file=...)``;
``create_tree_cache(TreeCacheBuildContext(...))`` calls our factory. Then:

* ``unified`` (sglang 0.5.21 on): sglang's own ``LMCacheUnifiedRadixCache`` whose connector is
  our ``SGLangUnifiedAdapter``; store 64 tokens and load them into other slots with the calls
  sglang's cache makes (submit_store ... complete_load) through that adapter, against the MP
  server on ``mp_port`` (started with ``--supported-transfer-mode auto``);
* ``in-process`` / ``mp`` (sglang 0.5.13 ... 0.5.20): our radix cache; a finished request is
  stored through ``cache_finished_req`` and a second request with the same prompt loads it
  back through ``match_prefix`` (in-process: ``start_load_kv`` and the per-layer hook; MP:
  ``init_load_back``), then the loaded slots are compared with the stored ones.

Prints ``RESULT: {json}``.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import sys
import time
import traceback
from pathlib import Path
from typing import Any

LAYERS, HEADS, DIM, PAGE, SIZE, TOKENS = 2, 2, 8, 16, 512, 64


def _write_config(spec: dict[str, Any]) -> str:
    path = Path(spec["tmp"]) / "lmcache.yaml"
    lines = [f"chunk_size: {spec.get('chunk', 32)}"]
    if spec["mode"] == "in-process":
        lines += ["local_cpu: true", "max_local_cpu_size: 0.25", "use_layerwise: true"]
        lines += ["save_unfull_chunk: false"]
    else:
        lines += ["mp_host: tcp://127.0.0.1" if spec["mode"] == "mp" else "mp_host: 127.0.0.1"]
        lines += [f"mp_port: {spec['mp_port']}"]
        lines += ["extra_config:", "  lmcache.mp.mq_timeout: 15"]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


class StandInModelConfig:
    """What the caches and LMCache read of sglang's ``ModelConfig`` (a real one needs the
    tokenizer and weights)."""

    def __init__(self, arch: Any) -> None:
        self.model_path = "stand-in/tiny-llama"
        self.num_hidden_layers = LAYERS
        self.head_dim = DIM
        self.attention_arch = arch
        self.hf_config = type("HF", (), {"architectures": ["LlamaForCausalLM"]})()

    def get_num_kv_heads(self, tp_size: int) -> int:
        return HEADS // tp_size


def _pools(torch: Any) -> tuple[Any, Any, Any]:
    from sglang.srt.mem_cache.allocator.paged import PagedTokenToKVPoolAllocator
    from sglang.srt.mem_cache.memory_pool import MHATokenToKVPool, ReqToTokenPool

    r2t = ReqToTokenPool(size=4, max_context_len=512, device="cpu", enable_memory_saver=False)
    kv = MHATokenToKVPool(
        size=SIZE,
        page_size=PAGE,
        dtype=torch.float16,
        head_num=HEADS,
        head_dim=DIM,
        layer_num=LAYERS,
        device="cpu",
        enable_memory_saver=False,
    )
    alloc = PagedTokenToKVPoolAllocator(SIZE, PAGE, torch.float16, "cpu", kv, need_sort=False)
    return r2t, kv, alloc


def _context(registry: Any, fields: dict[str, Any]) -> Any:
    """A TreeCacheBuildContext with the fields this sglang declares (read by name)."""
    import dataclasses

    declared = {f.name for f in dataclasses.fields(registry.TreeCacheBuildContext)}
    return registry.TreeCacheBuildContext(**{k: v for k, v in fields.items() if k in declared})


def main(spec: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"mode": spec["mode"], "steps": []}
    t0 = time.monotonic()

    def step(name: str, **kw: Any) -> None:
        out["steps"].append({"step": name, "t": round(time.monotonic() - t0, 2), **kw})

    try:
        import importlib.metadata as md

        import torch

        out["sglang"], out["lmcache"] = md.version("sglang"), md.version("lmcache")
        from sglang.srt.mem_cache import registry
        from sglang.srt.plugins import load_plugins

        import lmcache_compat.sglang as compat

        load_plugins()
        factory = registry.get_radix_cache_factory(compat.BACKEND_NAME)
        step("load_plugins", registered=registry.registered_radix_cache_backends())
        assert factory is not None, "the sglang.srt.plugins entry point did not register"
        compat.register()  # idempotent: a second registration is a no-op
        assert registry.get_radix_cache_factory(compat.BACKEND_NAME) is factory
        model_dir = Path(spec["tmp"]) / "tiny-llama"
        shutil.copytree(spec["fixture"], model_dir, dirs_exist_ok=True)
        config = _write_config(spec)
        from sglang.srt.server_args import ServerArgs

        server_args = ServerArgs(
            model_path=str(model_dir),
            device="cpu",
            radix_cache_backend=compat.BACKEND_NAME,
            lmcache_config_file=config,
            skip_tokenizer_init=True,
            page_size=PAGE,
        )
        _publish(server_args)
        r2t, kv, alloc = _pools(torch)
        from sglang.srt.mem_cache.cache_init_params import CacheInitParams

        params = CacheInitParams(
            disable=False, req_to_token_pool=r2t, token_to_kv_pool_allocator=alloc, page_size=PAGE
        )
        arch = _attention_arch()
        worker = type(
            "Worker", (), {"model_runner": type("Runner", (), {"forward_stream": None})()}
        )
        ctx = _context(
            registry,
            {
                "server_args": server_args,
                "params": params,
                "is_hybrid_swa": False,
                "is_hybrid_ssm": False,
                "enable_hierarchical_cache": False,
                "disable_radix_cache": False,
                "effective_chunked_prefill_size": None,
                "tp_worker": worker(),
                "model_config": StandInModelConfig(arch),
                "tp_size": 1,
                "tp_rank": 0,
                "tp_group": None,
            },
        )
        if spec["mode"] == "mp":
            from tests.tiers.sglang.cpu_mp_layout import install

            out["_keep"] = len(install(kv.k_buffer, kv.v_buffer, PAGE))
        cache = registry.create_tree_cache(ctx)
        step(
            "create_tree_cache",
            cache=type(cache).__name__,
            mro=[c.__name__ for c in type(cache).__mro__[:3]],
        )
        connector = cache.lmcache_connector
        out["connector"] = type(connector).__name__
        if spec["mode"] == "unified":
            out.update(_unified_round_trip(torch, connector, kv, step))
        else:
            out.update(_radix_round_trip(torch, cache, kv, r2t, step, spec["mode"]))
    except BaseException as exc:
        out["error"] = f"{type(exc).__name__}: {exc}".splitlines()[0][:500]
        out["traceback"] = traceback.format_exc().strip().splitlines()[-8:]
        out["identical"] = False
    out["seconds"] = round(time.monotonic() - t0, 2)
    return out


def _publish(server_args: Any) -> None:
    """Make the server args the running ones (sglang 0.5.17 on: the runtime context; before:
    the global server args)."""
    try:
        from sglang.srt import runtime_context

        runtime_context.publish(server_args, role="scheduler")
    except (ImportError, AttributeError):
        from sglang.srt.server_args import set_global_server_args_for_scheduler

        set_global_server_args_for_scheduler(server_args)


def _attention_arch() -> Any:
    from sglang.srt.configs.model_config import AttentionArch

    return AttentionArch.MHA


def _unified_round_trip(torch: Any, conn: Any, kv: Any, step: Any) -> dict[str, Any]:
    tensors = kv.k_buffer + kv.v_buffer
    src = torch.arange(PAGE, PAGE + TOKENS)  # page 0 is sglang's reserved dummy page
    torch.manual_seed(0)
    for t in tensors:
        t[src] = torch.randn(TOKENS, HEADS, DIM).to(t.dtype)
    original = [t[src].clone() for t in tensors]
    toks = list(range(700, 700 + TOKENS))
    salt = conn.build_cache_salt(None, None)
    start = conn.get_store_start("s1", TOKENS)
    op = conn.submit_store(
        "s1",
        toks,
        conn.device_indices_by_group(src[start:]),
        device_indices_start=start,
        cache_salt=salt,
    )
    _wait(lambda: conn.ready_prefix_count([op]) >= 1)
    stored = conn.complete_store(op)
    conn.finish_request("s1")
    step("stored", ok=bool(stored), chunk_size=conn.chunk_size)
    hit, rid, lookup = None, "", None
    for attempt in range(50):  # a stored chunk becomes visible to lookups a little later
        rid = f"l{attempt}"
        lookup = conn.submit_lookup(rid, toks, local_hit_tokens=0, cache_salt=salt)
        _wait(functools.partial(_polled, conn, lookup))
        hit = conn.poll_lookup(lookup)
        if hit and hit >= TOKENS:
            break
        conn.finish_request(rid)
        time.sleep(0.1)
    step("looked up", hit=hit)
    dst = torch.arange(2 * PAGE + TOKENS, 2 * PAGE + 2 * TOKENS)
    load = conn.submit_load(
        lookup,
        conn.device_indices_by_group(dst),
        local_hit_tokens=0,
        owned_device_indices=dst,
        producer_stream=None,
    )
    conn.prepare_load_on_stream(load, None)
    _wait(lambda: conn.ready_prefix_count([load]) >= 1)
    loaded = conn.complete_load(load)
    conn.finish_request(rid)
    same = [torch.equal(t[dst], o) for t, o in zip(tensors, original, strict=True)]
    step("loaded", ok=bool(loaded))
    conn.end_all_sessions()
    return {"hit": hit, "identical": all(same) and bool(loaded)}


def _polled(conn: Any, lookup: Any) -> bool:
    return conn.poll_lookup(lookup) is not None


def _wait(ready: Any, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not ready() and time.monotonic() < deadline:
        time.sleep(0.02)


def _make_req(rid: str, tokens: list[int], pool_idx: int) -> Any:
    """A request the caches can finish and match: sglang's own ``Req`` class (its methods, such
    as 0.5.14's ``pop_committed_kv_cache``, are sglang's code), its state set directly (a real
    constructor needs sampling parameters and a tokenizer). Flat fields (through 0.5.18) and
    ``req.kv`` (sglang's ``ReqKvInfo``, where the release has it) both hold the KV state."""
    from sglang.srt.managers import schedule_batch

    req = object.__new__(schedule_batch.Req)
    state: dict[str, Any] = {
        "rid": rid,
        "origin_input_ids": tokens,
        "output_ids": [],
        "extra_key": None,
        "cache_salt": None,
        "priority": 0,
        "kv_committed_len": len(tokens),
        "kv_allocated_len": len(tokens),
        "req_pool_idx": pool_idx,
        "cache_protected_len": 0,
        "kv_committed_freed": False,
        "kv_overallocated_freed": False,
        "reasoning_tokens": 0,
        "last_node": None,
    }
    info = getattr(schedule_batch, "ReqKvInfo", None)
    if info is not None:
        import dataclasses

        required = [
            f.name
            for f in dataclasses.fields(info)
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        ]
        kv = info(**dict.fromkeys(required, 0))
        for name, value in (
            ("req_pool_idx", pool_idx),
            ("kv_committed_len", len(tokens)),
            ("kv_allocated_len", len(tokens)),
        ):
            _set(kv, name, value)
        state["kv"] = kv
    for name, value in state.items():
        _set(req, name, value)
    return req


def _set(obj: Any, name: str, value: Any) -> None:
    """Set what this release's class lets be set (a read-only property, or a field the
    release's record does not have, is left alone)."""
    with contextlib.suppress(AttributeError):
        setattr(obj, name, value)


def _radix_round_trip(  # noqa: PLR0917 (the child's own helper)
    torch: Any, cache: Any, kv: Any, r2t: Any, step: Any, mode: str
) -> dict[str, Any]:
    """Store through cache_finished_req, then load through match_prefix."""
    from lmcache_compat.upstream import locations as loc
    from lmcache_compat.upstream.resolve import find

    match_params = find(loc.SGLANG_MATCH_PARAMS)
    radix_key = find(loc.SGLANG_RADIX_KEY)
    tokens = list(range(900, 900 + TOKENS))
    slots = cache.token_to_kv_pool_allocator.alloc(TOKENS)
    torch.manual_seed(0)
    for t in kv.k_buffer + kv.v_buffer:
        t[slots] = torch.randn(TOKENS, HEADS, DIM).to(t.dtype)
    original = [t[slots].clone() for t in kv.k_buffer + kv.v_buffer]
    r2t.req_to_token[1, :TOKENS] = slots
    req = _make_req("r1", tokens, 1)
    cache.cache_finished_req(req, **_finished_kwargs(cache))
    step("cache_finished_req (stored)")
    cache.evict(find(loc.SGLANG_EVICT_PARAMS)(num_tokens=TOKENS))  # drop the tree's copy
    cache.reset()  # a fresh tree: only LMCache holds the KV now
    for t in kv.k_buffer + kv.v_buffer:
        t.zero_()  # and the pool forgets it: what is compared below was loaded
    second = _make_req("r2", tokens, 2)
    result = cache.match_prefix(match_params(key=radix_key(tokens), req=second))
    for attempt in range(50 if mode == "mp" else 0):
        # a stored chunk becomes visible to lookups a little after STORE answers (CPU server)
        if getattr(result, "host_hit_length", None):
            break
        cache.lmcache_connector.end_session(second.rid)
        time.sleep(0.1)
        second = _make_req(f"r2-{attempt}", tokens, 2)
        result = cache.match_prefix(match_params(key=radix_key(tokens), req=second))
    if mode == "mp" and getattr(result, "host_hit_length", None):
        params = find(loc.SGLANG_MATCH_PARAMS).__module__
        init = sys.modules[params].InitLoadBackParams
        indices, _ = cache.init_load_back(
            init(
                req=second,
                host_hit_length=result.host_hit_length,
                best_match_node=result.best_match_node,
            )
        )
    else:
        indices = result.device_indices
        layer_hook = getattr(cache, "layer_done_executor", None)
        if layer_hook is not None:
            for layer in range(LAYERS):
                layer_hook.wait_until(layer)
    step("match_prefix (loaded)", tokens=len(indices))
    same = (
        [
            torch.equal(t[indices], o)
            for t, o in zip(kv.k_buffer + kv.v_buffer, original, strict=True)
        ]
        if len(indices) == TOKENS
        else [False]
    )
    return {"loaded": len(indices), "identical": all(same)}


def _finished_kwargs(cache: Any) -> dict[str, Any]:
    import inspect

    # sglang's own cache class: the first in the MRO that is not lmcache-compat's
    base: Any = next(
        c for c in type(cache).__mro__ if not c.__module__.startswith("lmcache_compat")
    )
    params = inspect.signature(base.cache_finished_req).parameters
    return {"kv_len_to_handle": TOKENS} if "kv_len_to_handle" in params else {}


def run(arg: str) -> dict[str, Any]:
    """What the sglang driver calls in a forked child (the command line's argument)."""
    return main(json.loads(arg))


if __name__ == "__main__":
    result = main(json.loads(sys.argv[1]))
    print("RESULT: " + json.dumps(result), flush=True)
    os._exit(0)
