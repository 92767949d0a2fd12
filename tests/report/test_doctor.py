"""``doctor`` over installed pairs built in a temp site dir: a release newer than the shipped
matrix whose classes moved, files that contradict the version, an engine class that is nowhere."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lmcache_compat.report.cli import main
from tests.report.conftest import install_dist as _dist
from tests.support.archives import ADAPTER_0_3_10_POST2, V1, make_tree

MOVED = "lmcache/inprocess/integration/vllm/vllm_v1_adapter.py"
#: What vLLM's in-tree connector does (0.11 ... 0.33): import LMCache's adapter by path.
VLLM_CONNECTOR = """
class LMCacheConnectorV1:
    def __init__(self, vllm_config, role, kv_cache_config=None):
        from lmcache.integration.vllm.vllm_v1_adapter import LMCacheConnectorV1Impl
"""
VLLM_FILE = "vllm/distributed/kv_transfer/kv_connector/v1/lmcache_connector.py"


def _install_vllm(site: Path, version: str = "0.32.0") -> None:
    files = {"vllm/__init__.py": "", VLLM_FILE: VLLM_CONNECTOR}
    for member, text in files.items():
        path = site / member
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    _dist(site, "vllm", version)


def _doctor(capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any], str]:
    code = main(["doctor", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert main(["doctor"]) == code
    return code, report, capsys.readouterr().out


def test_a_release_newer_than_the_matrix_whose_class_moved(
    site: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_tree(site, {MOVED: ADAPTER_0_3_10_POST2})
    _dist(site, "lmcache", "9.9.0rc1")
    _install_vllm(site)
    code, report, text = _doctor(capsys)
    assert report["lmcache_in_matrix"]["status"] == "newer"
    assert report["lmcache_in_matrix"]["prerelease"] is True
    assert any("newer than every release in the shipped matrix" in n for n in report["notes"])
    assert "(pre-release) (newer than the shipped matrix" in text
    (own,) = [s for s in report["engine_sources"] if s["source"].startswith("LMCache")]
    assert own["module"] == "lmcache.inprocess.integration.vllm.vllm_v1_adapter"
    # vLLM's own connector imports the old path: known broken, with the fix that works
    check = report["vllm_connector_import"]
    assert check["missing"] == ["lmcache.integration.vllm.vllm_v1_adapter"]
    (issue,) = [i for i in report["issues"] if i["key"] == "vllm-connector-import-path"]
    assert issue["severity"] == "broken"
    assert "LMCacheCompatConnector" in issue["fix"]
    assert "use LMCache <= " in issue["fix"]
    assert report["verdict"] == "broken" and code == 1
    assert "MISSING in this LMCache" in text
    # text and JSON agree: every capability the JSON says is present reads "yes"
    for cap in report["capabilities"]:
        line = next(x for x in text.splitlines() if x.split()[:1] == [cap["capability"]])
        assert (" yes " in line) == bool(cap["present"]), line


def test_files_that_contradict_the_version_are_called_out(
    site: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lacking = ADAPTER_0_3_10_POST2.replace("    def get_kv_events(self): ...\n", "")
    make_tree(site, {V1: lacking})
    _dist(site, "lmcache", "0.3.10.post2")
    _, report, text = _doctor(capsys)
    (cap,) = [c for c in report["capabilities"] if c["capability"] == "kv_events"]
    assert (cap["expected"], cap["present"]) == ("yes", False)
    assert "but its files do not" in cap["note"]
    assert any("kv_events" in n and "differs" in n for n in report["notes"])
    assert "[note: its version says it should have it, but its files do not]" in text


def test_no_connector_is_recommended_that_cannot_be_built(
    site: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_tree(site, {"lmcache/other.py": "class Unrelated: ...\n"})
    _dist(site, "lmcache", "0.3.9")
    _install_vllm(site)
    code, report, _ = _doctor(capsys)
    keys = [i["key"] for i in report["issues"]]
    assert keys[0] == "compat-engine-not-found"
    assert code == 1
    for issue in report["issues"]:
        assert "lmcache-compat connector" not in issue["fix"], issue
    (own,) = [s for s in report["engine_sources"] if s["source"].startswith("LMCache")]
    assert own["present"] is False


def test_a_listed_release_is_not_called_newer(
    site: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_tree(site, {V1: ADAPTER_0_3_10_POST2})
    _dist(site, "lmcache", "0.3.10.post2")
    _, report, _ = _doctor(capsys)
    assert report["lmcache_in_matrix"] == {
        "status": "listed",
        "newest": report["lmcache_in_matrix"]["newest"],
        "prerelease": False,
    }
    assert not any("newer than" in n for n in report["notes"])


def test_two_candidates_are_named_and_only_their_capabilities_go_unknown(
    site: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The connector class is at no known path and two modules define a matching one: doctor
    names both (text and JSON), marks unknown only the capabilities that class decides, with
    the reason, and keeps every other capability (the MP and engine ones here)."""
    from tests.support.archives import ENGINE, ENGINE_0_3_10_POST2

    make_tree(
        site,
        {
            "lmcache/one/adapter.py": ADAPTER_0_3_10_POST2,
            "lmcache/two/adapter.py": ADAPTER_0_3_10_POST2,
            ENGINE: ENGINE_0_3_10_POST2,
        },
    )
    _dist(site, "lmcache", "9.9.0")
    _install_vllm(site)
    _, report, text = _doctor(capsys)
    candidates = ["lmcache.one.adapter", "lmcache.two.adapter"]
    assert report["ambiguous"] == {"LMCacheConnectorV1Impl": candidates}
    (own,) = [s for s in report["engine_sources"] if s["source"].startswith("LMCache")]
    assert own["present"] is False and own["candidates"] == candidates
    assert own["reason"]
    by_name = {c["capability"]: c for c in report["capabilities"]}
    unknown = {name for name, c in by_name.items() if c["present"] is None}
    assert "kv_events" in unknown and "get_finished" in unknown
    assert "ambiguous" in by_name["kv_events"]["unknown"]
    assert by_name["engine_lookup_id"]["present"] is not None  # the engine class decides it
    assert not any(n.startswith("mp_") for n in unknown)  # the ambiguity does not touch MP
    for module in candidates:
        assert module in text
