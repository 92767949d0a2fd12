"""The opt-in pytest plugin, run in throw-away projects with pytester."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lmcache_compat.report.releases import select
from tests.support.archives import ADAPTER_0_3_10_POST2, V1, make_tree, metadata
from tests.support.paths import ROOT

pytest_plugins = ["pytester"]

PLUGIN = "lmcache_compat.testing.pytest_plugin"

TESTS = """
import pytest
from lmcache_compat import ConnectorAdapter
from lmcache_compat.testing import fail_loads

def test_version(lmcache_release):
    assert lmcache_release.fake("LMCacheConnectorV1Impl").__name__ == "LMCacheConnectorV1Impl"
    print("RAN", lmcache_release.version, lmcache_release.has("kv_events"))

@pytest.mark.lmcache_requires("load_error_reporting")
def test_needs_load_errors(lmcache_release):
    engine = lmcache_release.engine("LMCacheConnectorV1Impl")
    assert fail_loads(engine, {3}).visible
    assert ConnectorAdapter(engine).get_block_ids_with_load_errors() == {3}

def test_fallback(lmcache_release):
    spec = lmcache_release.fallback("kv_events")
    assert spec.fallback_result.startswith("[]")
"""


def test_not_loaded_without_opting_in(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_a="def test_x(): pass\n")
    result = pytester.runpytest_subprocess("--lmcache-release=all")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*unrecognized arguments: --lmcache-release=all*"])


def test_distinct_runs_once_per_distinct_release(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_a=TESTS)
    result = pytester.runpytest("-p", PLUGIN, "--lmcache-release=distinct", "-rs", "-s")
    versions = select("distinct")
    before = [v for v in versions if v in select("<0.3.9.post1")]
    result.assert_outcomes(passed=3 * len(versions) - len(before), skipped=len(before))
    for v in versions:
        result.stdout.fnmatch_lines([f"*RAN {v} *"])
    result.stdout.fnmatch_lines(["*LMCache 0.3.0 lacks load_error_reporting (since 0.3.9.post1)*"])


def test_a_specifier_set_and_a_conftest(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(f"pytest_plugins = [{PLUGIN!r}]\n")
    pytester.makepyfile(test_a=TESTS)
    result = pytester.runpytest("--lmcache-release=>=0.5.6", "-v")
    result.assert_outcomes(passed=6)
    result.stdout.fnmatch_lines(["*test_version?0.5.7rc2?*PASSED*"])


def test_a_bad_spec_is_one_usage_line(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_a=TESTS)
    result = pytester.runpytest("-p", PLUGIN, "--lmcache-release=0.3.8")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*closest known releases are 0.3.7 and 0.3.9*"])


def test_the_marker_needs_the_fixture(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_a="import pytest\n@pytest.mark.lmcache_requires('kv_events')\ndef test_x(): pass\n"
    )
    result = pytester.runpytest("-p", PLUGIN, "--lmcache-release=all")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*lmcache_requires needs the lmcache_release fixture*"])


def test_installed_without_lmcache_says_how_to_fix(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_a=TESTS)
    result = pytester.runpytest("-p", PLUGIN)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*LMCache is not installed*--lmcache-release=distinct*"])


INSTALLED_TESTS = """
def test_real_class(lmcache_release):
    cls = lmcache_release.fake("LMCacheConnectorV1Impl")
    assert cls.__module__ == "lmcache.integration.vllm.vllm_v1_adapter"
    assert "Fake" not in [k.__name__ for k in cls.__mro__]
    assert lmcache_release.version == "0.3.10.post2" and lmcache_release.installed
    assert lmcache_release.has("kv_events") and not lmcache_release.has("register_kv_caches")

def test_no_real_instance(lmcache_release):
    lmcache_release.engine("LMCacheConnectorV1Impl")
"""


def test_installed_gives_the_real_classes(
    pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``installed`` (the default) ``fake(name)`` is the installed release's own class,
    found by lmcache_compat.upstream.resolve (here an LMCache-shaped tree on the path)."""
    site = make_tree(tmp_path / "site", {V1: ADAPTER_0_3_10_POST2})
    dist = site / "lmcache-0.3.10.post2.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_bytes(metadata("lmcache", "0.3.10.post2"))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site), str(ROOT)]))
    pytester.makepyfile(test_a=INSTALLED_TESTS)
    result = pytester.runpytest_subprocess("-p", PLUGIN, "-rs")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(["*LMCache 0.3.10.post2 is real here: no instance without vLLM*"])
