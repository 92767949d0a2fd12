"""Static scan of an installed LMCache release vs importing its vLLM adapter module.

Run where real vLLM + torch are installed (the real-import tox env):

    tox exec -e grid-vllm0.32.0 -- python benchmarks/bench_scan.py [--release 0.5.6]

The release is installed with ``--no-deps --target`` into a temporary directory and put on
``PYTHONPATH`` of fresh processes, so ``scan()`` finds it through ``importlib.metadata`` exactly
as an installed copy. Prints: in-process scan time, fresh-process scan time, fresh-process import
time of the module that defines ``LMCacheConnectorV1Impl`` (where the scan found it: 0.5.7 moved
it under ``lmcache.inprocess``), and the ratios (goal: scan < 100 ms and >= 50x faster than the
import).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tools.lmcache_targets import install, quiet_env  # noqa: E402


def fresh(code: str, env: dict[str, str], cwd: Path) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, env=env, cwd=cwd, capture_output=True)
    return time.perf_counter() - start


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--release", default="0.5.6")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        target = install(args.release, tmp / "releases")
        env = quiet_env(tmp / "env")
        env["PYTHONPATH"] = os.pathsep.join([str(target), str(ROOT)])

        in_process = []
        code = (
            "import time, statistics; from lmcache_compat.upstream.scanner import scan\n"
            "ts = []\n"
            f"for _ in range({args.repeat * 4}):\n"
            "    t = time.perf_counter(); r = scan(); ts.append(time.perf_counter() - t)\n"
            f"assert r.lmcache_version == {args.release!r}, r.source\n"
            "print(statistics.median(ts), r.modules['LMCacheConnectorV1Impl'])"
        )
        out = subprocess.run(
            [sys.executable, "-c", code],
            check=True,
            env=env,
            cwd=tmp,
            capture_output=True,
            text=True,
        ).stdout
        median, adapter_module = out.split()  # where this release keeps its vLLM adapter
        in_process.append(float(median))
        scan_fresh = [
            fresh("from lmcache_compat.upstream.scanner import scan; scan()", env, tmp)
            for _ in range(args.repeat)
        ]
        imports = [
            fresh(f"import {adapter_module}", env, tmp) for _ in range(max(3, args.repeat // 2))
        ]
    scan_ms = in_process[0] * 1000
    fresh_ms = statistics.median(scan_fresh) * 1000
    import_ms = statistics.median(imports) * 1000
    print(f"LMCache {args.release}, Python {sys.version.split()[0]}")
    print(
        f"scan() of the installed release, in process (median): {scan_ms:8.1f} ms  (goal < 100 ms)"
    )
    print(f"scan in a fresh process (python -c ..., median):       {fresh_ms:8.1f} ms")
    print(f"import {adapter_module} in a fresh process (median):")
    print(f"{'':<55}{import_ms:8.1f} ms")
    print(f"import / in-process scan:  {import_ms / scan_ms:7.1f}x  (goal >= 50x)")
    print(f"import / fresh-process scan: {import_ms / fresh_ms:5.1f}x")
    return 0 if scan_ms < 100 and import_ms / scan_ms >= 50 else 1


if __name__ == "__main__":
    sys.exit(main())
