"""The real-import checks beside real vLLM (the ``grid-vllm0.32.0`` and ``grid-vllm0.33.0`` tiers)
+ torch 2.13.0 (CPU) + every LMCache wheel release.

Each release is installed with ``--no-deps --target`` and imported in its own process beside
this environment's vLLM. For each release whose modules import, ``probe()`` on the real
``LMCacheConnectorV1Impl`` must equal the static scan of the same files (and the shipped matrix
row), the live surfaces of every imported class must equal the scanned ones, and so must the
signatures of the test kit's fakes of them. Which modules import and which fail (and how) must
equal the shipped grid's import facts for this vLLM
(``lmcache_compat/upstream/data/vllm_grid.json``, recorded by the grid tier's forked children:
this is the same question asked of a fresh interpreter per release).
"""

from __future__ import annotations

import json
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

from lmcache_compat.upstream.grid import load_grid
from lmcache_compat.upstream.matrix import load_matrix
from lmcache_compat.upstream.scanner import scan
from tests.tiers.real.sweep import module_facts, present_modules, sweep
from tools.lmcache_targets import release_dir
from tools.paths import TIERS

pytestmark = pytest.mark.real

#: The vLLM releases whose tiers run this module (tox.ini).
VLLMS = ("0.32.0", "0.33.0")
MATRIX = load_matrix()
WHEEL_RELEASES = [r.version for r in MATRIX.rows if r.artifact.endswith(".whl")]
#: Releases the issues name explicitly: their adapters must import with this vLLM.
MUST_IMPORT = [
    "0.3.9",
    "0.3.9.post1",
    "0.3.10.post2",
    "0.3.12",
    "0.3.13",
    "0.3.14",
    "0.4.2",
    "0.4.4",
    "0.4.5",
    "0.4.7",
    "0.5.0",
    "0.5.5",
    "0.5.6",
    "0.5.7rc2",
]


@pytest.fixture(scope="session")
def vllm_version() -> str:
    version = metadata.version("vllm")  # PackageNotFoundError here: not a real tier's env
    assert version in VLLMS
    assert metadata.version("torch").startswith("2.13.0")
    return version


@pytest.fixture(scope="session")
def shipped(vllm_version: str) -> dict[str, dict[str, str]]:
    """The shipped grid's import facts for this vLLM."""
    tier = load_grid().tier(vllm_version)
    assert tier is not None, f"vLLM {vllm_version} is not in the shipped grid"
    return {release: dict(modules) for release, modules in tier.imports.items()}


@pytest.fixture(scope="session")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("real")


@pytest.fixture(scope="session")
def results(work: Path, vllm_version: str) -> dict[str, dict[str, Any]]:
    return sweep(WHEEL_RELEASES, work)


def test_import_outcomes_are_the_shipped_facts(
    results: dict[str, dict[str, Any]], shipped: dict[str, dict[str, str]], work: Path
) -> None:
    observed = {
        v: module_facts(
            results[v], present_modules(scan(release_dir(v, work / "releases")).modules)
        )
        for v in WHEEL_RELEASES
    }
    assert observed == shipped


def test_named_releases_import(results: dict[str, dict[str, Any]]) -> None:
    for v in MUST_IMPORT:
        assert results[v]["capabilities"] is not None, (v, results[v]["modules"])


def test_old_releases_fail_as_documented(shipped: dict[str, dict[str, str]]) -> None:
    for v in ("0.3.1", "0.3.1.post1", "0.3.2", "0.3.3", "0.3.4", "0.3.5", "0.3.6", "0.3.7"):
        assert shipped[v]["vllm_v1_adapter"] == (
            "ImportError: cannot import name 'cdiv' from 'vllm.utils'"
        ), v


@pytest.mark.parametrize("version", WHEEL_RELEASES)
def test_installed_files_scan_to_the_matrix_row(
    version: str, results: dict[str, dict[str, Any]], work: Path
) -> None:
    static = scan(release_dir(version, work / "releases")).to_json()
    row = MATRIX.row(version)
    assert static["lmcache_version"] == version
    assert static["capabilities"] == dict(row.capabilities)
    assert static["surfaces"] == {k: dict(v) for k, v in row.surfaces.items()}


@pytest.mark.parametrize("version", WHEEL_RELEASES)
def test_probe_on_the_real_class_equals_the_static_scan(
    version: str,
    results: dict[str, dict[str, Any]],
    work: Path,
    shipped: dict[str, dict[str, str]],
) -> None:
    from lmcache_compat.core.catalog import owned_by
    from lmcache_compat.core.roles import CONNECTOR, role_named
    from lmcache_compat.core.surface import class_capabilities

    result = results[version]
    scanned = scan(release_dir(version, work / "releases"))
    static = scanned.to_json()
    if shipped[version].get("vllm_v1_adapter") == "ok":
        connector_rows = {c.value for c in owned_by(CONNECTOR)}
        assert result["capabilities"] == {
            k: v for k, v in static["capabilities"].items() if k in connector_rows
        }
    else:
        # The adapter does not import beside this vLLM (the failure itself is checked by
        # test_import_outcomes_are_the_shipped_facts); the classes whose modules did import
        # are still compared below.
        assert result["capabilities"] is None, (version, result["modules"])
    for cls, live_caps in result.get("class_capabilities", {}).items():
        role = role_named(cls)
        if role is None:
            continue
        caps = class_capabilities(role, scanned.classes[cls])
        assert live_caps == {c.value: c in caps for c in owned_by(role)}, (version, cls)
    if shipped[version].get("vllm_v1_adapter") == "ok":
        assert result["classes"], version
    for cls, live in result["classes"].items():
        assert live == static["surfaces"][cls], (version, cls)


