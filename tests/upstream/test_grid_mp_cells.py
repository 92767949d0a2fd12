"""The MP cells' rule (tests/tiers/grid/mp_cells.py) holds over the shipped grid, and fails
where it should."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from lmcache_compat.upstream.shipped import read_data
from tests.tiers.grid.mp_cells import mp_cell_problems

NEEDS = (
    "needs a running server to build: ConnectionError: Cannot reach the LMCache MP server at "
    "'tcp://127.0.0.1:PORT' within 2.0s."
)
TIMEOUT = (
    "needs a running server to build: BuildTimeout: Cannot reach the LMCache MP server: still "
    "waiting for the server after 15 s"
)


def _grid() -> dict[str, Any]:
    from lmcache_compat.upstream.grid import DATA_FILE

    data: dict[str, Any] = json.loads(read_data(DATA_FILE))
    return data


def test_the_shipped_mp_cells_keep_the_rule() -> None:
    tiers = _grid()["vllm"]
    assert any(t.get("mp") for t in tiers.values())
    for vllm, tier in tiers.items():
        assert mp_cell_problems(tier.get("mp", {})) == [], vllm


def _one(ref: dict[str, Any], ours: dict[str, Any]) -> dict[str, Any]:
    return {"0.5.6": {"connectors": {"vllm-mp": ref, "compat-mp": ours}}}


def _cell(status: str, detail: str = "x") -> dict[str, str]:
    return {"status": status, "detail": detail}


def test_the_needs_a_server_reasons_pass() -> None:
    assert (
        mp_cell_problems(_one({"builds": _cell("n/a", NEEDS)}, {"builds": _cell("n/a", NEEDS)}))
        == []
    )
    assert (
        mp_cell_problems(_one({"builds": _cell("broken")}, {"builds": _cell("n/a", TIMEOUT)})) == []
    )
    ok = {"builds": _cell("ok"), "worker": _cell("ok")}
    assert mp_cell_problems(_one(ok, copy.deepcopy(ok))) == []


@pytest.mark.parametrize(
    ("ref", "ours"),
    [
        # n/a for any other reason
        ({"builds": _cell("n/a", NEEDS)}, {"builds": _cell("n/a", "needs a running server")}),
        ({"builds": _cell("n/a", NEEDS)}, {"builds": _cell("n/a", NEEDS + " and more")}),
        ({"builds": _cell("n/a", "skipped")}, {"builds": _cell("n/a", NEEDS)}),
        # ours broken
        ({"builds": _cell("broken")}, {"builds": _cell("broken")}),
        # the reference built, ours stopped for want of a server, or did not reach the aspect
        ({"builds": _cell("ok")}, {"builds": _cell("n/a", NEEDS)}),
        ({"builds": _cell("ok"), "worker": _cell("ok")}, {"builds": _cell("ok")}),
        (
            {"builds": _cell("ok"), "worker": _cell("ok")},
            {"builds": _cell("ok"), "worker": _cell("degraded")},
        ),
    ],
)
def test_a_breach_is_reported(ref: dict[str, Any], ours: dict[str, Any]) -> None:
    assert mp_cell_problems(_one(ref, ours)) != []
