"""Tests of the MP-server harness (``server.py``, ``stubs/``) and of real LMCache MP servers
started through it, with each release's own adapters (``lookup_client.py``, ``worker_probe.py``).

The tests marked ``mpserver`` run in the ``mp-servers`` tier: one venv per release
(``venvs.ensure_venv`` under ``venvs.venv_root()``, shared with ``test_mp_adapters_real.py``,
built from ``tests/tiers/mp_server/constraints/`` if missing). The rest need no LMCache and run in
the
unit tier.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.tiers.mp_server.server import (
    STUBS_DIR,
    STUBS_ENV,
    ArgSpec,
    Release,
    ServerStartError,
    first_error_line,
    inspect_release,
    mp_server,
    server_argv,
)
from tests.tiers.mp_server.survey import (
    CUDA_ONLY_WORKER,
    LOOKUP_CLIENT,
    WORKER_PROBE,
    run_json,
    transfer_flags,
)
from tests.tiers.mp_server.venvs import ensure_venv, releases, venv_root

RELEASES = releases()


def _release(args: dict[str, ArgSpec]) -> Release:
    return Release(
        python=Path(sys.executable),
        version="0.0.0",
        site_packages=Path("/nonexistent"),
        server_args=args,
        http_args=args,
        missing_gpu_modules=(),
    )


def _flags(*flags: str) -> dict[str, ArgSpec]:
    return {f: ArgSpec((f,)) for f in flags}


# --- no LMCache needed ----------------------------------------------------------------------


def test_argv_0_3_13_style_release() -> None:
    args = _flags("--host", "--port", "--chunk-size", "--cpu-buffer-size", "--disable-lazy-alloc")
    argv = server_argv(_release(args), port=5555, l1_size_gb=1.0)
    assert argv == [
        "lmcache.v1.multiprocess.server",
        "--host",
        "127.0.0.1",
        "--port",
        "5555",
        "--chunk-size",
        "256",
        "--cpu-buffer-size",
        "1",
        "--disable-lazy-alloc",
    ]


def test_argv_0_5_style_release() -> None:
    args = _flags("--host", "--port", "--chunk-size", "--l1-size-gb", "--eviction-policy")
    args["--l1-use-lazy"] = ArgSpec(("--l1-use-lazy",), action="argparse.BooleanOptionalAction")
    args["--disable-metrics"] = ArgSpec(("--disable-metrics",), action="store_true")
    args["--prometheus-port"] = ArgSpec(("--prometheus-port",), default=9090)
    argv = server_argv(_release(args), port=6000, metrics_port=6001, l1_size_gb=0.5)
    assert argv[1:] == [
        "--host",
        "127.0.0.1",
        "--port",
        "6000",
        "--chunk-size",
        "256",
        "--l1-size-gb",
        "0.5",
        "--eviction-policy",
        "LRU",
        "--no-l1-use-lazy",
        "--disable-metrics",
        "--prometheus-port",
        "6001",
    ]


def test_argv_rejects_flags_the_release_lacks() -> None:
    with pytest.raises(ValueError, match="--supported-transfer-mode"):
        server_argv(
            _release(_flags("--host", "--port", "--chunk-size")),
            port=1,
            extra_args=["--supported-transfer-mode", "auto"],
        )


def test_first_error_line() -> None:
    log = (
        "INFO starting\nTraceback (most recent call last):\n"
        '  File "x.py", line 1, in <module>\n    import cupy\n'
        "ModuleNotFoundError: No module named 'cupy'\n"
    )
    assert first_error_line(log) == "ModuleNotFoundError: No module named 'cupy'"
    assert first_error_line("usage: s [-h]\ns: error: unrecognized arguments: --x\n") == (
        "s: error: unrecognized arguments: --x"
    )


def test_cupy_stub_only_when_asked() -> None:
    import importlib.util

    if importlib.util.find_spec("cupy") is not None:
        pytest.skip("a real cupy is installed here")
    code = (
        "import importlib.util as u\n"
        "print(u.find_spec('cupy') is not None)\n"
        "if u.find_spec('cupy'):\n"
        "    import cupy\n"
        "    try:\n"
        "        cupy.cuda.ExternalStream(0)\n"
        "    except RuntimeError as e:\n"
        "        print('raised', 'stub' in str(e))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(STUBS_DIR)}
    for wanted, expected in (("", "False"), ("cupy", "True\nraised True")):
        env[STUBS_ENV] = wanted
        proc = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
        )
        assert proc.stdout.strip() == expected
        assert ("lmcache-compat stub: cupy" in proc.stderr) == bool(wanted)


# --- real releases --------------------------------------------------------------------------


def _python(version: str) -> Path:
    return ensure_venv(version, venv_root())


@pytest.mark.mpserver
@pytest.mark.real
@pytest.mark.parametrize("version", RELEASES)
def test_server_starts_serves_lookup_and_stops(version: str, tmp_path: Path) -> None:
    python = _python(version)
    with mp_server(python, tmp_path) as server:
        assert server.release.version == version
        assert server.listening()
        assert {addr for addr, _ in server.listening()} == {"127.0.0.1"}
        result = run_json(python, LOOKUP_CLIENT, server.url, server.client_env())
        assert result["ok"], json.dumps(result)
        assert result["lookup_result"] == 0  # nothing stored: a real round trip, zero hits
        assert result["server_chunk_size"] == 256
        pid, port = server.pid, server.port
    assert not Path(f"/proc/{pid}").exists()
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", port)) != 0


@pytest.mark.mpserver
@pytest.mark.real
@pytest.mark.parametrize("version", RELEASES)
def test_gpu_free_start_needs_stand_ins_only_where_expected(version: str, tmp_path: Path) -> None:
    python = _python(version)
    release = inspect_release(python)
    if not release.missing_gpu_modules:
        return
    with pytest.raises(ServerStartError) as info, mp_server(release, tmp_path, stubs="never"):
        pass
    assert info.value.first_error


@pytest.mark.mpserver
@pytest.mark.real
@pytest.mark.parametrize("version", RELEASES)
def test_worker_cpu_store_lookup_retrieve(version: str, tmp_path: Path) -> None:
    python = _python(version)
    release = inspect_release(python)
    flags = transfer_flags(release)
    with mp_server(release, tmp_path, extra_args=flags or ()) as server:
        result = run_json(python, WORKER_PROBE, server.url, server.client_env())
    if flags is None:  # no CPU transfer mode: the release's own worker shares KV by CUDA IPC
        kind, _, message = result.get("error", "").partition(": ")
        assert not result["ok"] and (kind, message) in CUDA_ONLY_WORKER, json.dumps(result)
        return
    assert result["ok"], json.dumps(result)
    assert result["lookup_hit_tokens"] == 512
