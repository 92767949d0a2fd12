"""Build exact pins with which an LMCache release's multi-process (ZMQ) server starts on CPU.

For each LMCache release named on the command line this reads the release's own wheel metadata
(``Requires-Dist``, with its bounds and markers, evaluated for CPython 3.11 on x86_64 Linux),
drops the GPU-only packages (``cupy*``, ``nixl*``, ``cufile*``, ``cuda-*``, ``nvidia-*``, ...)
and the requirements that only an extra asks for, optionally prunes packages that the server
demonstrably does not import (see ``PRUNED``), pins torch to the CPU build, and resolves the rest
against PyPI with ``uv pip compile``. The result is written to
``tests/tiers/mp_server/constraints/lmcache-<version>.txt`` with a header that names every deviation
from the release's metadata. Build a venv from it with (uv, ``--no-deps``)::

    python -m tests.tiers.mp_server.venvs /tmp/lmcache-compat-mp-venvs <version>

Usage::

    python scripts/build_mp_server_constraints.py 0.5.6 0.5.7rc2 [--full] [--wheel-dir DIR]

Needs ``uv`` and ``pip`` on PATH and the network to PyPI; ``/opt/wheels`` (the CPU torch wheel)
is passed to uv as ``--find-links``.
"""

from __future__ import annotations

import argparse
import ast
import email.parser
import re
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tools.index import index_url  # noqa: E402
from tools.paths import TIERS  # noqa: E402

OUT_DIR = TIERS / "mp_server" / "constraints"

#: The machine's CPU torch build (``/opt/wheels``); replaces whatever torch the release allows.
TORCH_PIN = "torch==2.13.0+cpu"
FIND_LINKS = "/opt/wheels"

#: Names (canonical) whose distributions need an NVIDIA GPU / CUDA runtime to be of any use.
GPU_PATTERNS = (
    r"cupy(-.*)?",
    r"nixl(-.*)?",
    r"cufile(-.*)?",
    r"cuda-.*",
    r"nvidia-.*",
    r"pytorch-triton.*",
    r"triton",
    r"lmcache-rust-raw-block-io",
)

#: Packages left out by default although the release requires them. Demonstrated unused: no
#: module of any release 0.3.13 ... 0.5.7rc2 imports them except the ones named (in-process
#: engine code the MP server does not load); ``python -X importtime`` of the 0.5.6 server
#: (start, lookup, shutdown) imports none of them; and every release's server starts, serves a
#: lookup and (0.4.6 on) a CPU store/retrieve without them (tests/tiers/mp_server/survey.py).
#: ``--full`` keeps them.
PRUNED: dict[str, str] = {
    "redis": "only lmcache/v1/storage_backend/connector/redis_connector.py (in-process engine)",
    "safetensors": "only lmcache/storage_backend/serde/safe_serde.py (legacy serde, gone in 0.4.4)",
    "pytest": "a test runner; no lmcache module imports it",
    "setuptools-scm": "a build-time version tool; no lmcache module imports it",
}

#: Entry modules of the MP server whose module-level import closure must be importable.
SERVER_MODULES = ("lmcache.v1.multiprocess.server",)

#: Import name -> distribution, for the third-party modules the server's import closure names
#: (identity when absent). ``None``: a GPU-only module, stubbed in tests/tiers/mp_server/stubs.
IMPORT_TO_DIST: dict[str, str | None] = {
    "yaml": "pyyaml",
    "zmq": "pyzmq",
    "cpuinfo": "py-cpuinfo",
    "google": "google-api-core",
    "opentelemetry": "opentelemetry-api",
    "cupy": None,
    "nixl": None,
    "cufile": None,
    "cuda": None,
}

ENV: dict[str, str] = {k: str(v) for k, v in default_environment().items()}
ENV.update(
    {
        "python_version": "3.11",
        "python_full_version": "3.11.7",
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
        "sys_platform": "linux",
        "platform_system": "Linux",
        "platform_machine": "x86_64",
        "os_name": "posix",
    }
)


@dataclass
class Plan:
    version: str
    wheel: str
    kept: list[Requirement] = field(default_factory=list)
    dropped_gpu: list[str] = field(default_factory=list)
    dropped_extra: list[str] = field(default_factory=list)
    dropped_marker: list[str] = field(default_factory=list)
    pruned: list[str] = field(default_factory=list)
    torch_original: str | None = None
    #: third-party module -> lmcache modules that import it at module level (server closure)
    closure_imports: dict[str, set[str]] = field(default_factory=dict)
    added: list[str] = field(default_factory=list)
    unprovided: list[str] = field(default_factory=list)


