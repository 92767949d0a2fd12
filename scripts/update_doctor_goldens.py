#!/usr/bin/env python3
"""Write the golden texts of ``doctor`` in each situation (tests/report/goldens/doctor-*.txt)
from tools/doctor_scenarios.py; tests/report/test_doctor_goldens.py compares them.

    python scripts/update_doctor_goldens.py [--check]
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tools.doctor_scenarios import GOLDENS, golden_files  # noqa: E402


def main(argv: list[str]) -> int:
    stale = []
    GOLDENS.mkdir(parents=True, exist_ok=True)
    for name, make in golden_files().items():
        path, text = GOLDENS / name, make()
        if path.is_file() and path.read_text(encoding="utf-8") == text:
            continue
        stale.append(name)
        if "--check" not in argv:
            path.write_text(text, encoding="utf-8")
            print(f"updated {path.relative_to(ROOT)}")
    if "--check" in argv and stale:
        print(f"stale goldens: {', '.join(stale)} (run scripts/update_doctor_goldens.py)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
