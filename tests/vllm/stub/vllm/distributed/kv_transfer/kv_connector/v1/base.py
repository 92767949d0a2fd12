"""A stand-in for vLLM 0.33.0's ``KVConnectorBase_V1`` (tests/tiers/real proves its surface
equals the real class's for the methods it defines). Written for these tests: no vLLM code."""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import Iterable
from typing import Any


class KVConnectorRole(enum.Enum):
    SCHEDULER = 0
    WORKER = 1


class KVConnectorMetadata:
    pass


class KVConnectorBase_V1(ABC):  # noqa: N801 - vLLM's name
    def __init__(self, vllm_config: Any, role: KVConnectorRole, kv_cache_config: Any) -> None:
        self._connector_metadata: KVConnectorMetadata | None = None
        self._vllm_config = vllm_config
        self._role = role
        self.bound: list[Any] = []

    @property
    def role(self) -> KVConnectorRole:
        return self._role

    @classmethod
    def supports_sleep_mode(cls, kv_transfer_config: Any) -> bool:
        return False

    def bind_connector_metadata(self, connector_metadata: KVConnectorMetadata) -> None:
        self._connector_metadata = connector_metadata
        self.bound.append(connector_metadata)

    def clear_connector_metadata(self) -> None:
        self._connector_metadata = None

    def register_kv_caches(self, kv_caches: dict[str, Any]) -> None:
        return None

    def unregister_kv_caches(self) -> None:
        return None

    def restore_kv_caches(self) -> None:
        return None

    def handle_preemptions(self, kv_connector_metadata: KVConnectorMetadata) -> None:
        return None

    @abstractmethod
    def start_load_kv(self, forward_context: Any, **kwargs: Any) -> None: ...

    @abstractmethod
    def wait_for_layer_load(self, layer_name: str) -> None: ...

    @abstractmethod
    def save_kv_layer(
        self, layer_name: str, kv_layer: Any, attn_metadata: Any, **kwargs: Any
    ) -> None: ...

    @abstractmethod
    def wait_for_save(self) -> None: ...

    def get_finished(self, finished_req_ids: set[str]) -> tuple[set[str] | None, set[str] | None]:
        return None, None

    def get_block_ids_with_load_errors(self) -> set[int]:
        return set()

    def shutdown(self) -> None:
        return None

    def get_kv_connector_kv_cache_events(self) -> Any:
        return None

    @abstractmethod
    def get_num_new_matched_tokens(
        self, request: Any, num_computed_tokens: int
    ) -> tuple[int | None, bool]: ...

    @abstractmethod
    def update_state_after_alloc(
        self, request: Any, blocks: Any, num_external_tokens: int
    ) -> None: ...

    @abstractmethod
    def build_connector_meta(self, scheduler_output: Any) -> KVConnectorMetadata: ...

    def update_connector_output(self, connector_output: Any) -> None:
        return None

    def request_finished(
        self, request: Any, block_ids: list[int]
    ) -> tuple[bool, dict[str, Any] | None]:
        return False, None

    def take_events(self) -> Iterable[Any]:
        return ()

    @classmethod
    def requires_piecewise_for_cudagraph(cls, extra_config: dict[str, Any]) -> bool:
        return False

    def reset_cache(self) -> bool | None:
        return None
