"""Survey LMCache releases' MP servers on this CPU-only machine: start, measure, round-trip.

For each release venv (``<root>/<version>/bin/python``, see
``scripts/build_mp_server_constraints.py``) this:

1. starts the server with no stand-ins and records the first error line if it cannot start;
2. starts it with the stand-ins it needs (``stubs/``), and records the ready time, RSS, the
   addresses it listens on, the stand-ins it actually imported and its command line;
3. runs ``lookup_client.py`` (the release's own ``LMCacheMPSchedulerAdapter``, in a separate
   process without stand-ins) against it;
4. restarts it with the release's CPU transfer flag, if it has one (``--transfer-mode non_gpu``
   in 0.4.6, ``--supported-transfer-mode auto`` from 0.4.7), and runs ``worker_probe.py``
   (store -> lookup -> retrieve with CPU KV caches);
5. optionally (``--http``) starts the HTTP frontend and GETs ``/lmc_version``, ``/version``;
6. optionally (``--mix A:B``) runs release B's lookup client against release A's server.

One server at a time. Writes JSON lines to ``--out`` and prints a markdown table::

    python -m tests.tiers.mp_server.survey 0.5.6 0.5.7rc2 --mix 0.5.6:0.5.7rc2
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests.tiers.mp_server.server import (
    Release,
    RunningServer,
    ServerStartError,
    inspect_release,
    mp_server,
)
from tests.tiers.mp_server.venvs import venv_root

HERE = Path(__file__).resolve().parent
LOOKUP_CLIENT = HERE / "lookup_client.py"
WORKER_PROBE = HERE / "worker_probe.py"


def run_json(python: Path, script: Path, url: str, env: dict[str, str]) -> dict[str, Any]:
    """Run a probe script under ``python`` and parse the JSON it prints."""
    try:
        proc = subprocess.run(
            [str(python), str(script), url],
            capture_output=True,
            text=True,
            env=env,
            timeout=600,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": "probe timed out after 600 s"}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        return {"ok": False, "error": "no JSON output", "stderr": proc.stderr[-2000:]}
    result: dict[str, Any] = json.loads(lines[-1])
    return result


#: What registering CPU KV caches raises where the worker shares them through CUDA IPC (the
#: releases :func:`transfer_flags` finds no CPU mode in).
CUDA_ONLY_WORKER = {
    ("RuntimeError", "CUDA is not available"),  # 0.3.13, 0.4.3 ... 0.4.5
    ("ValueError", "CudaIPCWrapper only supports CUDA tensors."),  # 0.3.14 ... 0.4.2
}


def transfer_flags(release: Release) -> list[str] | None:
    """The release's own flag for a CPU (non-GPU) KV transfer path, if any."""
    if "--supported-transfer-mode" in release.server_args:
        return ["--supported-transfer-mode", "auto"]
    spec = release.server_args.get("--transfer-mode")
    if spec is not None and spec.choices and "non_gpu" in spec.choices:
        return ["--transfer-mode", "non_gpu"]
    return None


def _errors(server: RunningServer, limit: int = 5) -> list[str]:
    out = []
    for line in server.log_text().splitlines():
        if " ERROR" in line or line.startswith(("Traceback", "msgspec.", "RuntimeError")):
            out.append(line[:300])
    return out[:limit]


def survey_release(python: Path, tmp: Path, *, worker: bool = True) -> dict[str, Any]:
    release = inspect_release(python)
    row: dict[str, Any] = {"version": release.version, "needs": list(release.missing_gpu_modules)}
    if release.missing_gpu_modules:
        try:
            with mp_server(release, tmp / "bare", stubs="never", ready_timeout=120):
                row["bare_start"] = "started"
        except ServerStartError as exc:
            row["bare_start"] = "failed"
            row["bare_error"] = exc.first_error
    else:
        row["bare_start"] = "started"
    try:
        with mp_server(release, tmp / "run") as server:
            time.sleep(1.0)  # let start-up threads settle before measuring RSS
            row.update(
                started=True,
                ready_s=round(server.ready_seconds, 1),
                rss_mb=server.rss_bytes() >> 20,
                listening=server.listening(),
                stubs_used=server.stubs_used(),
                argv=server.argv[2:],
            )
            row["lookup"] = run_json(python, LOOKUP_CLIENT, server.url, server.client_env())
            row["server_errors"] = _errors(server)
    except ServerStartError as exc:
        row.update(started=False, error=exc.first_error)
        return row
    flags = transfer_flags(release)
    if worker:
        row["worker_flags"] = flags
        try:
            with mp_server(release, tmp / "worker", extra_args=flags or ()) as server:
                row["worker"] = run_json(python, WORKER_PROBE, server.url, server.client_env())
                row["worker_server_errors"] = _errors(server)
        except ServerStartError as exc:
            row["worker"] = {"ok": False, "error": f"server: {exc.first_error}"}
    return row


