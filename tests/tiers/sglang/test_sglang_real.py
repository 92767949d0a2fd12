"""The sglang tier (``tox -e sglang-0.5.23``): real sglang and real LMCache releases on CPU.

* the in-process layerwise round trip through :class:`SGLangLayerwiseAdapter` on every LMCache
  release with the connector (identical tensors from the first release whose connector runs on
  CPU; before it, the CUDA failure the release really has);
* sglang's own call shapes (the keywords each sglang run passes, from the shipped grid) over
  real releases: a release the grid says breaks raises the error the grid names, one it says
  works round-trips;
* sglang's real registry (0.5.23, and 0.5.20 with stand-ins for GPU-only modules) builds the
  lmcache-compat backend from the ``sglang.srt.plugins`` entry point, which stores and then
  loads KV through real LMCache: unified MP against real MP servers, in-process on every release
  that runs it, MP against a real server; the pairs it cannot serve are refused in one line;
* doctor on the installed pair equals the grid, and imports neither sglang nor LMCache.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from packaging.version import Version

from lmcache_compat.core.catalog import Capability
from lmcache_compat.sglang.known.bind import default_mode
from lmcache_compat.sglang.known.grid import load_sglang_grid
from lmcache_compat.sglang.known.issues import CPU_IN_PROCESS_FROM
from lmcache_compat.sglang.variants import VARIANTS
from lmcache_compat.upstream.matrix import load_matrix
from tests.tiers.sglang import tier
from tools.paths import ROOT

pytestmark = [pytest.mark.sglang, pytest.mark.real]

MATRIX = load_matrix()
IN_PROCESS = [r.version for r in MATRIX.rows if r.has(Capability.SGLANG_IN_PROCESS)]
UNIFIED = [r.version for r in MATRIX.rows if r.has(Capability.SGLANG_UNIFIED_MP)]
RUNS_ON_CPU = [v for v in IN_PROCESS if Version(v) >= Version(CPU_IN_PROCESS_FROM)]
#: What the in-process connector of a release before CPU_IN_PROCESS_FROM fails on, on CPU.
CUDA_ONLY = re.compile(r"cuda|CUDA")
#: The radix variants (sglang 0.5.13 ... 0.5.20), each verified on the release it names.
RADIX_VARIANTS = [v for v in VARIANTS if v.kind == "radix"]
#: The one whose MP mode is verified too (against a real server, with the CPU layout).
RADIX = next(v for v in RADIX_VARIANTS if any(m == "mp" for m, _ in v.verified))
UNIFIED_VARIANT = next(v for v in VARIANTS if v.kind == "unified")


def _verified(variant: Any, mode: str) -> list[str]:
    return [
        r.version
        for r in MATRIX.rows
        if r.artifact.endswith(".whl") and variant.verifies(mode, r.version)
    ]


# --- the in-process adapter over every release ------------------------------------------------


LAYERWISE = "tests.tiers.sglang.layerwise_child"
REGISTRY = "tests.tiers.sglang.registry_child"


@pytest.fixture(scope="module")
def adapter_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    jobs = [tier.job(v, LAYERWISE, "adapter", lmcache=v) for v in IN_PROCESS]
    return tier.batch(jobs, tmp_path_factory.mktemp("adapter"))


@pytest.mark.parametrize("version", IN_PROCESS)
def test_the_in_process_round_trip_through_the_adapter(
    version: str, adapter_runs: dict[str, Any]
) -> None:
    run = adapter_runs[version]
    if version in RUNS_ON_CPU:
        assert run.get("identical") is True, run
        assert run["loaded"] == 64
    else:  # the release's in-process connector needs CUDA: the real error, not ours
        assert run.get("identical") is False
        assert CUDA_ONLY.search(run.get("error", "")), run


def test_the_round_trip_passes_on_the_releases_the_plan_calls_verified(
    adapter_runs: dict[str, Any],
) -> None:
    passed = sorted((v for v, r in adapter_runs.items() if r.get("identical")), key=Version)
    assert passed == RUNS_ON_CPU
    assert passed == _verified(RADIX, "in-process")


# --- sglang's own call shapes over real releases ---------------------------------------------


def _call_shapes() -> list[tuple[str, str, dict[str, str]]]:
    """(sglang run, LMCache release, the keywords that run passes the in-process connector):
    the first and last release of every span the grid binds the same."""
    grid = load_sglang_grid()
    out = []
    for run in grid.runs:
        calls = [
            c
            for m in run.integration
            for c in m["calls"]
            if c["callee"] == "LMCacheLayerwiseConnector"
        ]
        if not calls:
            continue
        spans: dict[str, list[str]] = {}
        for version in IN_PROCESS:
            mode = next(m for m in run.pairs[version]["modes"] if m["mode"] == "in-process")
            spans.setdefault(json.dumps(mode["reasons"][:1]), []).append(version)
        for members in spans.values():
            for version in dict.fromkeys((members[0], members[-1])):
                out.append((run.label, version, calls[0]["keywords"]))
    return out


SHAPES = _call_shapes()


@pytest.fixture(scope="module")
def shape_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    # runs that pass the same keywords (the same source texts) share one child per release
    distinct = {_shape_key(s): s for s in SHAPES}
    jobs = [
        tier.job(
            key,
            LAYERWISE,
            "sglang",
            lmcache=version,
            env={"SGLANG_CALL_KEYWORDS": json.dumps(keywords)},
        )
        for key, (_, version, keywords) in distinct.items()
    ]
    done = tier.batch(jobs, tmp_path_factory.mktemp("shapes"))
    return {f"{s[0]}|{s[1]}": done[_shape_key(s)] for s in SHAPES}


def _shape_key(shape: tuple[str, str, dict[str, str]]) -> str:
    """A short name (a child's files are named by it) for a release and the keywords passed."""
    text = json.dumps([shape[1], shape[2]], sort_keys=True)
    return f"{shape[1]}-{hashlib.sha256(text.encode()).hexdigest()[:12]}"


@pytest.mark.parametrize(("run_label", "version", "keywords"), SHAPES)
def test_sglang_s_own_call_does_what_the_grid_says(
    run_label: str, version: str, keywords: dict[str, str], shape_runs: dict[str, Any]
) -> None:
    grid = load_sglang_grid()
    run = next(r for r in grid.runs if r.label == run_label)
    mode = next(m for m in run.pairs[version]["modes"] if m["mode"] == "in-process")
    result = shape_runs[f"{run_label}|{version}"]
    if "libcudart" in result.get("error", ""):  # 0.3.6's module loads CUDA: nothing to call
        assert Version(version) < Version(CPU_IN_PROCESS_FROM), result
        assert result["error"].startswith("SGLangImportError"), result
        return
    reasons = [r for r in mode["reasons"] if r.startswith("TypeError")]
    if reasons:  # the binding's error is the error the real call raises (Python words it so)
        assert _type_error(result.get("error", "")) == _type_error(reasons[0]), (reasons, result)
    elif mode["status"] == "works" and version in RUNS_ON_CPU:
        assert result.get("identical") is True, result
    else:  # works on CUDA only, or breaks on something no signature shows
        assert result.get("identical") is False, result


def _type_error(text: str) -> tuple[str, str] | None:
    """``("missing" | "unexpected", parameter)`` of a TypeError message, whether inspect's
    ("missing a required argument: 'x'") or the call's ("missing 1 required positional
    argument: 'x'")."""
    found = re.search(r"\b(missing|unexpected)\b.*'(\w+)'", text)
    return None if found is None else (found.group(1), found.group(2))


# --- sglang <= 0.5.12 through the drop-ins (lmcache_compat.sglang.legacy) ------------------


def _legacy_keywords() -> dict[str, str]:
    """The keywords the oldest sglang run with an LMCache integration passes (its
    ``GroupCoordinator`` as ``tp_group``, no ``config_file``)."""
    run = next(r for r in load_sglang_grid().runs if r.integration)
    return next(
        c["keywords"]
        for m in run.integration
        for c in m["calls"]
        if c["callee"] == "LMCacheLayerwiseConnector"
    )


@pytest.fixture(scope="module")
def legacy_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    env = {"SGLANG_CALL_KEYWORDS": json.dumps(_legacy_keywords())}
    jobs = [tier.job(v, LAYERWISE, "legacy", lmcache=v, env=env) for v in RUNS_ON_CPU]
    return tier.batch(jobs, tmp_path_factory.mktemp("legacy"))


@pytest.mark.parametrize("version", RUNS_ON_CPU)
def test_old_sglang_s_calls_round_trip_through_the_drop_ins(
    version: str, legacy_runs: dict[str, Any]
) -> None:
    run = legacy_runs[version]
    assert run.get("identical") is True, run
    assert run["connector"] == "SGLangLayerwiseAdapter"


# --- sglang's registry builds the backend -------------------------------------------------------


def _registry_job(
    mode: str, lmcache: str, sglang: str, tmp: Path, port: int | None
) -> dict[str, Any]:
    spec = {"mode": mode, "mp_port": port, "fixture": str(tier.FIXTURE), "tmp": str(tmp)}
    tmp.mkdir(parents=True, exist_ok=True)
    return tier.job(
        lmcache,
        REGISTRY,
        json.dumps(spec),
        lmcache=lmcache,
        sglang=sglang,
        env={"LMCACHE_COMPAT_SGLANG_MODE": "auto" if mode == "unified" else mode},
    )


def _registry(mode: str, lmcache: str, sglang: str, tmp: Path, port: int | None) -> dict[str, Any]:
    result: dict[str, Any] = tier.batch(
        [_registry_job(mode, lmcache, sglang, tmp / "c", port)], tmp / "driver"
    )[lmcache]
    return result


@pytest.mark.parametrize("version", _verified(UNIFIED_VARIANT, "unified-mp"))
def test_sglang_0_5_23_registry_builds_the_unified_backend(version: str, tmp_path: Path) -> None:
    assert UNIFIED_VARIANT.tested_on is not None
    with tier.server(version, tmp_path / "server", unified=True) as srv:
        run = _registry("unified", version, UNIFIED_VARIANT.tested_on, tmp_path / "c", srv.port)
    assert run.get("identical") is True, run
    assert run["connector"] == "SGLangUnifiedAdapter"
    assert run["steps"][1]["mro"][:2] == ["CompatUnifiedRadixCache", "LMCacheUnifiedRadixCache"]
    assert run["hit"] == 64


def test_the_unified_backend_refuses_a_release_without_the_unified_connector(
    tmp_path: Path,
) -> None:
    before = max((v for v in IN_PROCESS if v not in UNIFIED), key=Version)
    assert UNIFIED_VARIANT.tested_on is not None
    run = _registry("unified", before, UNIFIED_VARIANT.tested_on, tmp_path, None)
    assert run["error"].startswith("BackendRefused: lmcache-compat cannot serve sglang"), run
    assert "UnifiedLMCacheMPConnector" in run["error"] and ">= 0.5.6" in run["error"]
    assert "\n" not in run["error"]


RADIX_PAIRS = [
    (variant.name, str(variant.tested_on), version)
    for variant in RADIX_VARIANTS
    for version in _verified(variant, "in-process")
]


@pytest.fixture(scope="module")
def radix_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("radix")
    jobs = []
    for name, sglang, version in RADIX_PAIRS:
        job = _registry_job("in-process", version, sglang, root / name / version, None)
        job["name"] = f"{name}|{version}"
        jobs.append(job)
    return tier.batch(jobs, root / "driver")


def test_every_radix_variant_is_verified_on_a_real_sglang() -> None:
    for variant in RADIX_VARIANTS:
        assert variant.tested_on and _verified(variant, "in-process"), variant.name
        release = load_sglang_grid().release(variant.tested_on)
        assert release.variant == variant.name  # the release the tier installs is of it


@pytest.mark.parametrize(("variant", "sglang", "version"), RADIX_PAIRS)
def test_the_radix_backend_in_process_on_older_sglang(
    variant: str, sglang: str, version: str, radix_runs: dict[str, Any]
) -> None:
    run = radix_runs[f"{variant}|{version}"]
    assert run.get("identical") is True, run
    assert run["sglang"] == sglang and run["connector"] == "SGLangLayerwiseAdapter"
    assert run["steps"][1]["cache"] == "CompatRadixCache"


@pytest.mark.parametrize("version", _verified(RADIX, "mp"))
def test_the_radix_backend_mp_on_an_older_sglang(version: str, tmp_path: Path) -> None:
    assert RADIX.tested_on is not None
    with tier.server(version, tmp_path / "server", unified=False) as srv:
        run = _registry("mp", version, RADIX.tested_on, tmp_path / "c", srv.port)
    assert run.get("identical") is True, run
    assert run["connector"] == "SGLangMPAdapter"


def test_the_radix_backend_refuses_a_release_without_its_connectors(tmp_path: Path) -> None:
    newest = MATRIX.newest.version
    assert not MATRIX.newest.has(Capability.SGLANG_IN_PROCESS)
    assert RADIX.tested_on is not None
    run = _registry("in-process", newest, RADIX.tested_on, tmp_path, None)
    assert run["error"].startswith("BackendRefused: lmcache-compat cannot serve sglang"), run
    assert "< 0.5.7rc2" in run["error"]


# --- doctor -------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [*UNIFIED, IN_PROCESS[-2]])
def test_doctor_s_verdict_is_the_grid_s_and_imports_neither(version: str) -> None:
    from importlib import metadata

    code = (
        "import json, sys\n"
        "from lmcache_compat.report.doctor import doctor_report\n"
        "data = doctor_report().to_json()\n"
        "top = ('sglang', 'lmcache', 'torch')\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in top)\n"
        "print('RESULT: ' + json.dumps({'report': data, 'imported': bad}))\n"
    )
    result = tier.child_code(code, lmcache=version)
    assert result["imported"] == []
    report = result["report"]
    sglang = metadata.version("sglang")
    pair = load_sglang_grid().pair(sglang, version)
    assert pair is not None
    expected = default_mode(pair["modes"])
    assert expected is not None
    mine = default_mode(report["sglang_integration"]["modes"])
    assert mine == expected
    assert report["sglang_verdict"] == ("ok" if expected["status"] == "works" else "broken")


def test_the_doctor_command_exits_1_for_a_broken_pair() -> None:
    before = max((v for v in IN_PROCESS if v not in UNIFIED), key=Version)
    proc = subprocess.run(
        [sys.executable, "-m", "lmcache_compat", "doctor"],
        capture_output=True,
        text=True,
        env=tier.child_env(before),
        cwd=str(ROOT),
        check=False,
    )
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "Verdict for sglang" in proc.stdout and "BROKEN" in proc.stdout
