"""A CPU store -> lookup -> retrieve round trip with a release's own MP worker + scheduler.

Run it with the Python of a venv that has the release installed, against a server started with
its CPU transfer flag: ``--transfer-mode non_gpu`` (0.4.6) or ``--supported-transfer-mode auto``
(0.4.7 on; ``survey.transfer_flags`` picks it)::

    /tmp/mpsrv/0.5.6/bin/python tests/mp_server/worker_probe.py tcp://127.0.0.1:PORT

``LMCacheMPWorkerAdapter.register_kv_caches`` takes CPU tensors in vLLM's CPU-attention layout
(HND: ``[2, num_blocks, num_heads, block_size, head_size]`` per layer); with CPU tensors the
worker's ``create_transfer_context`` picks its CPU path (``DataTransferContext`` in 0.4.6 and
0.4.7, ``EngineDrivenTransferContext`` from 0.5.0: the worker gathers KV into CPU buffers, shared
memory or pickled over ZMQ), so no GPU, CUDA IPC or cupy is involved. Releases before 0.4.6 wrap
every KV tensor in ``CudaIPCWrapper`` and fail here. The probe stores 2 chunks from blocks
0..31, looks them up through the scheduler adapter, retrieves them into blocks 32..63 and
compares. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import importlib.metadata
import inspect
import json
import time
import traceback
from typing import Any

MP_MODULE = "lmcache.integration.vllm.vllm_multi_process_adapter"
PARALLEL_FIELDS: dict[str, object] = {
    "use_mla": False,
    "mla_only": False,
    "kv_world_size": 1,
    "kv_worker_id": 0,
    "actual_world_size": 1,
    "actual_worker_id": 0,
    "vllm_world_size": 1,
    "vllm_worker_id": 0,
    "tp_size": 1,
    "pp_size": 1,
    "n_servers": 1,
    "dcp_size": 1,
}


def _kwargs(cls: type, module: Any, values: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, p in inspect.signature(cls).parameters.items():
        if name == "self" or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        if name == "parallel_strategy" and hasattr(module, "ParallelStrategy"):
            ps = module.ParallelStrategy
            out[name] = ps(**{f.name: PARALLEL_FIELDS[f.name] for f in dataclasses.fields(ps)})
        elif name in values:
            out[name] = values[name]
        elif p.default is p.empty:
            raise TypeError(f"no value for {cls.__name__}({name})")
    return out


def _wait(pred: Any, timeout: float) -> Any:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        value = pred()
        if value:
            return value
        time.sleep(0.02)
    return None


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("--timeout", type=float, default=30.0)
    args = ap.parse_args()
    out: dict[str, Any] = {"version": importlib.metadata.version("lmcache"), "ok": False}
    ctx: Any = None
    adapters: list[Any] = []
    try:
        import torch

        zmq = importlib.import_module("zmq")
        m = importlib.import_module(MP_MODULE)
        ctx = zmq.Context()
        block, heads, head_size, n_blocks, n_layers = 16, 2, 8, 64, 2
        values = {
            "server_url": args.url,
            "server_urls": [args.url],
            "context": ctx,
            "model_name": "m",
            "vllm_block_size": block,
            "world_size": 1,
            "kv_rank": 0,
            "tp_size": 1,
            "mq_timeout": 10.0,
        }
        worker = m.LMCacheMPWorkerAdapter(**_kwargs(m.LMCacheMPWorkerAdapter, m, values))
        adapters.append(worker)
        sched = m.LMCacheMPSchedulerAdapter(**_kwargs(m.LMCacheMPSchedulerAdapter, m, values))
        adapters.append(sched)
        torch.manual_seed(0)
        # vLLM's CPU attention layout, HND: [2, num_blocks, num_heads, block_size, head_size]
        # (0.4.6 / 0.4.7 assume it for CPU tensors; 0.5.x take it from layout_hints).
        kv = {
            f"model.layers.{i}.self_attn.attn": torch.zeros(
                2, n_blocks, heads, block, head_size, dtype=torch.bfloat16
            )
            for i in range(n_layers)
        }
        for t in kv.values():
            t[:, :32].normal_()
        register = worker.register_kv_caches
        if "layout_hints" in inspect.signature(register).parameters:
            register(kv, layout_hints={"kv_layout": "HND"})
        else:
            register(kv)
        out["registered"] = True
        out["transfer_context"] = type(getattr(worker, "transfer_ctx", None)).__name__

        tokens = list(range(1, 513))  # 2 chunks of 256
        fields = {f.name for f in dataclasses.fields(m.LoadStoreOp)}
        tok = {"token_ids": tokens} if "token_ids" in fields else {}
        if "token_bytes" in fields:
            codec = importlib.import_module("lmcache.v1.multiprocess.token_codec")
            tok = {"token_bytes": codec.pack_token_ids(tokens)}
        # block_ids: list[int] up to 0.4.6, one list per engine KV group (list[list[int]]) after.
        field_type = {f.name: str(f.type) for f in dataclasses.fields(m.LoadStoreOp)}
        nested = "list[list" in field_type["block_ids"].replace("List", "list")

        def blocks(ids: range) -> list[Any]:
            return [list(ids)] if nested else list(ids)

        store = m.LoadStoreOp(**tok, block_ids=blocks(range(32)), start=0, end=512)
        worker.submit_store_request("store-0", store, None)
        done = _wait(lambda: worker.get_finished({"store-0"})[0], args.timeout)
        out["store_finished"] = sorted(done) if done else None

        name = "packed_token_ids" if "token_bytes" in tok else "token_ids"
        sched.maybe_submit_lookup_request("req-1", **{name: tok.get("token_bytes", tokens)})
        hit = _wait(lambda: sched.check_lookup_result("req-1"), args.timeout)
        out["lookup_hit_tokens"] = hit

        before = {k: v[:, :32].clone() for k, v in kv.items()}
        load = m.LoadStoreOp(**tok, block_ids=blocks(range(32, 64)), start=0, end=512)
        worker.submit_retrieve_request("req-1", load, None)
        done = _wait(lambda: worker.get_finished({"req-1"})[1], args.timeout)
        out["retrieve_finished"] = sorted(done) if done else None
        out["retrieved_equal"] = all(torch.equal(kv[k][:, 32:64], before[k]) for k in kv)
        out["ok"] = bool(out["retrieved_equal"] and hit)
    except BaseException as exc:
        out["error"] = f"{type(exc).__name__}: {exc}"
        out["traceback"] = traceback.format_exc().splitlines()[-8:]
    finally:
        for a in adapters:
            fn = getattr(a, "shutdown", None)
            if callable(fn):
                try:
                    fn()
                except Exception as exc:
                    out.setdefault("shutdown_errors", []).append(repr(exc))
        if ctx is not None:
            ctx.destroy(linger=0)
    print(json.dumps(out))
    return 0 if out["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
