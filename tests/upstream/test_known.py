"""A scan of an artifact the shipped matrix was built from is that row: same JSON, same text,
and the scanner is not even imported."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from lmcache_compat.report.cli import main
from lmcache_compat.upstream.known import shipped_scan_json
from lmcache_compat.upstream.scanner import scan
from tests.support.archives import ADAPTER_0_3_10_POST2, V1, make_wheel
from tests.support.paths import ROOT

PROBE = """
import json, sys
from lmcache_compat.upstream import known
from lmcache_compat.upstream.matrix import ReleaseMatrix, ReleaseRow
row = json.load(open(sys.argv[1]))
known.load_matrix = lambda: ReleaseMatrix([ReleaseRow.from_json(row)])
from lmcache_compat.report.cli import main
code = main(["scan", sys.argv[2], *sys.argv[3:]])
sys.stdout.flush()
imported = "lmcache_compat.upstream.scanner" in sys.modules
print("\\nSCANNER-IMPORTED" if imported else "\\nROW", end="")
sys.exit(code)
"""


def _row(whl: Path) -> dict[str, object]:
    data = scan(whl).to_json()
    return {
        "version": data["lmcache_version"],
        "artifact": whl.name,
        "sha256": hashlib.sha256(whl.read_bytes()).hexdigest(),
        **{k: v for k, v in data.items() if k not in ("lmcache_version", "source")},
    }


def _run(tmp_path: Path, whl: Path, *args: str) -> tuple[str, str]:
    row = tmp_path / "row.json"
    row.write_text(json.dumps(_row(whl)))
    out = subprocess.run(
        [sys.executable, "-c", PROBE, str(row), str(whl), *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    ).stdout
    body, _, how = out.rpartition("\n")
    return body, how


@pytest.mark.parametrize("fmt", [["--json"], []], ids=["json", "text"])
def test_a_known_artifact_is_answered_from_its_row(tmp_path: Path, fmt: list[str]) -> None:
    whl = make_wheel(tmp_path / "lmcache-0.3.10.post2-py3-none-any.whl", {V1: ADAPTER_0_3_10_POST2})
    answered, how = _run(tmp_path, whl, *fmt)
    assert how == "ROW"
    scanned, how = _run(tmp_path, whl, *fmt, "--rescan")
    assert how == "SCANNER-IMPORTED"
    assert answered == scanned


def test_any_other_artifact_is_scanned(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    whl = make_wheel(tmp_path / "lmcache-0.3.10.post2-py3-none-any.whl", {V1: ADAPTER_0_3_10_POST2})
    assert shipped_scan_json(whl) is None  # not a shipped row's bytes
    assert shipped_scan_json(None) is None and shipped_scan_json(tmp_path) is None
    assert main(["scan", str(whl), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["capabilities"]["kv_events"]
