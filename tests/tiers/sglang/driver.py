"""The sglang tier's driver: imports torch once, then forks one child per job (two at a time,
each with a timeout: ``tests/tiers/grid/forking.py``), so that every child starts with torch in
memory and imports only its own LMCache (and sglang) release.

    python -m tests.tiers.sglang.driver JOBS_JSON WORK_DIR

``JOBS_JSON``: a file holding ``[{"name", "module", "arg", "path": [dirs to put first on
sys.path], "env": {...}, "timeout": s}]``. Prints ``RESULT: {name: result}``: each child's
``module.run(arg)``, or ``{"error": ...}`` for a child that failed or timed out.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from pathlib import Path
from typing import Any

from tests.tiers.grid.forking import Job, Progress, run_forked


def _job(spec: dict[str, Any]) -> Job:
    def run(progress: Progress) -> None:
        sys.path[:0] = spec["path"]
        os.environ.update(spec["env"])
        importlib.invalidate_caches()
        module = importlib.import_module(spec["module"])
        progress.step("run")
        progress.data["result"] = module.run(spec["arg"])
        progress.save()

    return Job(spec["name"], run, float(spec["timeout"]))


def main(jobs_file: str, work: str) -> int:
    import torch  # noqa: F401  # imported once: every forked child shares it

    specs = json.loads(Path(jobs_file).read_text())
    outcomes = run_forked([_job(s) for s in specs], Path(work))
    results: dict[str, Any] = {}
    for name, outcome in outcomes.items():
        result = outcome.report.get("result")
        if result is None:
            log = outcome.log.read_text(errors="replace")[-2000:] if outcome.log.exists() else ""
            result = {
                "error": outcome.failure or outcome.report.get("error", "no result"),
                "identical": False,
                "log": log,
            }
        results[name] = result
    print("RESULT: " + json.dumps(results), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
