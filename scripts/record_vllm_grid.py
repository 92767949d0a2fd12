#!/usr/bin/env python3
"""Write ``lmcache_compat/upstream/data/vllm_grid.json`` from the ``grid-vllm*`` tox tiers.

A maintainer command (not run by CI). Each tier writes its fresh measurement to
``.tox/grid-reports/grid-vllm<X>.json`` before it compares it with the shipped file; this
script merges those reports into the shipped file:

    python scripts/record_vllm_grid.py                  # every report found, no tier run
    python scripts/record_vllm_grid.py 0.32.0 0.33.0    # only these vLLM releases
    python scripts/record_vllm_grid.py --run 0.32.0     # run tox -e grid-vllm0.32.0 first
    python scripts/record_vllm_grid.py --run --all      # run every grid tier first (~20 min)
    python scripts/record_vllm_grid.py --check          # exit 1 if the file would change

Entries of vLLM releases without a report are kept as they are. The file is written in one
canonical layout (``tools.vllm_grid_data.render``: versions in version order, aspects in the order
of ``lmcache_compat.upstream.grid.ASPECTS``, every other key sorted; a release's imports and each
cell
on one line), so a re-recording only changes what was measured differently.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lmcache_compat.upstream.grid import DATA_FILE  # noqa: E402
from lmcache_compat.upstream.shipped import data_path  # noqa: E402
from tools.vllm_grid_data import FORMAT, RECORDED_BY, differences, render  # noqa: E402

DATA = data_path(DATA_FILE)
REPORTS = ROOT / ".tox" / "grid-reports"
#: The grid tiers of tox.ini (tests/tiers/grid/test_record.py keeps the two equal).
TIERS = ("0.11.0", "0.11.2", "0.13.0", "0.14.1", "0.17.1", "0.21.0", "0.27.1", "0.32.0", "0.33.0")


def run_tier(version: str) -> None:
    """``tox -e grid-vllmX`` (only what writes the report); its verdict does not matter here:
    the comparison fails exactly when the measurement changed."""
    started = time.time()
    subprocess.run(
        [
            "tox",
            "-e",
            f"grid-vllm{version}",
            "--",
            "tests/tiers/grid/test_grid.py",
            "-k",
            "shipped",
        ],
        cwd=ROOT,
        check=False,
    )
    report = REPORTS / f"grid-vllm{version}.json"
    if not report.exists() or report.stat().st_mtime < started:
        raise SystemExit(f"tox -e grid-vllm{version} wrote no report ({report})")


def load_reports(versions: list[str]) -> dict[str, dict[str, object]]:
    found: dict[str, dict[str, object]] = {}
    for version in versions:
        path = REPORTS / f"grid-vllm{version}.json"
        if not path.exists():
            raise SystemExit(f"no report for vLLM {version}: {path} (run with --run)")
        data = json.loads(path.read_text())
        if data["vllm"] != version:
            raise SystemExit(f"{path} measured vLLM {data['vllm']}, not {version}")
        found[version] = data["tier"]
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("versions", nargs="*", help="vLLM releases (default: every report)")
    parser.add_argument("--run", action="store_true", help="run the tiers first")
    parser.add_argument("--all", action="store_true", help="every grid tier of tox.ini")
    parser.add_argument("--check", action="store_true", help="exit 1 if the file would change")
    args = parser.parse_args(argv)
    versions: list[str] = list(args.versions)
    if args.all:
        versions = list(TIERS)
    if not versions:
        versions = sorted(p.stem.removeprefix("grid-vllm") for p in REPORTS.glob("grid-vllm*.json"))
    if not versions:
        raise SystemExit(f"no reports under {REPORTS}: run with --run --all (or name versions)")
    if args.run:
        for version in versions:
            run_tier(version)
    current = json.loads(DATA.read_text()) if DATA.exists() else {"vllm": {}}
    tiers: dict[str, Any] = dict(current.get("vllm", {}))
    grid = {"format": FORMAT, "recorded_by": RECORDED_BY, "vllm": tiers}
    for version, tier in load_reports(versions).items():
        before = tiers.get(version)
        diff = ["new"] if before is None else differences(before, tier, (f"vLLM {version}",))
        print(f"vLLM {version}: " + ("unchanged" if not diff else f"{len(diff)} change(s)"))
        for line in diff:
            print("  " + line.replace("\n", "\n  "))
        tiers[version] = tier
    text = render(grid)
    if args.check:
        return 0 if DATA.exists() and DATA.read_text() == text else 1
    DATA.write_text(text)
    print(f"wrote {DATA.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
