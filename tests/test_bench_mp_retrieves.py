"""benchmarks/bench_mp_retrieves.py: its verdict counts both paths, it imports nothing from
tests/, and the release's worker it times is built from the release's own initial state
(tools/mp_worker_shell.py)."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

from tools.mp_worker_shell import FutureTransfer, initial_state

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "benchmarks" / "bench_mp_retrieves.py"


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_mp_retrieves", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _row(at_submit: float, later: float) -> dict[str, Any]:
    return {"at_submit": {"ratio": at_submit}, "later": {"ratio": later}}


def test_the_verdict_counts_the_later_path() -> None:
    bench = _bench()
    rows = {"0.5.4": {"1": _row(1.0, 1.0), "1024": _row(1.02, 1.5)}, "0.5.6": {"1": _row(0.9, 1)}}
    assert bench.worst_ratio(rows) == 1.5
    assert bench.worst_ratio({"0.5.6": {"64": _row(1.3, 0.9)}}) == 1.3
    assert bench.PATHS == ("at_submit", "later") and bench.SIZES == (1, 64, 1024)
    assert bench.LIMIT == 1.1


def test_the_benchmark_and_its_helper_import_nothing_from_tests() -> None:
    for path in (BENCH, ROOT / "tools" / "mp_worker_shell.py", ROOT / "tools" / "uv_install.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            assert not any(n == "tests" or n.startswith("tests.") for n in names), path


class _Release:
    def __init__(self, server: Any) -> None:
        self.futures: dict[str, Any] = {}
        self.errors: set[int] = set()
        self.done: list[str] = []
        self.flag = False
        self.dispatcher: Any = None
        self.chunk = server.ask()  # learned from the server: not initial state
        if server:
            self.mode = None
        else:
            self.mode = "x"


def test_the_shell_takes_the_releases_initial_state() -> None:
    state = initial_state(_Release)
    assert sorted(state) == ["dispatcher", "done", "errors", "flag", "futures", "mode"]
    assert state["futures"]() == {} and state["errors"]() == set() and state["done"]() == []
    assert state["flag"]() is False and state["mode"]() is None
    assert state["futures"]() is not state["futures"]()  # a fresh container each time
    transfer = FutureTransfer()
    transfer.queue.extend(["f1", "f2"])
    assert transfer.submit_retrieve("id", "key") == "f1"
