"""Adapter overhead, as ratios against direct calls measured in the same run.

    python benchmarks/bench_adapter.py [--number N] [--repeat R]

Each row times the same work two ways with ``timeit`` (best of R repeats of N calls) and prints
the ratio with the issue's goal. Nothing here is a test: numbers vary by machine, ratios less so.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import timeit
from typing import Any

from lmcache_compat import ConnectorAdapter


class Engine:
    """An LMCache 0.3.9.post1-shaped engine whose methods do nothing (pure call overhead)."""

    def __init__(self) -> None:
        self._invalid: set[int] = set()

    def start_load_kv(self, forward_context: Any, **kwargs: Any) -> None: ...
    def wait_for_layer_load(self, layer_name: str) -> None: ...
    def save_kv_layer(
        self, layer_name: str, kv_layer: Any, attn_metadata: Any, **kwargs: Any
    ) -> None: ...
    def wait_for_save(self) -> None: ...
    def get_num_new_matched_tokens(self, request: Any, num_computed_tokens: int) -> int:
        return 0

    def update_state_after_alloc(self, request: Any, num_external_tokens: int) -> None: ...
    def build_connector_meta(self, scheduler_output: Any) -> Any: ...
    def get_finished(self, finished_req_ids: set[str]) -> tuple[None, None]:
        return None, None

    def request_finished(self, request: Any, block_ids: list[int]) -> tuple[bool, None]:
        return False, None

    def get_block_ids_with_load_errors(self) -> set[int]:
        invalid = self._invalid.copy()
        self._invalid.clear()
        return invalid


class OldEngine(Engine):
    """Shaped like 0.3.9: no get_block_ids_with_load_errors, no get_kv_events, no shutdown."""

    get_block_ids_with_load_errors = None  # type: ignore[assignment]


class VllmStyleConnector:
    """What vLLM's LMCacheConnectorV1 does today: a forwarding method per call."""

    def __init__(self, engine: Any) -> None:
        self._lmcache_engine = engine

    def wait_for_layer_load(self, layer_name: str) -> None:
        self._lmcache_engine.wait_for_layer_load(layer_name)

    def save_kv_layer(
        self, layer_name: str, kv_layer: Any, attn_metadata: Any, **kwargs: Any
    ) -> None:
        self._lmcache_engine.save_kv_layer(layer_name, kv_layer, attn_metadata, **kwargs)

    def get_block_ids_with_load_errors(self) -> set[int]:
        method = getattr(self._lmcache_engine, "get_block_ids_with_load_errors", None)
        if callable(method):
            return method()  # type: ignore[no-any-return]
        return set()


class Plain:
    """Plain attribute calls returning the same values as the adapter's fallbacks."""

    def get_kv_events(self) -> list[Any]:
        return []

    def shutdown(self) -> None:
        return None

    def get_block_ids_with_load_errors(self) -> set[int]:
        return set()


def best(stmt: str, env: dict[str, Any], number: int, repeat: int) -> float:
    return min(timeit.repeat(stmt, globals=env, number=number, repeat=repeat)) / number


def import_time_ms(samples: int = 7) -> float:
    """Median self-reported cumulative import time of lmcache_compat (python -X importtime)."""
    times = []
    for _ in range(samples):
        err = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", "import lmcache_compat"],
            capture_output=True,
            text=True,
            check=True,
        ).stderr
        for line in err.splitlines():
            parts = [p.strip() for p in line.split("|")]
            if len(parts) == 3 and parts[2] == "lmcache_compat":
                times.append(int(parts[1]) / 1000)
    return statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--number", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    n, r = args.number, args.repeat

    engine = Engine()
    old = OldEngine()
    env = {
        "engine": engine,
        "adapter": ConnectorAdapter(engine),
        "vllm": VllmStyleConnector(engine),
        "old_adapter": ConnectorAdapter(old),
        "old_vllm": VllmStyleConnector(old),
        "plain": Plain(),
        "kv": object(),
        "meta": object(),
    }
    rows = [
        (
            "wait_for_layer_load: adapter / engine bound method",
            "adapter.wait_for_layer_load('l')",
            "engine.wait_for_layer_load('l')",
            1.6,
        ),
        (
            "wait_for_layer_load: adapter / vLLM forwarding method",
            "adapter.wait_for_layer_load('l')",
            "vllm.wait_for_layer_load('l')",
            1.0,
        ),
        (
            "save_kv_layer: adapter / engine bound method",
            "adapter.save_kv_layer('l', kv, meta)",
            "engine.save_kv_layer('l', kv, meta)",
            1.6,
        ),
        (
            "save_kv_layer: adapter / vLLM forwarding method",
            "adapter.save_kv_layer('l', kv, meta)",
            "vllm.save_kv_layer('l', kv, meta)",
            1.0,
        ),
        (
            "fallback get_kv_events() / plain method returning []",
            "old_adapter.get_kv_events()",
            "plain.get_kv_events()",
            1.2,
        ),
        (
            "fallback shutdown() / plain method returning None",
            "old_adapter.shutdown()",
            "plain.shutdown()",
            1.2,
        ),
        (
            "fallback get_block_ids_with_load_errors() / plain method returning set()",
            "old_adapter.get_block_ids_with_load_errors()",
            "plain.get_block_ids_with_load_errors()",
            1.2,
        ),
        (
            "get_block_ids_with_load_errors: adapter / vLLM getattr+callable (present)",
            "adapter.get_block_ids_with_load_errors()",
            "vllm.get_block_ids_with_load_errors()",
            1.15,
        ),
        (
            "get_block_ids_with_load_errors: adapter / vLLM getattr+callable (absent)",
            "old_adapter.get_block_ids_with_load_errors()",
            "old_vllm.get_block_ids_with_load_errors()",
            1.15,
        ),
    ]
    print(f"Python {sys.version.split()[0]}; best of {r} x {n:,} calls each\n")
    print(f"{'measurement':<74} {'ours ns':>8} {'base ns':>8} {'ratio':>6} {'goal':>6}")
    missed = 0
    for label, ours, base, goal in rows:
        # interleave to share machine noise
        t_base = best(base, env, n, r)
        t_ours = best(ours, env, n, r)
        t_base = min(t_base, best(base, env, n, r))
        ratio = t_ours / t_base
        ok = ratio <= goal
        missed += not ok
        print(
            f"{label:<74} {t_ours * 1e9:8.1f} {t_base * 1e9:8.1f} {ratio:6.2f} "
            f"{'<=' + str(goal):>6} {'ok' if ok else 'MISSED'}"
        )
    ms = import_time_ms()
    print(
        f"\nimport lmcache_compat (median cumulative, -X importtime): {ms:.1f} ms (goal < 30 ms) "
        f"{'ok' if ms < 30 else 'MISSED'}"
    )
    return 1 if missed or ms >= 30 else 0


if __name__ == "__main__":
    sys.exit(main())
