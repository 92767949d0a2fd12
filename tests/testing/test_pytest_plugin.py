"""The opt-in pytest plugin, run in throw-away projects with pytester."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lmcache_compat.report.releases import select
from tests.support.archives import ADAPTER_0_3_10_POST2, ENGINE, V1, make_tree, metadata
from tools.paths import ROOT

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
import pytest
from lmcache_compat import ConnectorAdapter, probe
from lmcache_compat.testing import fail_loads, kv_events

IMPL = "LMCacheConnectorV1Impl"

def test_real_class(lmcache_release):
    cls = lmcache_release.fake(IMPL)
    assert cls.__module__ == "lmcache.integration.vllm.vllm_v1_adapter"
    assert "Fake" not in [k.__name__ for k in cls.__mro__]
    assert lmcache_release.version == VERSION and lmcache_release.installed
    assert lmcache_release.has("kv_events") and not lmcache_release.has("register_kv_caches")

def test_a_double_of_the_real_class(lmcache_release):
    real = lmcache_release.fake(IMPL)
    engine = lmcache_release.engine(IMPL)
    assert isinstance(engine, real) and type(engine).__module__ == real.__module__
    assert probe(engine) == probe(real)
    assert kv_events(engine, ["e"]).visible and fail_loads(engine, {1}).visible
    adapter = ConnectorAdapter(engine)
    assert list(adapter.get_kv_events()) == ["e"]
    adapter.wait_for_save()
    assert adapter.get_block_ids_with_load_errors() == {1}
    names = [c.name for c in engine.calls]
    assert names == ["get_kv_events", "wait_for_save", "get_block_ids_with_load_errors"]
    del engine, adapter  # the real __del__ never runs on a double

def test_not_importable_here(lmcache_release):
    lmcache_release.engine("LMCacheEngine")
"""

#: The installed tree: 0.3.10.post2's connector (with a ``__del__`` that would fail on an
#: instance whose real ``__init__`` never ran) and an engine module that cannot import here.
DEL = "\n    def __del__(self):\n        raise RuntimeError('real __del__ ran')\n"


def _installed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, version: str, extra: str = ""
) -> None:
    site = make_tree(
        tmp_path / "site",
        {
            V1: ADAPTER_0_3_10_POST2.rstrip() + DEL + extra,
            ENGINE: "import torch_not_here\n\nclass LMCacheEngine:\n    def close(self): ...\n",
        },
    )
    dist = site / f"lmcache-{version}.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_bytes(metadata("lmcache", version))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site), str(ROOT)]))


@pytest.mark.parametrize("version", ["0.3.10.post2", "0.9.0"])
def test_installed_gives_the_real_classes_and_doubles_of_them(
    pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, version: str
) -> None:
    """With ``installed`` (the default) ``fake(name)`` is the installed release's own class,
    found by lmcache_compat.upstream.resolve (here an LMCache-shaped tree on the path), and
    ``engine(name)`` a double of it read from the installed files: also for a release the
    shipped data does not know (0.9.0, published after it)."""
    _installed(tmp_path, monkeypatch, version)
    pytester.makepyfile(test_a=f"VERSION = {version!r}\n" + INSTALLED_TESTS)
    result = pytester.runpytest_subprocess(
        "-p", PLUGIN, "-rs", "-W", "error::pytest.PytestUnraisableExceptionWarning"
    )
    result.assert_outcomes(passed=2, skipped=1)
    result.stdout.fnmatch_lines(
        [
            f"*LMCache {version}'s LMCacheEngine does not import here: "
            "ModuleNotFoundError: *torch_not_here*"
        ]
    )
    assert "real __del__ ran" not in result.stdout.str() + result.stderr.str()


def test_installed_reads_the_installed_files_not_the_shipped_row(
    pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A patched 0.3.10.post2 with ``register_kv_caches``: the doubles have the installed
    method (the shipped row says 0.3.10.post2 has none)."""
    method = "\n    def register_kv_caches(self, kv_caches) -> None:\n        pass\n"
    _installed(tmp_path, monkeypatch, "0.3.10.post2", method)
    pytester.makepyfile(
        test_a="""
from lmcache_compat import ConnectorAdapter

def test_patched(lmcache_release):
    engine = lmcache_release.engine("LMCacheConnectorV1Impl")
    assert lmcache_release.has("register_kv_caches")
    ConnectorAdapter(engine).register_kv_caches({"layer.0": "kv"})
    assert [(c.name, c.args, dict(c.kwargs)) for c in engine.calls] == [
        ("register_kv_caches", (), {"kv_caches": {"layer.0": "kv"}})
    ]
"""
    )
    result = pytester.runpytest_subprocess("-p", PLUGIN)
    result.assert_outcomes(passed=1)


def test_installed_files_that_cannot_be_read_are_one_usage_line(
    pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """LMCache's metadata is installed but its package is not (a broken install): one usage
    line naming it, no traceback."""
    site = tmp_path / "site"
    dist = site / "lmcache-0.5.6.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_bytes(metadata("lmcache", "0.5.6"))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site), str(ROOT)]))
    pytester.makepyfile(test_a="def test_x(lmcache_release): pass\n")
    result = pytester.runpytest_subprocess("-p", PLUGIN)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--lmcache-release=installed: *lmcache*"])
    assert "Traceback" not in result.stderr.str()
