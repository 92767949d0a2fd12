"""The shipped grid file and its recording script, without vLLM (runs in the unit tier)."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from typing import Any

from lmcache_compat.upstream.grid import ASPECTS, CONNECTOR_KEYS, DATA_FILE, grid_from_json
from lmcache_compat.upstream.matrix import load_matrix
from lmcache_compat.upstream.shipped import read_data
from tools.paths import vllm_constraints
from tools.vllm_grid_data import FORMAT, differences, render, tier_json

ROOT = Path(__file__).resolve().parents[3]


def _shipped_text() -> str:
    return read_data(DATA_FILE)


def _script() -> Any:
    path = ROOT / "scripts" / "record_vllm_grid.py"
    spec = importlib.util.spec_from_file_location("record_vllm_grid", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_script_knows_every_grid_tier_of_tox_ini() -> None:
    text = (ROOT / "tox.ini").read_text()
    (label,) = re.findall(r"^\s*grid = (.*)$", text, re.MULTILINE)
    tiers = [name.strip().removeprefix("grid-vllm") for name in label.split(",")]
    assert tuple(tiers) == _script().TIERS
    for tier in tiers:
        assert f"[testenv:grid-vllm{tier}]" in text
        assert vllm_constraints(tier).exists()


def test_the_shipped_file_is_in_the_recorded_layout() -> None:
    text = _shipped_text()
    data = json.loads(text)
    assert data["format"] == FORMAT
    assert render(data) == text, "re-write it with python scripts/record_vllm_grid.py"


def test_every_shipped_tier_is_complete() -> None:
    data = json.loads(_shipped_text())
    grid = grid_from_json(data)
    wheels = [r.version for r in load_matrix().rows if r.artifact.endswith(".whl")]
    assert grid.versions == list(_script().TIERS)
    for tier in grid.tiers:
        assert sorted(tier.imports) == sorted(wheels), tier.vllm
        for release, modules in tier.imports.items():
            assert "vllm_v1_adapter" in modules, (tier.vllm, release)
        assert tier.pairs, tier.vllm
        for release, pair in tier.pairs.items():
            assert sorted(pair.connectors) == sorted(CONNECTOR_KEYS), (tier.vllm, release)
            for run in pair.connectors.values():
                built = run.cells["builds"].status != "broken"
                assert tuple(run.cells) == (ASPECTS if built else ("builds",)), (tier.vllm, release)
        assert tier.torch == "2.13.0+cpu"
        assert tier.notes


def test_a_crashed_child_is_recorded_as_such() -> None:
    report = {
        "vllm": "0.99.0",
        "torch": "2.13.0+cpu",
        "pairs": ["0.5.6"],
        "children": {
            "0.5.6": {
                "failure": "killed by signal SIGSEGV",
                "report": {
                    "step": "connector compat",
                    "imports": {"vllm_v1_adapter": "ok"},
                    "pair": {
                        "connectors": {
                            "vllm": {a: {"status": "ok", "detail": "x"} for a in ASPECTS}
                        }
                    },
                },
            },
            "0.3.1": {
                "failure": "timed out after 180 s",
                "report": {"step": "import cache_engine", "imports": {"vllm_v1_adapter": "ok"}},
            },
        },
    }
    tier = tier_json(report, None)
    assert tier["imports"]["0.3.1"] == {
        "vllm_v1_adapter": "ok",
        "cache_engine": "the child process ended (timed out after 180 s) during import "
        "cache_engine",
    }
    compat = tier["pairs"]["0.5.6"]["connectors"]["compat"]
    assert set(compat) == set(ASPECTS)
    assert compat["builds"] == {
        "status": "broken",
        "detail": "the child process ended (killed by signal SIGSEGV) during connector compat",
    }
    assert tier["pairs"]["0.5.6"]["connectors"]["vllm"]["step"]["status"] == "ok"


def test_differences_name_the_cell() -> None:
    ok = {"status": "ok", "detail": "fine"}
    broken = {"status": "broken", "detail": "AttributeError: x"}
    shipped = {"pairs": {"0.5.6": {"connectors": {"vllm": {"events": ok}}}}}
    fresh = {"pairs": {"0.5.6": {"connectors": {"vllm": {"events": broken}}}}}
    (line,) = differences(shipped, fresh, ("vLLM 0.32.0",))
    assert line == (
        "vLLM 0.32.0 / pairs / 0.5.6 / connectors / vllm / events:\n"
        "    shipped  ok: fine\n"
        "    measured broken: AttributeError: x"
    )
    assert differences(shipped, shipped) == []
