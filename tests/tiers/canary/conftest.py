"""The canary's report: what each test found, printed at the end and written as JSON."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

#: Filled by the canary's tests: section -> lines (and data for the JSON report).
REPORT: dict[str, dict[str, Any]] = {}


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not REPORT:
        return
    terminalreporter.section("canary: what is new or broken")
    for section, entry in REPORT.items():
        terminalreporter.write_line(f"{section}:")
        for line in entry.get("lines", ()):
            terminalreporter.write_line(f"  {line}")
    target = os.environ.get("LMCACHE_COMPAT_CANARY_REPORT")
    if target:
        Path(target).parent.mkdir(parents=True, exist_ok=True)
        Path(target).write_text(json.dumps(REPORT, indent=1, sort_keys=True, default=str))
        terminalreporter.write_line(f"report: {target}")


@pytest.fixture(scope="session")
def report() -> dict[str, dict[str, Any]]:
    return REPORT
