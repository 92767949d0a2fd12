"""Per-step connector cost: ``LMCacheCompatConnector`` vs vLLM's in-tree ``LMCacheConnectorV1``,
both real classes of the installed vLLM, over the same stand-in LMCache engine, in one run.

    PYTHONPATH=. .tox/grid-vllm0.32.0/bin/python benchmarks/bench_connector.py \
        [--number N] [--repeat R]

A step is what vLLM calls on the connector for every engine step, outside the model:

* worker side (``KVConnectorModelRunnerMixin._get_kv_connector_output``): ``get_finished``,
  ``get_block_ids_with_load_errors``, ``get_kv_connector_kv_cache_events``;
* scheduler side (``Scheduler.update_from_output``): ``update_connector_output`` with that
  output, then ``take_events`` (drained into a list, as the scheduler does).

Scenarios: ``idle`` (the engine has no events: every step of a deployment without KV events)
and ``events`` (4 store events per step, converted to ``BlockStored`` and collected).

How the connectors are built (documented bypass): both with ``object.__new__`` and vLLM's real
``KVConnectorBase_V1.__init__`` over a ``VllmConfig`` from ``tools.vllm_config.make_vllm_config``; then
vLLM's connector gets the two fields its per-step methods read (``_lmcache_engine``,
``_kv_cache_events``) and ours its ``attach(engine)``, the very method its ``__init__`` ends
with. Only the LMCache impl's construction is skipped: the engine is ``Engine`` below, a plain
class with LMCache 0.5.6's ``LMCacheConnectorV1Impl`` method set whose methods do nothing.

Best of R repeats of N steps, ours and vLLM's interleaved; ratio = ours / vLLM's (goal: <= 1).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import sys
import tempfile
import timeit
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


@dataclasses.dataclass
class CacheStoreEvent:
    """Shaped like LMCache 0.5.6's ``lmcache.utils.CacheStoreEvent``."""

    block_hashes: list[int | bytes]
    parent_block_hash: int | bytes | None
    token_ids: list[int]
    block_size: int
    lora_id: int | None
    medium: str | None
    lora_name: str | None


class Engine:
    """LMCache 0.5.6's ``LMCacheConnectorV1Impl`` method set; every method does nothing (the
    KV-event getter returns ``events``, the same list object each call)."""

    def __init__(self, events: list[Any]) -> None:
        self.events = events

    def start_load_kv(self, forward_context: Any, **kwargs: Any) -> None: ...
    def wait_for_layer_load(self, layer_name: str) -> None: ...
    def save_kv_layer(
        self, layer_name: str, kv_layer: Any, attn_metadata: Any, **kwargs: Any
    ) -> None: ...
    def wait_for_save(self) -> None: ...
    def get_num_new_matched_tokens(self, request: Any, num_computed_tokens: int) -> int | None:
        return 0

    def update_state_after_alloc(self, request: Any, num_external_tokens: int) -> None: ...
    def build_connector_meta(self, scheduler_output: Any) -> Any: ...
    def get_finished(self, finished_req_ids: set[str]) -> tuple[None, None]:
        return None, None

    def request_finished(self, request: Any, block_ids: list[int]) -> tuple[bool, None]:
        return False, None

    def get_inference_info(self) -> dict[str, Any]:
        return {}

    def get_inference_version(self) -> str:
        return "0.32.0"

    def get_block_ids_with_load_errors(self) -> set[int]:
        return set()

    def shutdown(self) -> None: ...
    def get_kv_events(self) -> list[Any]:
        return self.events

    def register_kv_caches(self, kv_caches: dict[str, Any]) -> None: ...


def _events(n: int) -> list[CacheStoreEvent]:
    return [
        CacheStoreEvent(
            block_hashes=[(i + 1).to_bytes(8, "big")],
            parent_block_hash=i.to_bytes(8, "big") if i else None,
            token_ids=list(range(16 * i, 16 * i + 16)),
            block_size=16,
            lora_id=None,
            medium="cpu",
            lora_name=None,
        )
        for i in range(n)
    ]


