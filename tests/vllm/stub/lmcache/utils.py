"""Stand-ins for LMCache 0.5.6's KV cache event classes (their field names and order)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


@dataclass
class CacheStoreEvent:
    block_hashes: list[int | bytes]
    parent_block_hash: Optional[int | bytes]  # noqa: UP045
    token_ids: list[int]
    block_size: int
    lora_id: Optional[int]  # noqa: UP045
    medium: Optional[str]  # noqa: UP045
    lora_name: Optional[str]  # noqa: UP045


@dataclass
class CacheRemoveEvent:
    block_hashes: list[int | bytes]
    medium: Optional[str]  # noqa: UP045
