"""A stand-in for vLLM's in-tree ``LMCacheMPConnector`` module: it reads its server keys the
way the real one does (``get_from_extra_config`` with a literal key and default) and records
what it read. Written for these tests: no vLLM code."""

from __future__ import annotations

from typing import Any


class LMCacheMPConnector:
    def __init__(self, vllm_config: Any, role: Any, kv_cache_config: Any = None) -> None:
        cfg = vllm_config.kv_transfer_config
        host = cfg.get_from_extra_config("lmcache.mp.host", "tcp://localhost")
        port = cfg.get_from_extra_config("lmcache.mp.port", 5555)
        self.mq_timeout = float(cfg.get_from_extra_config("lmcache.mp.mq_timeout", 300.0))
        self.server_url = f"{host}:{port}"
