"""The grid tier's driver: ONE process per vLLM tier, a forked child per LMCache release.

    python -m tests.tiers.grid.driver RELEASES_DIR WORK_DIR REPORT_JSON [--releases a,b] [--pairs
    a,b]

The parent sets an offline, temp-dir-confined environment, imports vLLM, torch and every vLLM
module the scenario uses, builds the tiny model's ``ModelConfig`` once (vLLM inspects the model
in a subprocess the first time and caches the answer under ``VLLM_CACHE_ROOT``), and only then
forks: one child per LMCache release (:func:`tests.tiers.grid.forking.run_forked`, 2 at a time, a
timeout each). A child puts its release's ``--target`` dir first on ``sys.path`` and imports
only LMCache:

a. every module that defines a class of the release's static scan
   (``lmcache_compat.upstream.scanner.scan(target).modules``), each recorded by its short name as
   ``"ok"`` or the error's first line with machine paths removed (``tests.tiers.real.sweep.
   module_facts``);
b. for the seed-scenario releases (:data:`PAIRS`), both connectors over the pair
   (:mod:`tests.tiers.grid.scenario`, whose docstring lists what is real and what is injected),
   including, for releases without ``register_kv_caches``, the KV-cache hand-over check;
c. for every release whose MP adapter module imports here, both MP connectors built and bound
   (:mod:`tests.tiers.grid.mp_scenario`).

A child that crashes or times out is recorded as such (what it had saved up to then stays).
REPORT_JSON gets every child's report plus what the parent read about vLLM.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from tests.tiers.grid.forking import Job, Progress, run_forked

ROOT = Path(__file__).resolve().parents[3]
#: LMCache releases the seed scenario runs over on every tier.
PAIRS = ("0.3.9", "0.3.9.post1", "0.3.10.post2", "0.3.12", "0.3.13", "0.4.7", "0.5.6", "0.5.7rc2")
#: Extra pairs on some tiers (the tier shows them worth it).
EXTRA_PAIRS: dict[str, tuple[str, ...]] = {"0.11.0": ("0.3.7",)}
IMPORT_TIMEOUT = float(os.environ.get("LMCACHE_GRID_IMPORT_TIMEOUT", "180"))
PAIR_TIMEOUT = float(os.environ.get("LMCACHE_GRID_PAIR_TIMEOUT", "600"))
PARALLEL = 2
#: The module of the release's MP adapters (short name, as the imports record it).
MP_ADAPTER_MODULE = "vllm_multi_process_adapter"

#: What the parent imports before forking (every vLLM module the children use).
HEAVY_MODULES = (
    "torch",
    "vllm",
    "vllm.config",
    "vllm.distributed.kv_events",
    "vllm.distributed.kv_transfer",
    "vllm.distributed.kv_transfer.kv_connector.factory",
    "vllm.distributed.kv_transfer.kv_connector.v1.base",
    "vllm.distributed.parallel_state",
    "vllm.forward_context",
    "vllm.v1.core.kv_cache_utils",
    "vllm.v1.core.sched.scheduler",
    "vllm.v1.kv_cache_interface",
    "vllm.v1.outputs",
    "vllm.v1.request",
    "vllm.v1.structured_output",
    "vllm.v1.worker.kv_connector_model_runner_mixin",
    "lmcache_compat.vllm",
)


def pairs_for(vllm: str) -> tuple[str, ...]:
    return PAIRS + EXTRA_PAIRS.get(vllm, ())


def confine(work: Path) -> None:
    """Caches and temp files of vLLM / LMCache under ``work`` (before importing them)."""
    from tools.lmcache_targets import quiet_env

    os.environ.update(quiet_env(work / "env"))


def warm_up(work: Path) -> None:
    """The first ``ModelConfig`` of the tiny model (its model inspection runs once, here)."""
    from tests.tiers.real.scheduler import harness as h

    h.tiny_model_config(work / "warm-up")


def _use_release(target: Path) -> None:
    sys.path.insert(0, str(target))
    importlib.invalidate_caches()
    from lmcache_compat.distributions import clear_installed
    from lmcache_compat.upstream.resolve import clear_find_cache

    clear_find_cache()
    clear_installed()


def import_facts(target: Path, progress: Progress) -> None:
    """(a): the modules that define the release's scanned classes, imported in scan order."""
    from lmcache_compat.upstream.scanner import scan
    from tests.tiers.real.sweep import module_facts

    modules = scan(target).modules
    facts: dict[str, str] = {}
    progress.data["imports"] = facts
    for dotted in dict.fromkeys(modules.values()):
        relpath = dotted.replace(".", "/") + ".py"
        short = dotted.rsplit(".", 1)[-1]
        progress.step(f"import {short}")
        try:
            importlib.import_module(dotted)
            outcome: dict[str, Any] = {"error": None}
        except BaseException as exc:
            first = str(exc).splitlines()[0] if str(exc) else ""
            outcome = {"error": f"{type(exc).__name__}: {first}".strip()}
        facts.update(module_facts({"modules": {relpath: outcome}}, {relpath}))
        progress.save()


