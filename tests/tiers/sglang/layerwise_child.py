"""One LMCache release's in-process SGLang round trip on CPU, in a child process whose
``PYTHONPATH`` puts that release (a ``--target`` dir) first.

    python -m tests.tiers.sglang.layerwise_child MODE

``MODE``:

* ``adapter``: through :class:`lmcache_compat.sglang.SGLangLayerwiseAdapter` built from the
  arguments sglang passes (``create(sgl_config=, tp_size=, rank=, k_pool=, v_pool=,
  tp_group=<sglang's GroupCoordinator stand-in>, config_file=)``), the metadata from
  :class:`~lmcache_compat.sglang.metadata.MetadataBuilder`;
* ``sglang-<run>``: LMCache's own ``LMCacheLayerwiseConnector`` called with exactly the keywords
  the sglang run's ``LMCRadixCache`` passes (read from the shipped sglang grid), then the same
  round trip: what sglang itself would get.

Both: store 64 tokens from slots [0, 64), then ``start_load_kv`` into other slots and
``load_kv_layerwise`` per layer (how sglang's ``LayerTransferCounter`` drives it), compare K and
V of every layer. Prints ``RESULT: {json}``.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
import traceback
from typing import Any

TOKENS, CHUNK, LAYERS, HEADS, DIM = 64, 16, 4, 2, 8


class StandInModelConfig:
    """What LMCache's SGLang adapter reads of sglang's ``ModelConfig``."""

    def __init__(self, dtype: Any) -> None:
        self.model_path = "stand-in/tiny-llama"
        self.num_hidden_layers = LAYERS
        self.head_dim = DIM
        self.attention_arch = "MHA"
        self.dtype = dtype

    def get_num_kv_heads(self, tp_size: int) -> int:
        return max(1, HEADS // tp_size)


class GroupCoordinatorStandIn:
    """What sglang 0.5.2 ... 0.5.5 hand over as ``tp_group``: a coordinator object whose torch
    group is ``device_group`` (one rank: ``None`` stands for the default group)."""

    device_group = None


def _config(tmp: str) -> str:
    path = os.path.join(tmp, "lmcache.yaml")
    with open(path, "w") as f:
        f.write(
            f"chunk_size: {CHUNK}\nlocal_cpu: true\nmax_local_cpu_size: 0.25\n"
            "use_layerwise: true\nsave_unfull_chunk: false\n"
        )
    return path


def main(mode: str) -> dict[str, Any]:
    out: dict[str, Any] = {"mode": mode, "steps": []}
    t0 = time.monotonic()
    try:
        import importlib.metadata as md

        import torch

        out["lmcache"] = md.version("lmcache")
        tmp = tempfile.mkdtemp(prefix="lmc-sgl-")
        config = _config(tmp)
        dtype = torch.float16
        k_pool = [torch.zeros(2 * TOKENS + CHUNK, HEADS, DIM, dtype=dtype) for _ in range(LAYERS)]
        v_pool = [torch.zeros(2 * TOKENS + CHUNK, HEADS, DIM, dtype=dtype) for _ in range(LAYERS)]
        torch.manual_seed(0)
        for t in k_pool + v_pool:
            t[:TOKENS].copy_(torch.randn(TOKENS, HEADS, DIM).to(dtype))
        values: dict[str, Any] = {
            "sgl_config": StandInModelConfig(dtype),
            "tp_size": 1,
            "rank": 0,
            "k_pool": k_pool,
            "v_pool": v_pool,
            "tp_group": GroupCoordinatorStandIn(),
            "config_file": config,
        }
        from lmcache_compat.sglang import MetadataBuilder, SGLangLayerwiseAdapter

        if mode == "adapter":
            connector: Any = SGLangLayerwiseAdapter.create(**values)
            builder = connector.metadata
            out["dropped"] = sorted(builder.dropped)
            store = builder.store
            load = builder.load
        elif mode == "legacy":
            # sglang <= 0.5.12 through lmcache_compat.sglang.legacy: its import line, its
            # keywords (no config_file: the file comes from LMCACHE_CONFIG_FILE)
            from lmcache_compat.sglang.legacy import install

            install()
            from lmcache.integration.sglang.sglang_adapter import (
                LMCacheLayerwiseConnector,
                LoadMetadata,
                StoreMetadata,
            )

            os.environ["LMCACHE_CONFIG_FILE"] = config
            names = json.loads(os.environ["SGLANG_CALL_KEYWORDS"])
            connector = LMCacheLayerwiseConnector(**{k: values[k] for k in names})
            out["connector"] = type(connector).__name__

            def store(*args: Any) -> Any:
                names = ("last_node", "token_ids", "kv_indices", "offset")
                return StoreMetadata(**dict(zip(names, args, strict=True)))

            def load(*args: Any) -> Any:
                names = ("token_ids", "slot_mapping", "offset")
                return LoadMetadata(**dict(zip(names, args, strict=True)))
        else:
            from lmcache_compat.sglang.known.issues import passes_torch_group
            from lmcache_compat.sglang.upstream import find_sglang
            from lmcache_compat.upstream import locations as loc

            keywords: dict[str, str] = json.loads(os.environ["SGLANG_CALL_KEYWORDS"])
            source = keywords.get("tp_group", "None")
            values["tp_group"] = None if passes_torch_group(source) else values["tp_group"]
            cls = find_sglang(loc.SGLANG_LAYERWISE)
            # sglang's own keywords; an LMCache that reads only the environment gets the file so
            os.environ["LMCACHE_CONFIG_FILE"] = config
            connector = cls(**{k: values[k] for k in keywords})
            builder = MetadataBuilder()
            store = builder.store_cls
            load = builder.load_cls
        out["steps"].append("built")
        token_ids = list(range(1000, 1000 + TOKENS))
        connector.store_kv(store(None, token_ids, torch.arange(TOKENS, dtype=torch.int64), 0))
        out["steps"].append("store_kv")
        slots = torch.arange(TOKENS + CHUNK, 2 * TOKENS + CHUNK, dtype=torch.int64)
        loaded = int(connector.start_load_kv(load(token_ids, slots, 0)))
        for layer in range(LAYERS):
            connector.load_kv_layerwise(layer)
        out["steps"].append("start_load_kv + load_kv_layerwise")
        same = [
            torch.equal(pool[i][slots], pool[i][:TOKENS])
            for i in range(LAYERS)
            for pool in (k_pool, v_pool)
        ]
        out["loaded"] = loaded
        out["identical"] = all(same) and loaded == TOKENS
        connector.close()
    except BaseException as exc:
        out["error"] = f"{type(exc).__name__}: {exc}".splitlines()[0][:400]
        out["traceback"] = traceback.format_exc().strip().splitlines()[-6:]
        out["identical"] = False
    out["seconds"] = round(time.monotonic() - t0, 2)
    return out


def run(arg: str) -> dict[str, Any]:
    """What the sglang driver calls in a forked child (the command line's argument)."""
    return main(arg)


if __name__ == "__main__":
    result = main(sys.argv[1])
    print("RESULT: " + json.dumps(result), flush=True)
    os._exit(0)
