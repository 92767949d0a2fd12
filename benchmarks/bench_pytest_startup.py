"""pytest start-up in a project that has lmcache-compat installed: plugin not enabled vs enabled.

    python benchmarks/bench_pytest_startup.py [--repeat R]

A throw-away project with one trivial test is collected (``pytest -q --collect-only``) in a
fresh interpreter, best of R runs, four ways: without the plugin and with ``-p
lmcache_compat.testing.pytest_plugin``, each with and without ``PYTHONDONTWRITEBYTECODE=1``
(no bytecode cache: every run compiles, as in a read-only or throw-away environment). A
baseline with ``-p no:lmcache_compat`` is not needed: lmcache-compat registers no ``pytest11``
entry point, so "not enabled" costs nothing, which the first ratio shows. Nothing here is a
test: numbers vary by machine, ratios less so.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PLUGIN = "lmcache_compat.testing.pytest_plugin"


def _best(cwd: Path, args: list[str], env: dict[str, str], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "--collect-only",
                "-p",
                "no:cacheprovider",
                *args,
            ],
            cwd=cwd,
            env=env,
            check=True,
            capture_output=True,
        )
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=7)
    opts = ap.parse_args()
    root = str(Path(__file__).resolve().parent.parent)
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp)
        (project / "test_one.py").write_text("def test_one():\n    pass\n")
        base = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
        base["PYTHONPATH"] = os.pathsep.join(filter(None, [root, base.get("PYTHONPATH")]))
        rows = []
        for label, nobytecode in (("bytecode cached", False), ("PYTHONDONTWRITEBYTECODE=1", True)):
            env = dict(base)
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            if nobytecode:
                env["PYTHONDONTWRITEBYTECODE"] = "1"
            _best(project, [], env, 1)  # warm the caches
            off = _best(project, [], env, opts.repeat)
            on = _best(project, ["-p", PLUGIN, "--lmcache-release=all"], env, opts.repeat)
            rows.append((label, off, on))
        (project / "conftest.py").write_text(
            "import sys\n"
            "def pytest_sessionfinish():\n"
            "    print('LOADED' if 'lmcache_compat' in sys.modules else 'NOT LOADED')\n"
        )
        probe = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "--collect-only", "-s"],
            cwd=project,
            env=base,
            capture_output=True,
            text=True,
            check=True,
        )
        loaded = "NOT LOADED" not in probe.stdout
        print(f"{'':28} {'not enabled':>12} {'enabled':>10} {'enabled/not':>12}")
        for label, off, on in rows:
            print(f"{label:28} {off * 1000:10.0f}ms {on * 1000:8.0f}ms {on / off:11.2f}x")
        cached, uncached = rows
        print(f"not enabled, no bytecode / bytecode: {uncached[1] / cached[1]:.2f}x")
        print(f"lmcache_compat imported by a pytest run that does not enable the plugin: {loaded}")


if __name__ == "__main__":
    main()
