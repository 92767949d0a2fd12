"""Stand-ins for vLLM 0.33.0's KV event classes (field names, order and required-ness equal the
real msgspec Structs: tests/tiers/real proves it). Written for these tests: no vLLM code."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import Counter
from dataclasses import dataclass
from typing import Any

ExternalBlockHash = bytes | int


@dataclass(frozen=True)
class BlockStored:
    block_hashes: list[bytes | int]
    parent_block_hash: bytes | int | None
    token_ids: list[int]
    block_size: int
    lora_id: int | None
    medium: str | None
    lora_name: str | None
    extra_keys: list[tuple[Any, ...] | None] | None = None
    group_idx: int | None = None
    kv_cache_spec_kind: str | None = None
    kv_cache_spec_sliding_window: int | None = None
    locality: str | None = None
    ownership: str | None = None
    session_id: str | None = None
    lookahead_token_ids: list[list[int]] | None = None

    def __hash__(self) -> int:
        return hash((tuple(self.block_hashes), self.parent_block_hash, tuple(self.token_ids)))


@dataclass(frozen=True)
class BlockRemoved:
    block_hashes: list[bytes | int]
    medium: str | None
    group_idx: int | None = None
    locality: str | None = None
    ownership: str | None = None

    def __hash__(self) -> int:
        return hash(tuple(self.block_hashes))


class KVEventAggregator:
    """Counts events across workers; keeps those every worker reported."""

    def __init__(self, num_workers: int) -> None:
        self._counter: Counter[Any] = Counter()
        self._workers = num_workers

    def add_events(self, events: list[Any]) -> None:
        self._counter.update(events)

    def get_common_events(self) -> list[Any]:
        return [e for e, n in self._counter.items() if n == self._workers]


class KVConnectorKVEvents(ABC):
    @abstractmethod
    def add_events(self, events: list[Any]) -> None: ...

    @abstractmethod
    def aggregate(self) -> KVConnectorKVEvents: ...

    @abstractmethod
    def increment_workers(self, count: int = 1) -> None: ...

    @abstractmethod
    def get_all_events(self) -> list[Any]: ...

    @abstractmethod
    def get_number_of_workers(self) -> int: ...

    @abstractmethod
    def clear_events(self) -> None: ...
