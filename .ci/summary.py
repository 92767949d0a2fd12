"""Sum the pytest JUnit reports of every tox env into one closing line."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path


def main(work_dir: str) -> int:
    reports = sorted(Path(work_dir).glob("junit-*.xml"))
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for report in reports:
        root = ET.parse(report).getroot()
        suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
        counts = {k: sum(int(s.get(k, 0)) for s in suites) for k in totals}
        for key in totals:
            totals[key] += counts[key]
        print(
            f"ci: {report.stem[len('junit-') :]:<24} {counts['tests']:5d} tests, "
            f"{counts['failures'] + counts['errors']} failed, {counts['skipped']} skipped"
        )
    # a tier whose interpreter is missing (toxfile.py; a failure where CI is set)
    not_run = sorted(Path(work_dir).glob("not-run-*.txt"))
    for marker in not_run:
        print(f"ci: {marker.read_text(encoding='utf-8').strip()}")
    if not_run:
        print(f"ci: {len(reports)} tiers reported, {len(not_run)} not run")
    failed = totals["failures"] + totals["errors"]
    passed = totals["tests"] - failed - totals["skipped"]
    print(f"{passed} passed, {failed} failed, {totals['skipped']} skipped")
    if not reports or totals["tests"] == 0:
        print("ci: no test reports found", file=sys.stderr)
        return 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else ".tox"))
