#!/usr/bin/env python3
"""Record which LMCache releases' modules import beside the real vLLM of this environment.

A maintainer command, run inside the real-import tox env (needs real vLLM + torch):

    tox exec -e real-vllm0.32.0 -- python scripts/record_vllm_imports.py

Writes the vLLM version's entry of lmcache_compat/data/vllm_imports.json; the real-import tier
(tests/real) then checks the entry on every CI run.
"""

from __future__ import annotations

import json
import sys
import tempfile
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lmcache_compat.matrix import load_matrix  # noqa: E402
from tests.real.sweep import module_facts, present_modules, sweep  # noqa: E402

DATA = ROOT / "lmcache_compat" / "data" / "vllm_imports.json"


def main() -> int:
    vllm = metadata.version("vllm")
    torch = metadata.version("torch")
    matrix = load_matrix()
    rows = [r for r in matrix.rows if not r.artifact.endswith(".tar.gz")]
    with tempfile.TemporaryDirectory() as tmp:
        results = sweep([r.version for r in rows], Path(tmp))
    entry = {"torch": torch, "releases": {}}
    for row in rows:
        present = present_modules(row.missing_classes)
        entry["releases"][row.version] = module_facts(results[row.version], present)
    data = json.loads(DATA.read_text()) if DATA.exists() else {"format": 1, "vllm": {}}
    data["recorded_by"] = "scripts/record_vllm_imports.py; checked by tests/real"
    data["vllm"][vllm] = entry
    DATA.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    print(f"recorded {len(rows)} releases beside vLLM {vllm} (torch {torch})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
