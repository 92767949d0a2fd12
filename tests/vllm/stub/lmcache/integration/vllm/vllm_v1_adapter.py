"""A stand-in for LMCache 0.5.6's ``LMCacheConnectorV1Impl``: exactly its public surface
(tests/vllm/test_connector.py checks it against the shipped matrix row, which the releases tier
checks against the real wheel), with behaviour reduced to what the connector observes: calls
recorded, failed blocks drained, events handed out once. Written for these tests."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from lmcache.utils import CacheStoreEvent

if TYPE_CHECKING:
    from collections.abc import Iterable

#: Every impl built, for the tests to inspect.
BUILT: list[LMCacheConnectorV1Impl] = []


class LMCacheConnectorV1Impl:
    def __init__(
        self, vllm_config: "VllmConfig", role: KVConnectorRole, parent: KVConnectorBase_V1
    ):  # type: ignore[name-defined] # noqa: F821, UP037, E501
        self.vllm_config = vllm_config
        self.role = role
        self.parent = parent
        self.calls: list[tuple[str, tuple[Any, ...]]] = []
        self.failed: set[int] = set()
        self.events: list[Any] = []
        self.kv_caches: dict[str, Any] = {}
        BUILT.append(self)

    def _call(self, name: str, *args: Any) -> None:
        self.calls.append((name, args))

    @property
    def lmcache_engine(self) -> Any:
        raise AssertionError("a property must never be evaluated by lmcache-compat")

    @property
    def lmcache_engine_metadata(self) -> Any:
        raise AssertionError("a property must never be evaluated by lmcache-compat")

    @property
    def lookup_client(self) -> Any:
        raise AssertionError("a property must never be evaluated by lmcache-compat")

    @property
    def lookup_server(self) -> Any:
        raise AssertionError("a property must never be evaluated by lmcache-compat")

    def get_inference_info(self) -> dict:  # type: ignore[type-arg]
        return {"version": "0.5.6"}

    def get_inference_version(self) -> str:
        return "0.5.6"

    def start_load_kv(self, forward_context: "ForwardContext", **kwargs) -> None:  # type: ignore[name-defined, no-untyped-def] # noqa: F821, UP037
        self._call("start_load_kv", forward_context)

    def wait_for_layer_load(self, layer_name: str) -> None:
        self._call("wait_for_layer_load", layer_name)

    def save_kv_layer(
        self, layer_name: str, kv_layer: torch.Tensor, attn_metadata: "AttentionMetadata", **kwargs
    ) -> None:  # type: ignore[name-defined, no-untyped-def] # noqa: F821, UP037, E501
        self._call("save_kv_layer", layer_name)

    def wait_for_save(self):  # type: ignore[no-untyped-def]
        self._call("wait_for_save")

    def get_finished(
        self, finished_req_ids: set[str]
    ) -> tuple[Optional[set[str]], Optional[set[str]]]:  # noqa: UP045, E501
        self._call("get_finished", finished_req_ids)
        return None, None

    def get_block_ids_with_load_errors(self) -> set[int]:
        failed, self.failed = self.failed, set()
        return failed

    def record_failed_blocks(
        self,
        request_id: str,
        expected_mask: torch.Tensor,
        ret_mask: torch.Tensor,
        slot_mapping: torch.Tensor,
    ) -> set[int]:  # type: ignore[name-defined] # noqa: F821, E501
        return set()

    def get_num_new_matched_tokens(
        self, request: "Request", num_computed_tokens: int
    ) -> Optional[int]:  # type: ignore[name-defined] # noqa: F821, UP037, UP045, E501
        self._call("get_num_new_matched_tokens", request, num_computed_tokens)
        return None if request == "pending" else 16

    def update_state_after_alloc(self, request: "Request", num_external_tokens: int):  # type: ignore[name-defined, no-untyped-def] # noqa: F821, UP037
        self._call("update_state_after_alloc", request, num_external_tokens)

    def build_connector_meta(self, scheduler_output: SchedulerOutput) -> KVConnectorMetadata:  # type: ignore[name-defined] # noqa: F821
        self._call("build_connector_meta", scheduler_output)
        return {"meta": scheduler_output}

    def request_finished(
        self, request: "Request", block_ids: list[int]
    ) -> tuple[bool, Optional[dict[str, Any]]]:  # type: ignore[name-defined] # noqa: F821, UP037, UP045, E501
        self._call("request_finished", request, block_ids)
        return False, None

    def register_kv_caches(self, kv_caches: dict[str, torch.Tensor]):  # type: ignore[name-defined, no-untyped-def] # noqa: F821
        self.kv_caches.update(kv_caches)

    def get_kv_events(self) -> Iterable[CacheStoreEvent]:
        events, self.events = self.events, []
        return events

    def shutdown(self):  # type: ignore[no-untyped-def]
        self._call("shutdown")