HTTP_PATHS = ("/lmc_version", "/version", "/healthcheck")


def http_versions(python: Path, tmp: Path) -> dict[str, Any]:
    """Start the release's HTTP frontend (``http_server``: ZMQ server + FastAPI) on loopback and
    GET its version routes."""
    out: dict[str, Any] = {}
    try:
        with mp_server(python, tmp, frontend="http") as server:
            out["http_port_flag"] = "--http-port" in server.release.http_args
            for path in HTTP_PATHS:
                url = f"http://127.0.0.1:{server.http_port}{path}"
                try:
                    with urllib.request.urlopen(url, timeout=10) as resp:
                        out[path] = f"{resp.status} {resp.read(200).decode(errors='replace')}"
                except urllib.error.HTTPError as exc:
                    out[path] = f"{exc.code}"
    except ServerStartError as exc:
        out["error"] = exc.first_error
    return out


def mix(server_py: Path, client_py: Path, tmp: Path) -> dict[str, Any]:
    """``client_py``'s release's lookup client against ``server_py``'s release's server."""
    with mp_server(server_py, tmp) as server:
        result = run_json(client_py, LOOKUP_CLIENT, server.url, server.client_env())
        result["server_version"] = server.release.version
        result["server_errors"] = _errors(server)
        return result


def _cell(value: object) -> str:
    return str(value).replace("|", "\\|")


def table(rows: Sequence[dict[str, Any]]) -> str:
    head = "| release | bare start | stand-ins used | ready s | RSS MB | lookup | worker CPU |"
    lines = [head, "|---" * 7 + "|"]
    for r in rows:
        lookup = r.get("lookup") or {}
        wk = r.get("worker") or {}
        lines.append(
            "| "
            + " | ".join(
                _cell(x)
                for x in (
                    r["version"],
                    r.get("bare_error") or r.get("bare_start"),
                    ", ".join(s.split(" -> ")[0] for s in r.get("stubs_used", [])) or "-",
                    r.get("ready_s", "-"),
                    r.get("rss_mb", "-"),
                    lookup.get("lookup_result", lookup.get("error", r.get("error"))),
                    "ok" if wk.get("ok") else (wk.get("error") or "-"),
                )
            )
            + " |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("versions", nargs="*")
    ap.add_argument("--root", type=Path, default=venv_root())
    ap.add_argument("--out", type=Path, default=None, help="append JSON lines here")
    ap.add_argument("--mix", action="append", default=[], help="SERVER:CLIENT versions")
    ap.add_argument("--no-worker", action="store_true")
    ap.add_argument("--http", action="store_true", help="also probe the HTTP frontend")
    args = ap.parse_args(argv)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="mp-survey-") as tmp_name:
        tmp = Path(tmp_name)
        for version in args.versions:
            python = args.root / version / "bin" / "python"
            row = survey_release(python, tmp / version, worker=not args.no_worker)
            if args.http and row.get("started"):
                row["http"] = http_versions(python, tmp / version / "http")
            rows.append(row)
            print(json.dumps(row), flush=True)
            if args.out:
                with args.out.open("a") as fh:
                    fh.write(json.dumps(row) + "\n")
        for pair in args.mix:
            server_v, client_v = pair.split(":")
            result = mix(
                args.root / server_v / "bin" / "python",
                args.root / client_v / "bin" / "python",
                tmp / f"mix-{server_v}-{client_v}",
            )
            result["mix"] = pair
            print(json.dumps(result), flush=True)
            if args.out:
                with args.out.open("a") as fh:
                    fh.write(json.dumps(result) + "\n")
    if rows:
        print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
