from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import lmcache_compat.report.doctor as doctor_mod
from lmcache_compat import __version__
from lmcache_compat.report.cli import main


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lmcache_compat", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
    )


def test_doctor_runs_as_a_module_and_as_json() -> None:
    r = _run("doctor", "-v")  # -v: the capability table without LMCache too
    assert r.returncode == 0, r.stderr
    assert "lmcache-compat doctor" in r.stdout
    assert "load_error_reporting" in r.stdout
    assert "nothing to judge" in r.stdout and "Next:" in r.stdout
    j = _run("doctor", "--json")
    assert j.returncode == 0
    report = json.loads(j.stdout)
    assert report["lmcache_compat"] == __version__
    assert {c["capability"] for c in report["capabilities"]} >= {"kv_events", "shutdown"}
    assert report["verdict"] in ("ok", "degraded", "unknown", "broken")
    assert report["config"]["checked"] is False  # no LMCache in the unit tier


def test_doctor_without_lmcache_or_vllm(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(doctor_mod, "installed_version", lambda name: None)
    monkeypatch.setattr(doctor_mod, "installed_lmcache_version", lambda: None)
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "LMCache         not installed" in out
    assert "vLLM            not installed" in out
    assert "LMCache is not installed" in out


def test_doctor_with_an_old_release(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from packaging.version import Version

    monkeypatch.setattr(
        doctor_mod,
        "installed_version",
        lambda name: {"lmcache": "0.3.9", "vllm": "0.32.0"}.get(name),
    )
    monkeypatch.setattr(doctor_mod, "installed_lmcache_version", lambda: Version("0.3.9"))
    assert main(["doctor", "--json"]) == 1  # a known-broken pair
    report = json.loads(capsys.readouterr().out)
    exp = {c["capability"]: c["expected"] for c in report["capabilities"]}
    assert exp["inference_info"] == "yes"
    assert exp["load_error_reporting"] == "no"
    assert report["vllm"] == "0.32.0"
    assert report["verdict"] == "broken"
    keys = {i["key"] for i in report["issues"]}
    assert {"measured-events", "measured-step"} <= keys  # the shipped grid measured this pair
    assert any("could not scan" in n for n in report["notes"])  # metadata faked, no files
    assert main(["doctor"]) == 1
    out = capsys.readouterr().out
    assert "KV load failures cannot be detected" in out
    assert "BROKEN" in out and "KV cache events are not delivered: AttributeError" in out


def test_doctor_offers_the_upgrade_that_fixes_a_measured_pair() -> None:
    from lmcache_compat.upstream.known_issues import verdict

    issues = verdict("0.32.0", "0.3.9").issues
    events = next(i for i in issues if i.key == "measured-events")
    # vLLM's connector cannot be built over 0.5.7rc2 (the adapter moved), so the upgrade
    # offered stops before it
    assert "upgrade LMCache to >= 0.3.10.post2, < 0.5.7rc2" in [str(f) for f in events.fixes]
    assert "use the lmcache-compat connector" in [str(f) for f in events.fixes]


def test_doctor_says_use_the_mp_connector_where_vllms_breaks() -> None:
    """vLLM 0.32.0's MP connector was measured broken over LMCache 0.3.13 (its module imports
    a name that release lacks); ours got as far as the release's own adapter there."""
    from lmcache_compat.upstream.known_issues import verdict

    issues = verdict("0.32.0", "0.3.13").issues
    mp = next(i for i in issues if i.key == "measured-mp-builds")
    assert mp.connector == "vllm-mp" and mp.severity == "broken"
    # ours stopped where the release's adapter needs a running server (n/a): said as such
    assert [str(f) for f in mp.fixes] == [
        "use LMCacheCompatMPConnector (bound over this release's adapters; not yet built "
        "against a server beside this vLLM)"
    ]


def test_doctor_with_garbage_metadata(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from lmcache_compat.errors import LMCacheVersionError

    def bad() -> None:
        raise LMCacheVersionError(
            "installed lmcache distribution: 'banana' is not a PEP 440 version"
        )

    monkeypatch.setattr(
        doctor_mod,
        "installed_version",
        lambda name: "banana" if name == "lmcache" else None,
    )
    monkeypatch.setattr(doctor_mod, "installed_lmcache_version", bad)
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "banana" in out and "unknown" in out


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    capsys.readouterr()
    assert main(["no-such-command"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("lmcache-compat: error: ") and err.count("\n") == 1


def test_grid_command(capsys: pytest.CaptureFixture[str]) -> None:
    from lmcache_compat.upstream.grid import load_grid

    assert main(["grid", "--vllm", "0.32.0"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("vLLM 0.32.0 (torch ")
    assert "LMCacheCompatConnector: no problem measured" in out
    assert "events broken: 0.3.9 ... 0.3.9.post1" in out  # vLLM's connector on LMCache 0.3.9
    assert "MP connectors (built and bound, no server) over 0.3.13 ... 0.5.7rc2:" in out
    assert "LMCacheCompatMPConnector: builds n/a: 0.3.13 ... 0.5.7rc2" in out
    # an unmeasured vLLM leans on the measured one before it, and says so on stderr
    assert main(["grid", "--vllm", "0.25.0"]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("vLLM 0.21.0 ")
    assert "0.25.0 was not measured" in captured.err
    assert main(["grid", "--vllm", "0.1.0"]) == 3
    assert "older than every measured vLLM" in capsys.readouterr().err
    assert main(["grid", "--vllm", "banana"]) == 3
    assert main(["grid", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert list(data["vllm"]) == load_grid().versions
    assert main(["grid", "--markdown"]) == 0
    connectors, _, mp = capsys.readouterr().out.partition("MP connectors")
    assert connectors.count("\n| 0.") == len(load_grid().versions)
    assert mp.count("\n| 0.") == sum(1 for t in load_grid().tiers if t.mp)
