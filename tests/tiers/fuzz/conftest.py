"""The fuzz tier runs under an address-space limit, set once for the whole pytest process."""

from __future__ import annotations

import os
import resource

import pytest

#: Address space the whole test process may map (scanner, hypothesis and pytest together).
ADDRESS_SPACE = int(os.environ.get("LMCACHE_COMPAT_FUZZ_AS", str(3 * 1024**3)))
#: Wall-clock limit of one scan (it runs in a thread; see test_fuzz_scan.py).
SECONDS_PER_SCAN = float(os.environ.get("LMCACHE_COMPAT_FUZZ_SECONDS", "20"))
#: Examples per strategy per run: fixed, so a run costs the same every time.
EXAMPLES = int(os.environ.get("LMCACHE_COMPAT_FUZZ_EXAMPLES", "150"))
SEED = int(os.environ.get("LMCACHE_COMPAT_FUZZ_SEED", "0"))

STATS = {"examples": 0, "scanned": 0, "refused": 0}


@pytest.fixture(scope="session", autouse=True)
def _address_space_limit() -> None:
    """Set once the first fuzz test runs (a run that deselects them keeps its limits)."""
    _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = ADDRESS_SPACE if hard == resource.RLIM_INFINITY else min(ADDRESS_SPACE, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not STATS["examples"]:
        return
    terminalreporter.write_line(
        f"fuzz: {STATS['examples']} examples (seed {SEED}, {EXAMPLES} per strategy): "
        f"{STATS['scanned']} scanned, {STATS['refused']} refused in one line; "
        f"RLIMIT_AS={ADDRESS_SPACE // 1024**2} MiB, {SECONDS_PER_SCAN:g} s per scan"
    )
