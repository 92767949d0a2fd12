"""The worker's submits on a release that made their leading parameters keyword-only (the
mutation tier's "worker: submit arguments keyword-only" over the real class): passed by name,
decided at construction; releases whose order is certain keep the positional call (the
mp-servers and grid tiers prove those against the real releases)."""

from __future__ import annotations

from typing import Any, ClassVar

from lmcache_compat import MPWorkerAdapter
from lmcache_compat.upstream.matrix import load_matrix
from tools.generated_fakes import fake_module, instantiate

NEWEST = load_matrix().newest


Call = tuple[str, tuple[Any, ...], dict[str, Any]]


def _worker_class() -> Any:
    base = fake_module(NEWEST).LMCacheMPWorkerAdapter

    class KeywordOnly(base):  # type: ignore[misc, valid-type]
        recorded: ClassVar[list[Call]] = []  # not `calls`: the fakes keep their own

        def submit_store_request(
            self,
            request_id: str,
            *,
            op: Any,
            event: Any,
            cache_salt: str = "",
            request_configs: dict[str, Any] | None = None,
        ) -> None:
            self.recorded.append(("single", (request_id,), {"op": op, "event": event}))

        def batched_submit_store_requests(
            self,
            request_ids: list[str],
            *,
            ops: list[Any],
            event: Any,
            cache_salts: list[str] | None = None,
            request_configs_list: list[dict[str, Any] | None] | None = None,
        ) -> None:
            self.recorded.append(("batched", (request_ids,), {"ops": ops, "salts": cache_salts}))

    return KeywordOnly


def test_keyword_only_submits_are_passed_by_name() -> None:
    cls = _worker_class()
    target = instantiate(cls)
    adapter = MPWorkerAdapter(target)
    adapter.submit_store_request("r", "op", "ev", cache_salt="s")
    adapter.batched_submit_store_requests(["r"], ["op"], "ev", cache_salts=["s"])
    assert cls.recorded == [
        ("single", ("r",), {"op": "op", "event": "ev"}),
        ("batched", (["r"],), {"ops": ["op"], "salts": ["s"]}),
    ]


def test_a_release_with_the_documented_order_still_gets_each_value() -> None:
    target = instantiate(fake_module(NEWEST).LMCacheMPWorkerAdapter)
    MPWorkerAdapter(target).submit_store_request("r", "op", "ev", cache_salt="s")
    name, _, passed = target._call_args[-1]
    assert name == "submit_store_request"
    assert {k: passed[k] for k in ("request_id", "op", "event", "cache_salt")} == {
        "request_id": "r",
        "op": "op",
        "event": "ev",
        "cache_salt": "s",
    }