def build(config: Any, engine: Engine) -> tuple[Any, Any]:
    """(ours, vLLM's) over ``engine``, without building an LMCache impl (see module doc)."""
    from vllm.distributed.kv_transfer.kv_connector.v1.base import (
        KVConnectorBase_V1,
        KVConnectorRole,
    )
    from vllm.distributed.kv_transfer.kv_connector.v1.lmcache_connector import (
        LMCacheConnectorV1,
    )

    from lmcache_compat.vllm import LMCacheCompatConnector

    role = KVConnectorRole.WORKER
    theirs = object.__new__(LMCacheConnectorV1)
    KVConnectorBase_V1.__init__(theirs, vllm_config=config, role=role, kv_cache_config=None)
    theirs._lmcache_engine = engine
    theirs._kv_cache_events = None
    ours = object.__new__(LMCacheCompatConnector)
    KVConnectorBase_V1.__init__(ours, vllm_config=config, role=role, kv_cache_config=None)
    ours.attach(engine)
    return ours, theirs


def step_function(connector: Any) -> Callable[[], None]:
    """One engine step's connector calls (see module doc), bound to ``connector``."""
    from vllm.v1.outputs import KVConnectorOutput

    output = KVConnectorOutput()
    finished: set[str] = set()
    get_finished = connector.get_finished
    load_errors = connector.get_block_ids_with_load_errors
    kv_events = connector.get_kv_connector_kv_cache_events
    update = connector.update_connector_output
    take = connector.take_events

    def step() -> None:
        get_finished(finished)
        load_errors()
        output.kv_cache_events = kv_events()
        update(output)
        list(take())

    return step


def check_same_events(ours: Any, theirs: Any) -> int:
    """Both connectors publish the same events for one step (sanity check)."""
    published = []
    for connector in (ours, theirs):
        step_events: list[Any] = []
        from vllm.v1.outputs import KVConnectorOutput

        output = KVConnectorOutput(kv_cache_events=connector.get_kv_connector_kv_cache_events())
        connector.update_connector_output(output)
        step_events.extend(connector.take_events())
        published.append(step_events)
    if published[0] != published[1]:
        raise SystemExit(f"connectors disagree: {published[0]!r} != {published[1]!r}")
    return len(published[0])


def measure(steps: dict[str, Callable[[], None]], number: int, repeat: int) -> dict[str, float]:
    """Best seconds per step for each callable, interleaving the repeats."""
    best = dict.fromkeys(steps, float("inf"))
    for _ in range(repeat):
        for name, fn in steps.items():
            best[name] = min(best[name], timeit.timeit(fn, number=number) / number)
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args(argv)

    tmp = Path(tempfile.mkdtemp(prefix="bench-connector-"))
    try:
        return run(args, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run(args: argparse.Namespace, tmp: Path) -> int:
    from tools.lmcache_targets import quiet_env

    os.environ.update(quiet_env(tmp))  # before vLLM is imported: caches stay in tmp
    import logging

    from tools.vllm_config import make_vllm_config

    config = make_vllm_config(tmp, "LMCacheCompatConnector", "lmcache_compat.vllm")
    logging.getLogger("vllm").setLevel(logging.ERROR)  # the base __init__'s warning, twice

    import vllm

    print(f"vLLM {vllm.__version__}, Python {sys.version.split()[0]}")
    print(
        f"best of {args.repeat} repeats (idle: {args.number} steps, events: "
        f"{max(args.number // 10, 1)} steps); ratio = ours / vLLM's (goal <= 1.00)"
    )
    print(f"{'scenario':<10} {'vLLM LMCacheConnectorV1':>24} {'LMCacheCompatConnector':>24} ratio")
    worst = 0.0
    for scenario, events in (("idle", []), ("events", _events(4))):
        engine = Engine(events)
        ours, theirs = build(config, engine)
        published = check_same_events(ours, theirs)
        if published != len(events):
            raise SystemExit(f"{scenario}: expected {len(events)} events, got {published}")
        best = measure(
            {"theirs": step_function(theirs), "ours": step_function(ours)},
            args.number if events == [] else max(args.number // 10, 1),
            args.repeat,
        )
        ratio = best["ours"] / best["theirs"]
        worst = max(worst, ratio)
        print(
            f"{scenario:<10} {best['theirs'] * 1e9:>21.0f} ns {best['ours'] * 1e9:>21.0f} ns "
            f"{ratio:5.2f}"
        )
    verdict = "ok" if worst <= 1.0 else "MISSED"
    print(f"worst ratio: {worst:.2f} (goal <= 1.00) {verdict}")
    return 0 if verdict == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
