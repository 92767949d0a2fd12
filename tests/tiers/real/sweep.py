"""Install LMCache releases side by side (``--target`` dirs) and introspect each one in a fresh
process beside the real vLLM of this environment.

Used by ``test_real_import.py``, which checks the fresh-process imports against the grid's
measured imports (``lmcache_compat/upstream/data/vllm_grid.json``). Nothing here runs in the unit
tier.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from tools.lmcache_targets import install, quiet_env
from tools.paths import TIERS

ROOT = Path(__file__).resolve().parents[3]


def introspect(target: Path, tmp: Path) -> dict[str, Any]:
    env = quiet_env(tmp)
    env["PYTHONPATH"] = os.pathsep.join([str(target), str(ROOT)])
    r = subprocess.run(
        [sys.executable, str(TIERS / "real" / "introspect.py")],
        capture_output=True,
        text=True,
        env=env,
        cwd=str(tmp),
        timeout=600,
    )
    if r.returncode != 0 or not r.stdout.strip():
        raise RuntimeError(
            f"introspect failed for {target}:\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}"
        )
    result: dict[str, Any] = json.loads(r.stdout.strip().splitlines()[-1])
    return result


def sweep(versions: list[str], work: Path, workers: int = 2) -> dict[str, dict[str, Any]]:
    """version -> introspection result, imports run ``workers`` at a time."""
    work.mkdir(parents=True, exist_ok=True)
    targets = {v: install(v, work / "releases") for v in versions}

    def one(v: str) -> tuple[str, dict[str, Any]]:
        return v, introspect(targets[v], work / "tmp" / v)

    with ThreadPoolExecutor(max_workers=workers) as pool:
        return dict(pool.map(one, versions))


def present_modules(modules: Mapping[str, str]) -> set[str]:
    """The files of the modules in which the release defines its scanned classes (``modules``:
    a matrix row's class -> module)."""
    return {dotted.replace(".", "/") + ".py" for dotted in modules.values()}


def module_facts(result: dict[str, Any], present: set[str]) -> dict[str, str]:
    """``{module short name: "ok" | first error line}`` for the modules the release has,
    with machine-specific paths removed so the facts compare across machines."""
    import re

    facts = {}
    for relpath, outcome in result["modules"].items():
        short = relpath.rsplit("/", 1)[-1][: -len(".py")]
        if relpath not in present:
            continue
        error = outcome.get("error")
        facts[short] = "ok" if error is None else re.sub(r" \((/|[A-Za-z]:\\)[^)]*\)$", "", error)
    return facts


def run_drivers(
    module: str, releases: Mapping[str, str], work: Path, timeout: float = 240
) -> dict[str, dict[str, Any]]:
    """Run ``python -m MODULE MODE TMP RESULT_JSON`` once per ``mode -> LMCache release``, all at
    once, each with its release first on ``PYTHONPATH``; return each child's JSON report (with
    its wall time and the install time added under ``timings``)."""
    import time

    start = time.perf_counter()
    targets = {mode: install(version, work / "releases") for mode, version in releases.items()}
    install_s = round(time.perf_counter() - start, 3)
    procs: dict[str, tuple[subprocess.Popen[str], Path]] = {}
    start = time.perf_counter()
    for mode, target in targets.items():
        tmp = work / mode
        env = quiet_env(tmp)
        env["PYTHONPATH"] = os.pathsep.join([str(target), str(ROOT)])
        env["PYTHONHASHSEED"] = "0"  # LMCache's builtin chunk hash otherwise varies per process
        result = tmp / "result.json"
        with (tmp / "child.log").open("w") as log:
            procs[mode] = (
                subprocess.Popen(
                    [sys.executable, "-m", module, mode, str(tmp), str(result)],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    text=True,
                    env=env,
                    cwd=str(tmp),
                ),
                result,
            )
    out: dict[str, dict[str, Any]] = {}
    for mode, (proc, result) in procs.items():
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            code = -9
        if code != 0 or not result.exists():
            text = (result.parent / "child.log").read_text(errors="replace")
            raise AssertionError(f"{module} {mode} failed ({code}):\n{text[-6000:]}")
        report: dict[str, Any] = json.loads(result.read_text())
        report["timings"]["child_wall"] = round(time.perf_counter() - start, 3)
        report["timings"]["install_releases"] = install_s
        report["lmcache_target"] = str(targets[mode])
        print(f"{module} {mode} timings (s):", json.dumps(report["timings"], sort_keys=True))
        out[mode] = report
    return out
