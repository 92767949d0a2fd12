"""A CPU store -> lookup -> retrieve round trip with a release's own MP worker + scheduler.

Run it with the Python of a venv that has the release installed, against a server started with
its CPU transfer flag: ``--transfer-mode non_gpu`` (0.4.6) or ``--supported-transfer-mode auto``
(0.4.7 on; ``survey.transfer_flags`` picks it)::

    PYTHONPATH=. /tmp/lmcache-compat-mp-venvs/0.5.6/bin/python
    tests/tiers/mp_server/worker_probe.py tcp://127.0.0.1:PORT

The release's classes are found through :mod:`tests.tiers.mp_server.release_side` (hence the
repository root on ``PYTHONPATH``).

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

from tests.tiers.mp_server.release_side import (
    load_store_op_class,
    own_init_kwargs,
    pack_token_ids,
    scheduler_class,
    worker_class,
)


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
        ctx = zmq.Context()
        block, heads, head_size, n_blocks, n_layers = 16, 2, 8, 64, 2
        worker_cls, scheduler_cls, op = worker_class(), scheduler_class(), load_store_op_class()
        worker = worker_cls(
            **own_init_kwargs(worker_cls, args.url, ctx, block_size=block, mq_timeout=10.0)
        )
        adapters.append(worker)
        sched = scheduler_cls(
            **own_init_kwargs(scheduler_cls, args.url, ctx, block_size=block, mq_timeout=10.0)
        )
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
        fields = {f.name for f in dataclasses.fields(op)}
        tok: dict[str, Any] = {"token_ids": tokens} if "token_ids" in fields else {}
        if "token_bytes" in fields:
            tok = {"token_bytes": pack_token_ids()(tokens)}
        # block_ids: list[int] up to 0.4.6, one list per engine KV group (list[list[int]]) after.
        field_type = {f.name: str(f.type) for f in dataclasses.fields(op)}
        nested = "list[list" in field_type["block_ids"].replace("List", "list")

        def blocks(ids: range) -> list[Any]:
            return [list(ids)] if nested else list(ids)

        store = op(**tok, block_ids=blocks(range(32)), start=0, end=512)
        worker.submit_store_request("store-0", store, None)
        done = _wait(lambda: worker.get_finished({"store-0"})[0], args.timeout)
        out["store_finished"] = sorted(done) if done else None

        name = "packed_token_ids" if "token_bytes" in tok else "token_ids"
        sched.maybe_submit_lookup_request("req-1", **{name: tok.get("token_bytes", tokens)})
        hit = _wait(lambda: sched.check_lookup_result("req-1"), args.timeout)
        out["lookup_hit_tokens"] = hit

        before = {k: v[:, :32].clone() for k, v in kv.items()}
        load = op(**tok, block_ids=blocks(range(32, 64)), start=0, end=512)
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
