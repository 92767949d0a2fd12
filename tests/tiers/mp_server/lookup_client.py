"""A real lookup round trip with a release's own ``LMCacheMPSchedulerAdapter``.

Run it with the Python of a venv that has an LMCache release installed (it imports LMCache; the
test process that starts the server does not)::

    PYTHONPATH=. /tmp/lmcache-compat-mp-venvs/0.5.6/bin/python
    tests/tiers/mp_server/lookup_client.py tcp://127.0.0.1:PORT

It finds the release's class and builds it from the constructor parameters its ``__init__``
has (:mod:`tests.tiers.mp_server.release_side`, hence the repository root on ``PYTHONPATH``),
submits
``maybe_submit_lookup_request`` with what its lookup takes (``block_hashes`` in 0.3.13,
``token_ids`` 0.3.14 ... 0.5.6, ``packed_token_ids`` from ``token_codec.pack_token_ids`` in
0.5.7rc2), polls ``check_lookup_result`` until it is not None (bounded), and prints one JSON
object: what came back, or the exception.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import importlib.metadata
import inspect
import json
import sys
import time
import traceback
from typing import Any

from tests.tiers.mp_server.release_side import (
    own_init_kwargs,
    pack_token_ids,
    scheduler_class,
)


def lookup_args(adapter: Any, tokens: list[int], block_size: int) -> tuple[str, Any]:
    params = inspect.signature(adapter.maybe_submit_lookup_request).parameters
    if "packed_token_ids" in params:
        return "packed_token_ids", pack_token_ids()(tokens)
    if "token_ids" in params:
        return "token_ids", tokens
    if "block_hashes" in params:
        n = len(tokens) // block_size
        return "block_hashes", [
            hashlib.sha256(str(tokens[: (i + 1) * block_size]).encode()).digest() for i in range(n)
        ]
    raise TypeError(f"unknown lookup signature {list(params)}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("--tokens", type=int, default=1024)
    ap.add_argument("--block-size", type=int, default=16)
    ap.add_argument("--timeout", type=float, default=30.0)
    ap.add_argument("--mq-timeout", type=float, default=10.0)
    args = ap.parse_args()

    out: dict[str, Any] = {"client_version": importlib.metadata.version("lmcache"), "ok": False}
    t0 = time.monotonic()
    adapter: Any = None
    ctx: Any = None
    try:
        zmq = importlib.import_module("zmq")
        cls = scheduler_class()
        out["import_s"] = round(time.monotonic() - t0, 2)
        ctx = zmq.Context()
        kwargs = own_init_kwargs(
            cls, args.url, ctx, block_size=args.block_size, mq_timeout=args.mq_timeout
        )
        out["init_kwargs"] = sorted(kwargs)
        t1 = time.monotonic()
        adapter = cls(**kwargs)
        out["init_s"] = round(time.monotonic() - t1, 3)
        for attr in ("lmcache_tokens_per_chunk", "chunk_size"):
            if hasattr(adapter, attr):
                out["server_chunk_size"] = getattr(adapter, attr)
                break
        tokens = list(range(1, args.tokens + 1))
        name, value = lookup_args(adapter, tokens, args.block_size)
        out["lookup_arg"] = name
        t2 = time.monotonic()
        submitted = adapter.maybe_submit_lookup_request("req-0", **{name: value})
        out["submit_returned"] = submitted
        result = None
        polls = 0
        while time.monotonic() - t2 < args.timeout:
            polls += 1
            result = adapter.check_lookup_result("req-0")
            if result is not None:
                break
            time.sleep(0.02)
        out.update(
            lookup_result=result,
            polls=polls,
            lookup_s=round(time.monotonic() - t2, 3),
            ok=result is not None,
        )
        if hasattr(adapter, "is_healthy"):
            out["is_healthy"] = bool(adapter.is_healthy)
    except BaseException as exc:  # report, do not hide
        out["error"] = f"{type(exc).__name__}: {exc}"
        out["traceback"] = traceback.format_exc().splitlines()[-6:]
    finally:
        for name in ("shutdown", "close"):
            fn = getattr(adapter, name, None)
            if callable(fn):
                try:
                    fn()
                except Exception as exc:
                    out[f"{name}_error"] = f"{type(exc).__name__}: {exc}"
                break
        if ctx is not None:
            ctx.destroy(linger=0)
    out["total_s"] = round(time.monotonic() - t0, 2)
    print(json.dumps(out))
    sys.stdout.flush()
    return 0 if out["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
