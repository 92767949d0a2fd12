"""Fake ``LMCacheConnectorV1Impl`` classes, one per historical shape.

Each fake's public methods, parameter names and return annotations mirror the real release's
``lmcache/integration/vllm/vllm_v1_adapter.py`` (read with ``ast`` from the PyPI artifacts);
``tests/upstream/test_matrix.py::test_handwritten_fakes_mirror_the_real_releases`` proves that
against the shipped release matrix, and the ``releases`` tox tier proves the matrix against the
real releases. Behaviour is reduced to what the adapter observes: calls are recorded, failed
blocks are recorded and drained as the real ``record_failed_blocks``/
``get_block_ids_with_load_errors`` do (0.3.9.post1 on), without torch.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Optional

from lmcache_compat.core.catalog import owned_by
from lmcache_compat.core.roles import CONNECTOR


class _Base:
    """Shared bookkeeping; not part of any release's surface (names start with ``_``)."""

    def _setup(self) -> None:
        self._calls: list[tuple[str, tuple[Any, ...]]] = []
        self._invalid_block_ids: set[int] = set()
        self._events: list[Any] = []
        self._block_size = 16

    def _record(self, name: str, *args: Any) -> None:
        self._calls.append((name, args))


class Fake_0_3_0(_Base):
    """LMCache 0.3.0: the seven core methods only."""

    def __init__(self, vllm_config: Any = None, role: Any = None, parent: Any = None) -> None:
        self._setup()

    def start_load_kv(self, forward_context: Any, **kwargs: Any) -> None:
        self._record("start_load_kv", forward_context)

    def wait_for_layer_load(self, layer_name: str) -> None:
        self._record("wait_for_layer_load", layer_name)

    def save_kv_layer(
        self, layer_name: str, kv_layer: Any, attn_metadata: Any, **kwargs: Any
    ) -> None:
        self._record("save_kv_layer", layer_name)

    def wait_for_save(self):  # type: ignore[no-untyped-def]  # unannotated, as in the release
        self._record("wait_for_save")

    def get_num_new_matched_tokens(self, request: Any, num_computed_tokens: int) -> int:
        self._record("get_num_new_matched_tokens", request, num_computed_tokens)
        return 0

    def update_state_after_alloc(self, request: Any, num_external_tokens: int):  # type: ignore[no-untyped-def]
        self._record("update_state_after_alloc", request, num_external_tokens)

    def build_connector_meta(self, scheduler_output: Any) -> Any:
        self._record("build_connector_meta", scheduler_output)
        return {"meta": scheduler_output}


class Fake_0_3_1(Fake_0_3_0):
    """LMCache 0.3.1: ``get_finished`` and ``request_finished``."""

    def get_finished(
        self, finished_req_ids: set[str]
    ) -> tuple[Optional[set[str]], Optional[set[str]]]:
        self._record("get_finished", finished_req_ids)
        return None, None

    def request_finished(
        self, request: Any, block_ids: list[int]
    ) -> tuple[bool, Optional[dict[str, Any]]]:
        self._record("request_finished", request, block_ids)
        return False, None


class Fake_0_3_6(Fake_0_3_1):
    """LMCache 0.3.6: ``get_num_new_matched_tokens`` may return None (async lookup)."""

    def get_num_new_matched_tokens(  # type: ignore[override]  # 0.3.6: int -> Optional[int]
        self, request: Any, num_computed_tokens: int
    ) -> Optional[int]:
        self._record("get_num_new_matched_tokens", request, num_computed_tokens)
        return None


class Fake_0_3_9(Fake_0_3_6):
    """LMCache 0.3.7-0.3.9: inference info."""

    def get_inference_info(self) -> dict:  # type: ignore[type-arg]
        return {"lmcache_version": "fake"}

    def get_inference_version(self) -> str:
        return "fake"


class Fake_0_3_9_post1(Fake_0_3_9):
    """LMCache 0.3.9.post1: failed-load block ids are recorded and reported (drained)."""

    def record_failed_blocks(
        self,
        request_id: str,
        expected_mask: list[bool],
        ret_mask: list[bool],
        slot_mapping: list[int],
    ) -> set[int]:
        missing = {
            slot_mapping[i] // self._block_size
            for i, (want, got) in enumerate(zip(expected_mask, ret_mask, strict=True))
            if want and not got
        }
        self._invalid_block_ids.update(missing)
        return missing

    def get_block_ids_with_load_errors(self) -> set[int]:
        invalid = self._invalid_block_ids.copy()
        self._invalid_block_ids.clear()
        return invalid


class Fake_0_3_10(Fake_0_3_9_post1):
    """LMCache 0.3.10: ``shutdown``."""

    def shutdown(self):  # type: ignore[no-untyped-def]
        self._record("shutdown")


class Fake_0_3_10_post2(Fake_0_3_10):
    """LMCache 0.3.10.post2: ``get_kv_events``."""

    def get_kv_events(self) -> Iterable[Any]:
        events, self._events = self._events, []
        return events


class Fake_0_3_12(Fake_0_3_10_post2):
    """LMCache 0.3.12: ``register_kv_caches``."""

    def register_kv_caches(self, kv_caches: dict[str, Any]):  # type: ignore[no-untyped-def]
        self._record("register_kv_caches", kv_caches)


class Fake_0_3_13(Fake_0_3_12):
    """LMCache 0.3.13: properties a probe must never evaluate."""

    @property
    def lmcache_engine(self) -> Any:
        raise AssertionError("probe evaluated the lmcache_engine property")

    @property
    def lmcache_engine_metadata(self):  # type: ignore[no-untyped-def]
        raise AssertionError("probe evaluated the lmcache_engine_metadata property")

    @property
    def lookup_client(self) -> Any:
        raise AssertionError("probe evaluated the lookup_client property")

    @property
    def lookup_server(self):  # type: ignore[no-untyped-def]
        raise AssertionError("probe evaluated the lookup_server property")


class Fake_0_5_6(Fake_0_3_13):
    """LMCache 0.5.6 (newest on PyPI): same engine surface as 0.3.13."""


#: release -> fake class; every shape the issue lists.
FAKES: dict[str, type[_Base]] = {
    "0.3.0": Fake_0_3_0,
    "0.3.1": Fake_0_3_1,
    "0.3.6": Fake_0_3_6,
    "0.3.9": Fake_0_3_9,
    "0.3.9.post1": Fake_0_3_9_post1,
    "0.3.10": Fake_0_3_10,
    "0.3.10.post2": Fake_0_3_10_post2,
    "0.3.12": Fake_0_3_12,
    "0.3.13": Fake_0_3_13,
    "0.5.6": Fake_0_5_6,
}

#: The capabilities an ``LMCacheConnectorV1Impl`` can have (the catalog also has MP/engine ones).
CONNECTOR_CAPS = frozenset(owned_by(CONNECTOR))


def connector_view(capabilities: dict[str, bool]) -> dict[str, bool]:
    """A matrix row's capabilities restricted to the connector engine's rows."""
    return {c.value: capabilities[c.value] for c in owned_by(CONNECTOR)}
