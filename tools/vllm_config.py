"""A ``VllmConfig`` of the tiny Llama fixture on CPU with a KV connector, built with only the
keyword arguments the installed vLLM's constructors accept (vLLM 0.11.0 ... 0.33.0): what the
scheduler harness of the real tiers (``tests/tiers/real/scheduler/harness.py``) and the
connector benchmark share. Every vLLM import is inside a function: this module imports without
vLLM installed."""

from __future__ import annotations

import inspect
import json
import shutil
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tools.paths import TIERS

if TYPE_CHECKING:
    from vllm.config import VllmConfig

#: The tiny Llama fixture (``config.json`` only: the scheduler never loads weights).
FIXTURE_DIR = TIERS / "real" / "scheduler" / "tiny-llama"
BLOCK_SIZE = 16


def accepted_kwargs(target: Callable[..., Any], kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The items of ``kwargs`` that ``target``'s signature accepts (all if it takes ``**kw``)."""
    params = inspect.signature(target).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return dict(kwargs)
    return {k: v for k, v in kwargs.items() if k in params}


def prepare_model_dir(tmp_dir: Path) -> Path:
    """Copy the tiny-Llama ``config.json`` into ``tmp_dir/tiny-llama`` and return that folder."""
    model_dir = Path(tmp_dir) / "tiny-llama"
    model_dir.mkdir(parents=True, exist_ok=True)
    target = model_dir / "config.json"
    if not target.exists():
        shutil.copyfile(FIXTURE_DIR / "config.json", target)
    return model_dir


def model_num_layers(model_dir: Path) -> int:
    config: dict[str, Any] = json.loads((Path(model_dir) / "config.json").read_text())
    return int(config["num_hidden_layers"])


def tiny_model_config(tmp_dir: Path, max_model_len: int = 1024) -> Any:
    """vLLM's ``ModelConfig`` of the tiny model prepared under ``tmp_dir`` (only the keyword
    arguments this vLLM's ``ModelConfig`` accepts)."""
    from vllm.config import ModelConfig

    model_dir = prepare_model_dir(tmp_dir)
    return ModelConfig(
        **accepted_kwargs(
            ModelConfig,
            {
                "model": str(model_dir),
                "tokenizer": str(model_dir),
                "skip_tokenizer_init": True,
                "dtype": "float16",
                "seed": 0,
                "max_model_len": max_model_len,
            },
        )
    )


def make_vllm_config(
    tmp_dir: Path,
    connector_name: str,
    connector_module_path: str | None = None,
    kv_load_failure_policy: str | None = None,
    extra_config: Mapping[str, Any] | None = None,
    *,
    block_size: int = BLOCK_SIZE,
    max_num_seqs: int = 16,
    max_num_batched_tokens: int = 1024,
    max_model_len: int = 1024,
    engine_id: str | None = None,
) -> VllmConfig:
    """A ``VllmConfig`` for the tiny model on CPU with ``kv_role="kv_both"``.

    ``kv_load_failure_policy=None`` leaves the field out, so vLLM's own default applies (read it
    back from ``config.kv_transfer_config.kv_load_failure_policy``). ``extra_config`` becomes
    ``kv_connector_extra_config`` (LMCache reads its ``"lmcache.<key>"`` entries).

    ``engine_id`` defaults to a short random id, not vLLM's 36-character uuid: LMCache puts it
    in an IPC socket path under ``VLLM_RPC_BASE_PATH`` (the temp dir), and with a uuid a temp
    dir longer than ~29 characters exceeds the 107-byte ``sockaddr_un`` limit. LMCache 0.5.6
    shortens such paths itself; 0.4.x then runs its scheduler role in "degraded mode" (no
    lookup client, 0 hits) and 0.3.9.post1 raises ``ZMQError: File name too long``.
    """
    from vllm.config import (
        CacheConfig,
        DeviceConfig,
        KVTransferConfig,
        SchedulerConfig,
        VllmConfig,
    )

    model_config = tiny_model_config(tmp_dir, max_model_len)
    scheduler_config = SchedulerConfig(
        **accepted_kwargs(
            SchedulerConfig,
            {
                "max_num_seqs": max_num_seqs,
                "max_num_batched_tokens": max_num_batched_tokens,
                "max_model_len": max_model_len,
                "enable_chunked_prefill": True,
                "is_encoder_decoder": bool(getattr(model_config, "is_encoder_decoder", False)),
                # One batch in flight: the plain Scheduler, no deferred block frees.
                "async_scheduling": False,
            },
        )
    )
    cache_config = CacheConfig(
        **accepted_kwargs(
            CacheConfig,
            {
                "block_size": block_size,
                "gpu_memory_utilization": 0.9,
                "enable_prefix_caching": True,
            },
        )
    )
    transfer: dict[str, Any] = {
        "kv_connector": connector_name,
        "kv_connector_module_path": connector_module_path,
        "kv_role": "kv_both",
        "kv_connector_extra_config": dict(extra_config or {}),
        "engine_id": engine_id or f"e{uuid.uuid4().hex[:8]}",
    }
    if kv_load_failure_policy is not None:
        if "kv_load_failure_policy" not in inspect.signature(KVTransferConfig).parameters:
            raise TypeError("this vLLM's KVTransferConfig has no kv_load_failure_policy")
        transfer["kv_load_failure_policy"] = kv_load_failure_policy
    kv_transfer_config = KVTransferConfig(**accepted_kwargs(KVTransferConfig, transfer))
    return VllmConfig(
        **accepted_kwargs(
            VllmConfig,
            {
                "model_config": model_config,
                "scheduler_config": scheduler_config,
                "cache_config": cache_config,
                "device_config": DeviceConfig("cpu"),
                "kv_transfer_config": kv_transfer_config,
            },
        )
    )