def is_gpu(name: str) -> bool:
    canon = canonicalize_name(name)
    return any(re.fullmatch(p, canon) for p in GPU_PATTERNS)


def fetch_wheel(version: str, wheel_dir: Path) -> Path:
    found = sorted(wheel_dir.glob(f"lmcache-{version}-*.whl"))
    if not found:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(wheel_dir)]
        if Version(version).is_prerelease:
            cmd.append("--pre")
        subprocess.run([*cmd, f"lmcache=={version}"], check=True)
        found = sorted(wheel_dir.glob(f"lmcache-{version}-*.whl"))
    if not found:
        raise SystemExit(f"no wheel for lmcache=={version} in {wheel_dir}")
    return found[0]


def read_requires(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as zf:
        name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        meta = email.parser.BytesParser().parsebytes(zf.read(name))
    return list(meta.get_all("Requires-Dist") or [])


def _unconditional_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """Module-level imports outside try/if blocks (those run whenever the module is imported)."""
    return [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]


def server_import_closure(wheel: Path) -> dict[str, set[str]]:
    """Third-party top-level modules imported unconditionally at module level by the modules
    the MP server imports (followed statically through ``lmcache.*`` imports, parent packages
    included). Lazy imports inside functions and guarded ones are not counted."""
    stdlib = set(sys.stdlib_module_names) | {"__future__"}
    with zipfile.ZipFile(wheel) as zf:
        files = set(zf.namelist())

        def source(module: str) -> tuple[str, bool, str] | None:
            base = module.replace(".", "/")
            for name, is_pkg in ((f"{base}.py", False), (f"{base}/__init__.py", True)):
                if name in files:
                    return zf.read(name).decode(), is_pkg, name
            return None

        third: dict[str, set[str]] = {}
        seen: set[str] = set()
        todo = list(SERVER_MODULES)
        while todo:
            module = todo.pop()
            if module in seen:
                continue
            seen.add(module)
            parts = module.split(".")
            todo += [".".join(parts[:i]) for i in range(1, len(parts))]
            found = source(module)
            if found is None:
                continue
            text, is_pkg, filename = found
            for node in _unconditional_imports(ast.parse(text)):
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                else:
                    target = node.module or ""
                    if node.level:
                        pkg = parts if is_pkg else parts[:-1]
                        pkg = pkg[: len(pkg) - (node.level - 1)]
                        target = ".".join([*pkg, target] if target else pkg)
                    names = [target, *(f"{target}.{a.name}" for a in node.names)]
                for name in names:
                    top = name.split(".")[0]
                    if top == "lmcache":
                        if source(name) is not None:
                            todo.append(name)
                    elif top and top not in stdlib:
                        third.setdefault(top, set()).add(filename)
    return third


def plan_for(version: str, wheel: Path, *, full: bool) -> Plan:
    plan = Plan(version=version, wheel=wheel.name)
    plan.closure_imports = server_import_closure(wheel)
    for line in read_requires(wheel):
        req = Requirement(line)
        if req.marker is not None:
            if "extra" in str(req.marker):
                if not req.marker.evaluate({**ENV, "extra": ""}):
                    plan.dropped_extra.append(line)
                    continue
            elif not req.marker.evaluate(ENV):
                plan.dropped_marker.append(line)
                continue
        canon = canonicalize_name(req.name)
        if is_gpu(canon):
            plan.dropped_gpu.append(line)
            continue
        if canon in PRUNED and not full:
            plan.pruned.append(line)
            continue
        if canon == "torch":
            plan.torch_original = line
            continue
        plan.kept.append(req)
    return plan


def _provided(module: str, pins: list[str]) -> bool | None:
    dist = IMPORT_TO_DIST.get(module, module)
    if dist is None:
        return None  # GPU-only: stubbed, never installed
    names = {canonicalize_name(p.split("==")[0]) for p in pins}
    return canonicalize_name(dist) in names


def resolve(plan: Plan, exclude_newer: str | None) -> list[str]:
    pins = _compile(plan, exclude_newer)
    missing = sorted(m for m in plan.closure_imports if _provided(m, pins) is False)
    if missing:
        for module in missing:
            dist = IMPORT_TO_DIST.get(module, module) or module
            where = ", ".join(sorted(plan.closure_imports[module])[:3])
            plan.added.append(f"{dist} (imported at module level by {where}; not in Requires-Dist)")
            plan.kept.append(Requirement(dist))
        pins = _compile(plan, exclude_newer)
        plan.unprovided = [m for m in missing if not _provided(m, pins)]
    return pins


def _compile(plan: Plan, exclude_newer: str | None) -> list[str]:
    with tempfile.TemporaryDirectory() as tmp:
        req_in = Path(tmp) / "requirements.in"
        lines = [str(r) for r in plan.kept]
        if plan.torch_original is not None:
            lines.append(TORCH_PIN)
        req_in.write_text("\n".join(lines) + "\n")
        cmd = [
            "uv",
            "pip",
            "compile",
            str(req_in),
            "--python-version",
            "3.11",
            "--python-platform",
            "x86_64-manylinux_2_28",
            "--find-links",
            FIND_LINKS,
            "--index-url",
            index_url(),
            "--no-header",
            "--no-annotate",
            "--quiet",
        ]
        if exclude_newer:
            cmd += ["--exclude-newer", exclude_newer]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    pins = []
    for raw in out.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name = re.split(r"[=<>!~ ;\[]", line, maxsplit=1)[0]
        if is_gpu(name):
            note = f"{line} (transitive)"
            if note not in plan.dropped_gpu:
                plan.dropped_gpu.append(note)
            continue
        pins.append(line)
    return sorted(pins, key=lambda p: canonicalize_name(p.split("==")[0]))


def render(plan: Plan, pins: list[str], *, full: bool, exclude_newer: str | None) -> str:
    h = [
        f"# Exact pins with which the multi-process server of lmcache=={plan.version} starts on a",
        "# CPU-only machine (CPython 3.11, x86_64 Linux). Generated by",
        f"#   python scripts/build_mp_server_constraints.py {plan.version}"
        + (" --full" if full else "")
        + (f" --exclude-newer {exclude_newer}" if exclude_newer else ""),
        f"# from the Requires-Dist of {plan.wheel}, resolved against PyPI (uv pip compile).",
        "# Install: pip install --no-deps -r THIS_FILE && pip install --no-deps "
        + ("--pre " if Version(plan.version).is_prerelease else "")
        + f"lmcache=={plan.version}",
        "#",
        "# Deviations from the release's metadata:",
    ]
    if plan.torch_original is not None:
        h.append(
            f"#   torch: pinned to {TORCH_PIN} (CPU build; release asks '{plan.torch_original}')"
        )
    for line in plan.added:
        h.append(f"#   added: {line}")
    for line in plan.dropped_gpu:
        h.append(f"#   dropped (GPU-only): {line}")
    for module in plan.unprovided:
        h.append(f"#   WARNING: module-level import {module!r} is provided by no pin")
    stubbed = sorted(m for m in plan.closure_imports if IMPORT_TO_DIST.get(m, m) is None)
    for module in stubbed:
        where = ", ".join(sorted(plan.closure_imports[module]))
        h.append(
            f"#   note: {where} imports {module!r} at module level and none is installed: the"
            " server starts with the stand-ins of tests/tiers/mp_server/stubs (see its README.md)"
        )
    for line in plan.pruned:
        name = canonicalize_name(Requirement(line).name)
        h.append(f"#   pruned (the MP server never imports it): {line} -- {PRUNED[name]}")
    for line in plan.dropped_extra:
        h.append(f"#   not installed (only for an extra): {line}")
    for line in plan.dropped_marker:
        h.append(f"#   not installed (marker false on CPython 3.11 Linux): {line}")
    if len(h) == 7:
        h.append("#   none")
    return "\n".join(h) + "\n" + "\n".join(pins) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("versions", nargs="+")
    ap.add_argument("--full", action="store_true", help="keep the PRUNED packages")
    ap.add_argument("--wheel-dir", type=Path, default=Path(tempfile.gettempdir()) / "mpsrv-wheels")
    ap.add_argument("--out-dir", type=Path, default=OUT_DIR)
    ap.add_argument("--exclude-newer", help="passed to uv (RFC 3339 date) for reproducible pins")
    args = ap.parse_args(argv)
    args.wheel_dir.mkdir(parents=True, exist_ok=True)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    for version in args.versions:
        wheel = fetch_wheel(version, args.wheel_dir)
        plan = plan_for(version, wheel, full=args.full)
        pins = resolve(plan, args.exclude_newer)
        out = args.out_dir / f"lmcache-{version}.txt"
        out.write_text(render(plan, pins, full=args.full, exclude_newer=args.exclude_newer))
        print(f"{out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}: {len(pins)} pins")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
