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
from lmcache_compat.upstream.known import shipped_scan_json, tree_sha256
from lmcache_compat.upstream.scanner import scan
from tests.support.archives import ADAPTER_0_3_10_POST2, V1, make_tree, make_wheel, metadata
from tools.paths import ROOT

PROBE = """
import json, sys
from lmcache_compat.upstream import known
row = json.load(open(sys.argv[1]))
known.release_index = lambda: {"releases": [row]}
known.release_row = lambda version: row
from lmcache_compat.report.cli import main
code = main(["scan", sys.argv[2], *sys.argv[3:]])
sys.stdout.flush()
imported = "lmcache_compat.upstream.scanner" in sys.modules
# nor the model of the whole matrix: one release's file is read, as a mapping
imported |= "lmcache_compat.upstream.matrix" in sys.modules and "--rescan" not in sys.argv
print("\\nSCANNER-IMPORTED" if imported else "\\nROW", end="")
sys.exit(code)
"""


def _row(whl: Path) -> dict[str, object]:
    data = scan(whl).to_json()
    return {
        "version": data["lmcache_version"],
        "artifact": whl.name,
        "sha256": hashlib.sha256(whl.read_bytes()).hexdigest(),
        "size": whl.stat().st_size,
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


def test_one_release_s_file_answers_as_the_whole_matrix_does() -> None:
    """The fast path (index + one release's file, no model of the matrix) says what the matrix
    model says of every shipped release."""
    from lmcache_compat.upstream.matrix import load_matrix
    from lmcache_compat.upstream.shipped import release_index, row_for_sha256, scan_json_of

    matrix = load_matrix()
    for entry in release_index()["releases"]:
        row = row_for_sha256(entry["sha256"])
        assert row is not None and row["version"] == entry["version"]
        expected = matrix.row(entry["version"]).scan_json("wheel x")
        assert scan_json_of(row, "wheel x") == expected
        assert list(scan_json_of(row, "wheel x")) == list(expected)
    assert row_for_sha256("0" * 64) is None


def _installed_like(root: Path, files: dict[str, str], version: str) -> Path:
    """A site-packages-like directory: the package and its dist-info, as an installer lays out."""
    make_tree(root, files)
    info = root / f"lmcache-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_bytes(metadata("lmcache", version))
    return root


def test_a_row_is_the_scan_of_its_files(tmp_path: Path) -> None:
    """ScanResult.from_row (the installed release answered from its row) says what reading
    the same files says: the JSON, the capabilities and what they cannot decide."""
    from lmcache_compat.scan.targets import open_source
    from lmcache_compat.upstream.matrix import ReleaseRow
    from lmcache_compat.upstream.scanner import ScanResult

    whl = make_wheel(tmp_path / "lmcache-0.3.10.post2-py3-none-any.whl", {V1: ADAPTER_0_3_10_POST2})
    read = scan(whl)
    row = ReleaseRow.from_scan(read.to_json(), artifact=whl.name, sha256="0" * 64)
    with open_source(whl) as tree:
        answered = ScanResult.from_row(row, tree)
    assert answered.to_json() == read.to_json()
    assert answered.capabilities == read.capabilities and answered.undecided == read.undecided


def test_a_tree_digest_is_its_python_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The digest of an installed tree equals its artifact's when the Python files are the
    same (whatever else lies beside them), and the scan of the installed release is then the
    row; one changed byte, and the files are read."""
    from lmcache_compat.scan.targets import open_source
    from lmcache_compat.upstream import known, shipped

    files = {"lmcache/__init__.py": "", V1: ADAPTER_0_3_10_POST2, "lmcache/v1/__init__.py": ""}
    whl = make_wheel(tmp_path / "lmcache-0.3.10.post2-py3-none-any.whl", files)
    site = _installed_like(tmp_path / "site", files, "0.3.10.post2")
    (site / "lmcache" / "data.bin").write_bytes(b"\0")  # not Python: not in the digest
    with open_source(whl) as a, open_source(site) as b:
        digest = tree_sha256(a)
        assert tree_sha256(b) == digest
    row = {**shipped.release_row("0.3.10.post2"), "tree_sha256": digest}
    monkeypatch.setattr(known, "release_row", lambda version: row)
    with open_source(site) as tree:
        assert known.shipped_row_of_tree(tree) is row
    (site / V1).write_text(ADAPTER_0_3_10_POST2 + "\n# patched\n")
    with open_source(site) as tree:
        assert tree_sha256(tree) != digest
        assert known.shipped_row_of_tree(tree) is None
