"""commands_pre of ``tox -e canary``: the newest LMCache and the newest vLLM on the index, as
they are today.

    python -m tests.tiers.canary.prepare CANARY_DIR [--lmcache X] [--vllm Y]
    [--generate-constraints]

1. **LMCache**: the newest version on PyPI's JSON API, pre-releases and dev builds included
   (``--lmcache X`` pins one). Its wheel (its sdist when it has no wheel) is downloaded into
   ``CANARY_DIR/artifacts`` and its sha256 checked against the index's; a wheel is installed
   with ``uv pip install --no-deps --target CANARY_DIR/lmcache/X`` (a few MB, no torch).
2. **vLLM**: the newest version with an x86_64 wheel, pre-releases included (``--vllm Y`` pins
   one). Its pins come from ``tests/tiers/real/constraints/vllm-Y-cpu.txt`` when the project has
   them, else they are generated the way those were (``scripts/build_vllm_constraints.py``:
   vLLM's own metadata, GPU-only packages left out, torch overridden to 2.13.0, whose CPU build
   is the one these machines have); ``--generate-constraints`` generates them even when shipped.
   They are installed into this env (``uv pip install --no-deps -r``); the torch vLLM pins is
   recorded beside the torch that ran.
3. ``CANARY_DIR/plan.json`` says what was chosen and why; ``tests/tiers/canary/test_canary.py``
reads
   it.

Network: PyPI's JSON API and files, and (only to generate pins) PyPI's simple index.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from tools import index
from tools.paths import vllm_constraints as shipped_constraints
from tools.uv_install import uv_install

ROOT = Path(__file__).resolve().parents[3]
TORCH = "2.13.0"
#: Bytes a downloaded LMCache artifact may have (LMCache wheels are a few MB).
MAX_ARTIFACT = 256 * 1024**2


def _live_files(files: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [f for f in files if not f.get("yanked")]


def newest(
    releases: dict[str, list[dict[str, Any]]], wanted: str | None, usable: Any
) -> tuple[str, list[dict[str, Any]]]:
    """The newest version (pre-releases and dev builds included) whose live files satisfy
    ``usable``, or ``wanted`` when given."""
    versions: list[tuple[Version, str]] = []
    for raw in releases:
        try:
            versions.append((Version(raw), raw))
        except InvalidVersion:
            continue  # the index holds it, PEP 440 does not: never the newest
    for parsed, raw in sorted(versions, reverse=True):
        if wanted is not None and parsed != Version(wanted):
            continue
        live = _live_files(releases[raw])
        if usable(live):
            return raw, live
        if wanted is not None:
            raise SystemExit(f"{raw} has no usable file on the index")
    raise SystemExit(f"no usable release{f' {wanted}' if wanted else ''} on the index")


def _is_x86_wheel(f: dict[str, Any]) -> bool:
    name = str(f["filename"])
    return name.endswith(".whl") and ("x86_64" in name or name.endswith("-any.whl"))


def _installable_here(f: dict[str, Any]) -> bool:
    """A wheel whose tags this interpreter accepts (LMCache ships one wheel per CPython)."""
    from packaging.tags import sys_tags
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename

    try:
        _, _, _, tags = parse_wheel_filename(str(f["filename"]))
    except InvalidWheelFilename:
        return False
    return not tags.isdisjoint(set(sys_tags()))


def pick_artifact(files: list[dict[str, Any]]) -> dict[str, Any]:
    """A wheel this interpreter can install first, else the sdist."""
    wheels = [f for f in files if _installable_here(f)]
    sdists = [f for f in files if f["packagetype"] == "sdist"]
    if not wheels and not sdists:
        raise SystemExit("no wheel and no sdist")
    return (wheels or sdists)[0]


def download(f: dict[str, Any], dest: Path) -> Path:
    """The file, sha256-checked against the index (kept when already there and equal)."""
    dest.mkdir(parents=True, exist_ok=True)
    return index.download(f, dest, max_bytes=MAX_ARTIFACT)


def vllm_constraints(version: str, out_dir: Path, generate: bool) -> tuple[Path, bool]:
    shipped = shipped_constraints(version)
    if shipped.exists() and not generate:
        return shipped, False
    out_dir.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "build_vllm_constraints.py"),
            version,
            "--torch",
            TORCH,
            "--out-dir",
            str(out_dir),
        ],
        check=True,
    )
    return out_dir / f"vllm-{version}-cpu.txt", True


def torch_pin() -> str | None:
    from packaging.requirements import Requirement

    for line in metadata.requires("vllm") or ():
        req = Requirement(line)
        if req.name == "torch" and (req.marker is None or req.marker.evaluate({"extra": ""})):
            return str(req.specifier) or None
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("canary_dir", type=Path)
    parser.add_argument(
        "--lmcache", default=os.environ.get("LMCACHE_COMPAT_CANARY_LMCACHE") or None
    )
    parser.add_argument("--vllm", default=os.environ.get("LMCACHE_COMPAT_CANARY_VLLM") or None)
    parser.add_argument(
        "--generate-constraints",
        action="store_true",
        default=bool(os.environ.get("LMCACHE_COMPAT_CANARY_GENERATE")),
    )
    args = parser.parse_args(argv)
    if not os.environ.get("UV_FIND_LINKS"):
        raise SystemExit("UV_FIND_LINKS is unset: uv would download a CUDA build of torch")
    out: Path = args.canary_dir.resolve()
    out.mkdir(parents=True, exist_ok=True)
    plan: dict[str, Any] = {"timings": {}}

    start = time.perf_counter()
    lm_version, lm_files = newest(index.releases("lmcache"), args.lmcache, bool)
    artifact = pick_artifact(lm_files)
    path = download(artifact, out / "artifacts")
    target = None
    if path.name.endswith(".whl"):
        target = out / "lmcache" / lm_version
        if not (target / f"lmcache-{lm_version}.dist-info").is_dir():
            shutil.rmtree(target, ignore_errors=True)
            uv_install(str(path), target=target, compile_bytecode=False)
    plan["lmcache"] = {
        "version": lm_version,
        "chosen": "pinned" if args.lmcache else "newest on the index (pre/dev included)",
        "artifact": str(path),
        "sha256": artifact["hashes"]["sha256"],
        "upload_time": artifact.get("upload-time"),
        "target": str(target) if target else None,
    }
    plan["timings"]["lmcache"] = round(time.perf_counter() - start, 1)
    print(f"canary: LMCache {lm_version} ({path.name})")

    start = time.perf_counter()
    vllm_version, _ = newest(
        index.releases("vllm"), args.vllm, lambda fs: any(_is_x86_wheel(f) for f in fs)
    )
    constraints, generated = vllm_constraints(
        vllm_version, out / "constraints", args.generate_constraints
    )
    uv_install(requirements=constraints)
    installed_torch = metadata.version("torch")
    if metadata.version("vllm") != vllm_version:
        raise SystemExit(f"installed vLLM {metadata.version('vllm')}, wanted {vllm_version}")
    if installed_torch != f"{TORCH}+cpu":
        raise SystemExit(f"installed torch {installed_torch}, not {TORCH}'s CPU build")
    pin = torch_pin()
    plan["vllm"] = {
        "version": vllm_version,
        "chosen": "pinned" if args.vllm else "newest on the index with an x86_64 wheel",
        "constraints": str(constraints),
        "constraints_generated": generated,
        "torch_pin": pin,
        "torch": installed_torch,
        "torch_note": (
            None
            if pin is not None and Version(TORCH) in SpecifierSet(pin)
            else f"vLLM {vllm_version} pins torch{pin or ' (unpinned)'}; this machine has only "
            f"torch {TORCH}'s CPU build, so the canary ran on it"
        ),
    }
    plan["timings"]["vllm"] = round(time.perf_counter() - start, 1)
    print(f"canary: vLLM {vllm_version} (torch {installed_torch}; vLLM pins torch{pin})")
    (out / "plan.json").write_text(json.dumps(plan, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