@pytest.mark.parametrize("version", WHEEL_RELEASES)
def test_the_fakes_have_the_real_signatures(
    version: str, results: dict[str, dict[str, Any]]
) -> None:
    """Every class of the release that imports here: its ``lmcache_compat.testing`` fake has
    the real class's members and signatures (introspect.fake_mismatches says what is compared)."""
    result = results[version]
    fakes = result.get("fake_signatures", {})
    assert set(fakes) == set(result["classes"]), version
    assert {cls: r["mismatches"] for cls, r in fakes.items() if r["mismatches"]} == {}
    if result["capabilities"] is not None:
        assert fakes["LMCacheConnectorV1Impl"]["compared"] > 0


#: Releases whose real MP adapter classes the issue asks to bind against.
MP_RELEASES = ["0.3.13", "0.3.14", "0.4.4", "0.4.5", "0.4.7", "0.5.0", "0.5.5", "0.5.6"]


@pytest.mark.parametrize("version", MP_RELEASES)
def test_mp_adapter_calls_bind_to_the_real_classes(
    version: str, results: dict[str, dict[str, Any]], work: Path
) -> None:
    """Constructor kwargs (fixed cases + 200 hypothesis examples), real ParallelStrategy and
    LoadStoreOp objects, and every lookup/lock/submit/register call bind to the real
    signatures (``inspect.signature(...).bind``); no server is opened."""
    import os
    import subprocess
    import sys

    from tests.tiers.real.sweep import ROOT
    from tools.lmcache_targets import quiet_env

    env = quiet_env(work / "tmp" / f"mp-{version}")
    env["PYTHONPATH"] = os.pathsep.join([str(release_dir(version, work / "releases")), str(ROOT)])
    r = subprocess.run(
        [sys.executable, str(TIERS / "real" / "mp_binding.py")],
        capture_output=True,
        text=True,
        env=env,
        cwd=str(work / "tmp" / f"mp-{version}"),
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert summary["errors"] == [], summary["errors"][0]
    assert summary["bound"] > 100, summary
    assert str(release_dir(version, work / "releases")) in summary["module"]


@pytest.mark.parametrize(
    ("version", "code", "verdict"), [("0.3.9", 1, "broken"), ("0.5.6", 0, "degraded")]
)
def test_doctor_beside_real_vllm(
    version: str, code: int, verdict: str, results: dict[str, dict[str, Any]], work: Path
) -> None:
    """doctor reads the real installed pair from metadata (the release's dist-info on the path)
    and scans the release's files: exit 1 for a known-broken pair."""
    import os
    import subprocess
    import sys

    from tests.tiers.real.sweep import ROOT
    from tools.lmcache_targets import quiet_env

    env = quiet_env(work / "tmp" / f"doctor-{version}")
    env["PYTHONPATH"] = os.pathsep.join([str(release_dir(version, work / "releases")), str(ROOT)])
    r = subprocess.run(
        [sys.executable, "-m", "lmcache_compat", "doctor", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert r.returncode == code, r.stderr
    report = json.loads(r.stdout)
    assert (report["vllm"], report["lmcache"], report["verdict"]) == (
        metadata.version("vllm"),
        version,
        verdict,
    )
    present = {c["capability"]: c["present"] for c in report["capabilities"]}
    assert present == dict(MATRIX.row(version).capabilities)
    native = [s for s in report["engine_sources"] if "vendored" in s["source"]]
    assert native and native[0]["present"] is True
    assert native[0]["imports_with_installed_lmcache"] == (version == "0.3.9")


def test_vllm_loads_the_plugin_and_finds_the_connector_by_name(work: Path) -> None:
    """The installed wheel's ``vllm.general_plugins`` entry point, loaded by vLLM itself."""
    import subprocess
    import sys

    from tools.lmcache_targets import quiet_env

    eps = [
        ep
        for ep in metadata.entry_points(group="vllm.general_plugins")
        if ep.name == "lmcache_compat"
    ]
    assert [ep.value for ep in eps] == ["lmcache_compat.vllm.plugin:register"]
    code = (
        "from vllm.plugins import load_general_plugins\n"
        "load_general_plugins()\n"
        "from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory\n"
        "cls = KVConnectorFactory.get_connector_class_by_name('LMCacheCompatConnector')\n"
        "print(cls.__module__, cls.__name__)\n"
    )
    (work / "tmp" / "plugin").mkdir(parents=True, exist_ok=True)
    env = quiet_env(work / "tmp" / "plugin")
    env.pop("PYTHONPATH", None)  # the installed wheel, as a user would have it
    r = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        cwd=str(work / "tmp" / "plugin"),
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip().splitlines()[-1] == "lmcache_compat.vllm LMCacheCompatConnector"
