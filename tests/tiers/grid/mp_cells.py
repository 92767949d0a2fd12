"""What an MP cell of the grid may say, checked where the grid tiers measure it
(``test_grid.py``) and over the shipped grid (``tests/upstream/test_grid_mp_cells.py``).
Imports neither vLLM nor LMCache."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from lmcache_compat.upstream.grid import MP_ASPECTS

#: What a release's adapter raises when it reaches for its server while it is built (0.4.7
#: on, measured), or what the build's time limit raises into a release that waits for it
#: without a timeout (before 0.4.2): not a connector failure.
NEEDS_SERVER = "Cannot reach the LMCache MP server"
#: How an ``n/a`` cell's detail starts: the one reason an MP cell may be ``n/a``.
NEEDS_SERVER_PREFIX = "needs a running server to build: "
#: An ``n/a`` cell's whole detail: the prefix and one of the two lines the build records.
NEEDS_SERVER_DETAIL = re.compile(
    re.escape(NEEDS_SERVER_PREFIX)
    + r"(?:ConnectionError: "
    + re.escape(NEEDS_SERVER)
    + r" at 'tcp://127\.0\.0\.1:PORT' within \d+(?:\.\d+)?s\."
    + r"|BuildTimeout: "
    + re.escape(NEEDS_SERVER)
    + r": still waiting for the server after \d+ s)"
)
#: ``n/a`` is worse than ``ok`` here: ours stopping for want of a server where the reference
#: built is a regression, not a fallback.
MP_RANK = {"ok": 0, "n/a": 1, "degraded": 2, "broken": 3}
_NOT_REACHED = {"status": "broken", "detail": "not reached"}


def mp_cell_problems(mp: Mapping[str, Any]) -> list[str]:
    """Every breach over one tier's MP entry (``{release: {"connectors": {key: {aspect:
    {"status", "detail"}}}}}``, as in ``vllm_grid.json``): an ``n/a`` whose detail is not
    exactly the needs-a-running-server reason; ours ``broken``; ours worse than the reference
    on an aspect the reference reached (an aspect ours did not reach counts as broken)."""
    out: list[str] = []
    for release, run in mp.items():
        connectors = run["connectors"]
        ours, ref = connectors.get("compat-mp", {}), connectors.get("vllm-mp", {})
        for key, cells in connectors.items():
            for aspect, cell in cells.items():
                if cell["status"] == "n/a" and not NEEDS_SERVER_DETAIL.fullmatch(cell["detail"]):
                    out.append(f"{release} {key} {aspect}: n/a for another reason: {cell}")
        for aspect in MP_ASPECTS:
            mine = ours.get(aspect)
            if mine is not None and mine["status"] == "broken":
                out.append(f"{release} compat-mp {aspect}: broken: {mine['detail']}")
            theirs = ref.get(aspect)
            if theirs is None:
                continue
            mine = mine or _NOT_REACHED
            if MP_RANK[mine["status"]] > MP_RANK[theirs["status"]]:
                out.append(f"{release} {aspect}: ours {mine} is worse than the reference {theirs}")
    return out