def release_job(version: str, target: Path, work: Path, pair: bool) -> Job:
    def run(progress: Progress) -> None:
        from importlib.metadata import version as dist_version

        _use_release(target)
        progress.data["release"] = version
        import_facts(target, progress)
        import lmcache

        progress.data["lmcache"] = {
            "version": dist_version("lmcache"),
            "from_target": str(Path(lmcache.__file__).resolve()).startswith(str(target.resolve())),
        }
        if pair:
            run_pair(version, work / version, progress)
        if progress.data["imports"].get(MP_ADAPTER_MODULE) == "ok" and vllm_has_mp_connector():
            run_mp(work / version / "mp", progress)

    return Job(version, run, PAIR_TIMEOUT if pair else IMPORT_TIMEOUT)


def vllm_has_mp_connector() -> bool:
    """Whether this vLLM ships an MP connector module (0.11.2 on), found without importing it."""
    import importlib.util

    from lmcache_compat.upstream import locations as loc

    return importlib.util.find_spec(loc.VLLM_LMCACHE_MP_CONNECTOR.modules[0]) is not None


def run_mp(tmp: Path, progress: Progress) -> None:
    """(c): both MP connectors over this release."""
    from lmcache_compat.upstream.grid import MP_CONNECTOR_KEYS
    from lmcache_compat.vllm.plugin import register
    from tests.tiers.grid import mp_scenario

    register()  # what vLLM's plugin loading does in each process
    runs: dict[str, Any] = {}
    facts: dict[str, Any] = {}
    progress.data["mp"] = runs
    progress.data["mp_facts"] = facts
    for key in MP_CONNECTOR_KEYS:
        progress.step(f"mp connector {key}")
        result = mp_scenario.run_mp_connector(key, tmp / key)
        runs[key] = result["cells"]
        facts[key] = result["facts"]
        progress.save()


def run_pair(version: str, tmp: Path, progress: Progress) -> None:
    """(b): both connectors over this pair, then the KV-cache hand-over where it applies."""
    from lmcache_compat.upstream.grid import CONNECTOR_KEYS
    from tests.tiers.grid import scenario

    tmp.mkdir(parents=True, exist_ok=True)
    progress.step("load the release's impl")
    release = scenario.load_release(version)
    progress.data["impl"] = {
        "module": release.impl_module,
        "has": release.has,
        "compat_file": str(
            Path(importlib.import_module("lmcache_compat.vllm.connector").__file__ or "")
        ),
    }
    side = scenario.vllm_side()
    progress.data["vllm_side"] = side.to_json()
    pair: dict[str, Any] = {}
    facts: dict[str, Any] = {}
    progress.data["pair"] = {"connectors": pair}
    progress.data["facts"] = facts
    for key in CONNECTOR_KEYS:
        progress.step(f"connector {key}")
        result = scenario.run_connector(key, release, side, tmp)
        pair[key] = result["cells"]
        facts[key] = result["facts"]
        if result["facts"].get("handover") is not None:
            progress.data.setdefault("handover", {})[key] = result["facts"]["handover"]
        progress.save()


def torch_pin() -> str | None:
    """vLLM's own torch requirement (``torch==X``), read from its metadata."""
    from importlib.metadata import requires

    from packaging.requirements import Requirement

    for line in requires("vllm") or ():
        req = Requirement(line)
        if req.name == "torch" and (req.marker is None or req.marker.evaluate({"extra": ""})):
            return str(req.specifier) or None
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("releases_dir", type=Path)
    parser.add_argument("work", type=Path)
    parser.add_argument("report", type=Path)
    parser.add_argument("--releases", default=None, help="comma-separated (default: all)")
    parser.add_argument("--pairs", default=None, help="comma-separated (default: PAIRS)")
    parser.add_argument("--parallel", type=int, default=PARALLEL)
    args = parser.parse_args(argv)
    work: Path = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    confine(work)
    timings: dict[str, float] = {}
    start = time.perf_counter()
    for name in HEAVY_MODULES:
        importlib.import_module(name)
    timings["imports"] = round(time.perf_counter() - start, 3)
    from importlib.metadata import version as dist_version

    from tests.tiers.grid.prepare import wheel_releases

    vllm = dist_version("vllm")
    start = time.perf_counter()
    warm_up(work)
    timings["warm_up"] = round(time.perf_counter() - start, 3)
    releases = args.releases.split(",") if args.releases else wheel_releases()
    pairs = set(args.pairs.split(",") if args.pairs else pairs_for(vllm))
    # pairs first: they take longest, the import-only children fill in around them
    order = sorted(releases, key=lambda v: v not in pairs)
    jobs = [
        release_job(v, args.releases_dir.resolve() / v, work / "children", v in pairs)
        for v in order
    ]
    start = time.perf_counter()
    outcomes = run_forked(jobs, work / "children", parallel=args.parallel)
    timings["children"] = round(time.perf_counter() - start, 3)
    report = {
        "vllm": vllm,
        "torch": dist_version("torch"),
        "torch_pin": torch_pin(),
        "pairs": sorted(pairs & set(releases)),
        "timings": timings,
        "children": {
            name: {
                "report": o.report,
                "failure": o.failure,
                "wall": o.wall,
                "log": str(o.log),
            }
            for name, o in outcomes.items()
        },
    }
    args.report.parent.mkdir(parents=True, exist_ok=True)
    args.report.write_text(json.dumps(report, indent=1, sort_keys=True, default=repr))
    print(f"grid driver: vLLM {vllm}: {len(jobs)} children, timings {json.dumps(timings)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
