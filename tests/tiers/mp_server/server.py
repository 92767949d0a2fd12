"""Start and stop a real LMCache multi-process (ZMQ) server in a subprocess, for tests.

The server runs under the Python of a venv that has one LMCache release installed (see
``scripts/build_mp_server_constraints.py``); this module never imports LMCache itself. Its
command line comes from the release's own argparse arguments, read statically (``ast``) from
the installed ``lmcache/v1/multiprocess/server.py`` and the ``add_*_args`` helpers it calls, so
each release gets only flags it knows:

- ``--host 127.0.0.1 --port <free port> --chunk-size 256``;
- the L1 size: ``--cpu-buffer-size`` (0.3.13) or ``--l1-size-gb`` (0.3.14 on), plus
  ``--eviction-policy LRU`` where it exists;
- metrics off and kept on loopback: ``--disable-prometheus`` (0.3.15 ... 0.4.2) or
  ``--disable-metrics`` (0.4.3 on), and ``--prometheus-port <free port>`` where it exists (the
  Prometheus exporter binds 0.0.0.0).

Usage telemetry is turned off with ``LMCACHE_TRACK_USAGE=false`` (read by every release) and
``DO_NOT_TRACK=1`` (0.5.2 on), and pointed at a dead loopback URL in case a release ignores both.
HOME, XDG and library cache directories and TMPDIR all live inside the caller's tmp dir.

Ready = the log line ``LMCache cache server is running...`` (logged by every release after its
request server has bound) and a TCP connect to the port succeeds, polled in a bounded loop.
Stopping: SIGTERM, then SIGKILL to the server's process group after ``stop_timeout``; always.

Releases whose server imports ``cupy`` at module level (0.3.13 ... 0.4.5) cannot start without
a GPU stack: with ``stubs="auto"`` the stub packages in ``tests/tiers/mp_server/stubs/`` are put
first
on the server subprocess's PYTHONPATH (only there). See ``stubs/README.md``.
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Literal

from lmcache_compat.scan.modules import Index
from lmcache_compat.scan.targets import open_source
from lmcache_compat.upstream import locations as loc
from lmcache_compat.upstream.mp_flags_scan import scan_mp_flags

__all__ = [
    "READY_MARKER",
    "ArgSpec",
    "Release",
    "RunningServer",
    "ServerStartError",
    "first_error_line",
    "free_port",
    "inspect_release",
    "mp_server",
    "server_argv",
]

HERE = Path(__file__).resolve().parent
STUBS_DIR = HERE / "stubs"
#: The variable that tells ``stubs/sitecustomize.py`` which stand-ins to offer.
STUBS_ENV = "LMCACHE_COMPAT_STUBS"
READY_MARKER = "LMCache cache server is running..."
HTTP_READY_MARKER = "Application startup complete."
#: The MP commands this tier starts, as lmcache_compat.upstream.locations names them.
SERVER, HTTP_SERVER = "server", "http_server"
assert {SERVER, HTTP_SERVER} <= {c.key for c in loc.MP_COMMANDS}
SERVER_MODULE = loc.MP_SERVER_ARGS.modules[0]
HTTP_SERVER_MODULE = loc.MP_HTTP_SERVER_ARGS.modules[0]
#: GPU-only modules an MP server may need at import time; ``stubs/`` has a stand-in for each.
STUBBABLE = ("cupy", "lmcache.c_ops", "torch.cuda.cudart", "torch.cuda.init")
#: Shared libraries that only a CUDA build of torch (or the CUDA toolkit) provides.
CUDA_LIBS = (b"libcudart.so", b"libtorch_cuda.so", b"libc10_cuda.so")
STUB_ANNOUNCE = "lmcache-compat stub: "
#: Where telemetry would go if a release ignored the opt-outs: the discard port on loopback.
DEAD_URL = "http://127.0.0.1:9/"

Frontend = Literal["zmq", "http"]


@dataclass(frozen=True)
class ArgSpec:
    """One ``add_argument`` call found statically in a release's source."""

    flags: tuple[str, ...]
    action: str | None = None
    default: object = None
    required: bool = False
    choices: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Release:
    """An installed LMCache release, described without importing it."""

    python: Path
    version: str
    site_packages: Path
    server_args: Mapping[str, ArgSpec]
    http_args: Mapping[str, ArgSpec]
    #: GPU-only modules the server imports at module level that the venv lacks.
    missing_gpu_modules: tuple[str, ...]

    def args_for(self, frontend: Frontend) -> Mapping[str, ArgSpec]:
        return self.server_args if frontend == "zmq" else self.http_args


class ServerStartError(RuntimeError):
    """The server exited, or did not become ready in time."""

    def __init__(self, message: str, *, log: str, argv: Sequence[str]) -> None:
        self.log = log
        self.argv = list(argv)
        self.first_error = first_error_line(log)
        super().__init__(f"{message}: {self.first_error or '(no error line)'}")


@dataclass
class RunningServer:
    """A started server; valid inside the :func:`mp_server` context."""

    release: Release
    host: str
    port: int
    pid: int
    argv: list[str]
    env: dict[str, str]
    log_path: Path
    ready_seconds: float
    #: stand-ins offered to the server (``stubs/``); see :meth:`stubs_used` for those imported
    stubs: tuple[str, ...]
    frontend: Frontend
    http_port: int | None = None
    extra: dict[str, object] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"tcp://{self.host}:{self.port}"

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def client_env(self) -> dict[str, str]:
        """The environment of a client process run under the release's venv: the server's
        (telemetry off, caches in the tmp dir) without its stand-ins, with this checkout on
        ``PYTHONPATH`` (``lmcache_compat`` and ``tests.tiers.mp_server.release_side`` importable):
        the client gets nothing injected."""
        env = {k: v for k, v in self.env.items() if k not in ("PYTHONPATH", STUBS_ENV)}
        env["PYTHONPATH"] = str(HERE.parents[2])
        return env

    def stubs_used(self) -> list[str]:
        """The stand-ins the server actually imported, as announced in its log."""
        return [
            line.split(STUB_ANNOUNCE, 1)[1].strip()
            for line in self.log_text().splitlines()
            if line.startswith(STUB_ANNOUNCE)
        ]

    def rss_bytes(self) -> int:
        """Resident set size of the server and its descendants, from /proc."""
        return sum(_rss(p) for p in _process_tree(self.pid))

    def listening(self) -> list[tuple[str, int]]:
        """TCP (address, port) pairs the server's process tree listens on."""
        return sorted({a for p in _process_tree(self.pid) for a in _listening(p)})


# --- static reading of a release's arguments ---------------------------------------------


def _arg_spec(record: Mapping[str, Any]) -> ArgSpec:
    choices = record.get("choices")
    return ArgSpec(
        flags=tuple(record["options"]),
        action=record.get("action"),
        default=record.get("default"),
        required=bool(record.get("required")),
        choices=tuple(str(c) for c in choices) if isinstance(choices, (list, tuple)) else None,
    )


def read_arguments(site_packages: Path) -> dict[str, dict[str, ArgSpec]]:
    """``{command: {option string: flag}}`` for the release's MP commands (``server``,
    ``http_server``...), read by lmcache-compat's own MP-flag scan
    (:mod:`lmcache_compat.upstream.mp_flags_scan`, what ``config mp-flags`` reads; nothing
    imported): one reader of the flags, for the library and this tier."""
    with open_source(site_packages, "lmcache") as tree:
        commands = scan_mp_flags(Index(tree))
    out: dict[str, dict[str, ArgSpec]] = {}
    for command, records in commands.items():
        flags = out.setdefault(command, {})
        for record in records.values():
            spec = _arg_spec(record)
            for option in spec.flags:
                flags.setdefault(option, spec)
    return out


def _top_level_imports(path: Path) -> set[str]:
    """Top-level package names imported unconditionally at module level (not in try/if)."""
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    return names


def _needs_cuda_libs(ext: Path, site_packages: Path) -> bool:
    """Whether the extension links CUDA libraries that this venv's torch does not ship."""
    data = ext.read_bytes()
    torch_lib = site_packages / "torch" / "lib"
    return any(lib in data and not any(torch_lib.glob(lib.decode() + "*")) for lib in CUDA_LIBS)


def _cpu_torch(site_packages: Path) -> bool:
    return not any((site_packages / "torch" / "lib").glob("libtorch_cuda*"))


def _lazy_alloc_always_on(args: Mapping[str, ArgSpec]) -> bool:
    """``--l1-use-lazy`` as ``store_true`` with default True (0.3.14 ... 0.4.1): no way off."""
    spec = args.get("--l1-use-lazy")
    return spec is not None and spec.action == "store_true" and spec.default is True


def _missing_gpu_modules(
    site_packages: Path, server_args: Mapping[str, ArgSpec]
) -> tuple[str, ...]:
    """The stand-ins this release's server needs on a CPU-only machine (read statically)."""
    missing: list[str] = []
    mp_dir = site_packages / "lmcache" / "v1" / "multiprocess"
    imported: set[str] = set()
    for path in sorted(mp_dir.glob("*.py")):
        imported |= _top_level_imports(path)
    if "cupy" in imported and not (site_packages / "cupy").is_dir():
        missing.append("cupy")
    # The CUDA-linked c_ops extension cannot load beside a CPU torch; 0.4.6 on register their own
    # CPU fallback as lmcache.c_ops in lmcache/__init__.py, earlier ones ship
    # non_cuda_equivalents.py, which the stand-in serves as lmcache.c_ops.
    lmcache_dir = site_packages / "lmcache"
    c_ops = sorted(lmcache_dir.glob("c_ops*.so"))
    init_src = (lmcache_dir / "__init__.py").read_text() if lmcache_dir.is_dir() else ""
    if (
        c_ops
        and _needs_cuda_libs(c_ops[0], site_packages)
        and 'sys.modules["lmcache.c_ops"]' not in init_src
        and (lmcache_dir / "non_cuda_equivalents.py").is_file()
    ):
        missing.append("lmcache.c_ops")
    if _lazy_alloc_always_on(server_args) and _cpu_torch(site_packages):
        missing.append("torch.cuda.cudart")
    # run_cache_server calls torch.cuda.init() (0.3.13 ... 0.4.4), or torch_dev.init() where
    # lmcache/__init__.py falls back to torch_dev = torch.cuda without a GPU (0.4.5).
    server_py = mp_dir / "server.py"
    server_src = server_py.read_text() if server_py.is_file() else ""
    cuda_fallback = 'return torch.cuda, "cuda"' in init_src and "StubCPUDevice" not in init_src
    if _cpu_torch(site_packages) and (
        re.search(r"^    torch\.cuda\.init\(\)", server_src, re.M)
        or ("torch_dev.init()" in server_src and cuda_fallback)
    ):
        missing.append("torch.cuda.init")
    return tuple(missing)


_PROBE = (
    "import importlib.metadata as m, json, sysconfig; "
    "print(json.dumps([m.version('lmcache'), sysconfig.get_paths()['platlib']]))"
)


def inspect_release(python: Path | str) -> Release:
    """Describe the LMCache release installed for ``python`` (a venv's interpreter).

    Runs ``python`` once to read ``importlib.metadata`` and ``sysconfig`` (no LMCache code runs);
    the rest is read from the installed files.
    """
    python = Path(python)
    out = subprocess.run(
        [str(python), "-I", "-c", _PROBE], check=True, capture_output=True, text=True
    ).stdout
    version, platlib = json.loads(out)
    site = Path(platlib)
    commands = read_arguments(site)
    server_args = commands.get(SERVER, {})
    return Release(
        python=python,
        version=str(version),
        site_packages=site,
        server_args=server_args,
        http_args=commands.get(HTTP_SERVER, {}),
        missing_gpu_modules=_missing_gpu_modules(site, server_args),
    )


# --- command line ----------------------------------------------------------------------------


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _fmt(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def server_argv(
    release: Release,
    *,
    port: int,
    host: str = "127.0.0.1",
    l1_size_gb: float = 1.0,
    chunk_size: int = 256,
    metrics_port: int | None = None,
    http_port: int | None = None,
    frontend: Frontend = "zmq",
    extra_args: Sequence[str] = (),
) -> list[str]:
    """The server's argv (after ``python -m``), built from the flags this release defines."""
    args = release.args_for(frontend)
    module = SERVER_MODULE if frontend == "zmq" else HTTP_SERVER_MODULE
    if frontend == "http" and "--zmq-port" in args:
        # 0.3.x http_server: --host/--port are the HTTP side, --zmq-host/--zmq-port the ZMQ one.
        http = str(http_port or free_port(host))
        argv = [module, "--host", host, "--port", http, "--zmq-host", host, "--zmq-port", str(port)]
    else:
        argv = [module, "--host", host, "--port", str(port)]
    argv += ["--chunk-size", str(chunk_size)]
    if "--l1-size-gb" in args:
        argv += ["--l1-size-gb", _fmt(l1_size_gb)]
    elif "--cpu-buffer-size" in args:
        argv += ["--cpu-buffer-size", _fmt(l1_size_gb)]
    if "--eviction-policy" in args:
        argv += ["--eviction-policy", "LRU"]
    # Lazy L1 allocation pins host memory through CUDA (torch.cuda.cudart()): off on CPU.
    lazy = args.get("--l1-use-lazy")
    if "--disable-lazy-alloc" in args:
        argv.append("--disable-lazy-alloc")
    elif lazy is not None and "BooleanOptionalAction" in (lazy.action or ""):
        argv.append("--no-l1-use-lazy")
    if "--disable-prometheus" in args:
        argv.append("--disable-prometheus")
    if "--disable-metrics" in args:
        argv.append("--disable-metrics")
    if "--prometheus-port" in args:
        argv += ["--prometheus-port", str(metrics_port or free_port(host))]
    if frontend == "http":
        if "--http-host" in args:
            argv += ["--http-host", host]
        if "--http-port" in args:
            argv += ["--http-port", str(http_port or free_port(host))]
    argv += list(extra_args)
    unknown = [a for a in extra_args if a.startswith("--") and a.split("=")[0] not in args]
    if unknown:
        raise ValueError(f"lmcache {release.version} {module} has no {unknown}")
    return argv


def server_env(
    tmp_dir: Path, *, stubs: Sequence[str], extra_env: Mapping[str, str] | None = None
) -> dict[str, str]:
    """A minimal environment: telemetry off, every cache and temp dir inside ``tmp_dir``."""
    home = tmp_dir / "home"
    dirs = {
        "HOME": home,
        "XDG_CACHE_HOME": home / ".cache",
        "XDG_CONFIG_HOME": home / ".config",
        "TMPDIR": tmp_dir / "tmp",
        "HF_HOME": home / ".cache" / "huggingface",
        "NUMBA_CACHE_DIR": home / ".cache" / "numba",
        "TORCHINDUCTOR_CACHE_DIR": home / ".cache" / "torchinductor",
        "TRITON_CACHE_DIR": home / ".cache" / "triton",
        "PROMETHEUS_MULTIPROC_DIR": tmp_dir / "prometheus",
    }
    for d in dirs.values():
        d.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "TZ", "TERM")}
    env.update({k: str(v) for k, v in dirs.items()})
    env.update(
        {
            "LMCACHE_TRACK_USAGE": "false",
            "DO_NOT_TRACK": "1",
            "LMCACHE_USAGE_TRACK_URL": DEAD_URL,
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "PYTHONUNBUFFERED": "1",
            "PYTHONDONTWRITEBYTECODE": "1",
            "CUDA_VISIBLE_DEVICES": "",
        }
    )
    if stubs:
        env["PYTHONPATH"] = str(STUBS_DIR)
        env[STUBS_ENV] = ",".join(stubs)
    env.update(extra_env or {})
    return env


# --- the running process ---------------------------------------------------------------------


_ERROR_RE = re.compile(r"^([A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)|error:)\b.*")


def first_error_line(log: str) -> str | None:
    """The exception line that ended the first traceback in ``log`` (or an argparse error)."""
    lines = log.splitlines()
    in_tb = False
    for line in lines:
        if line.startswith("Traceback (most recent call last)"):
            in_tb = True
            continue
        if in_tb and not line.startswith((" ", "\t")) and _ERROR_RE.match(line):
            return line.strip()
        if not in_tb and line.startswith(("usage:", "error:")) and "error:" in line:
            return line.strip()
    for line in lines:
        if re.search(r"\berror: ", line) and "usage:" not in line:
            return line.strip()
    return None


def _children(pid: int) -> list[int]:
    out: list[int] = []
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError):
                text = Path(f"/proc/{pid}/task/{task}/children").read_text()
                out += [int(c) for c in text.split()]
    return out


def _process_tree(pid: int) -> list[int]:
    todo, seen = [pid], []
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.append(p)
        todo += _children(p)
    return seen


def _rss(pid: int) -> int:
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def _listening(pid: int) -> set[tuple[str, int]]:
    inodes: set[str] = set()
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
    found: set[tuple[str, int]] = set()
    for table in ("tcp", "tcp6"):
        with contextlib.suppress(OSError):
            for row in Path(f"/proc/net/{table}").read_text().splitlines()[1:]:
                cols = row.split()
                if cols[3] != "0A" or cols[9] not in inodes:  # 0A = LISTEN
                    continue
                addr_hex, port_hex = cols[1].split(":")
                raw = bytes.fromhex(addr_hex)
                if table == "tcp":
                    addr = socket.inet_ntop(socket.AF_INET, raw[::-1])
                else:
                    words = b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4))
                    addr = socket.inet_ntop(socket.AF_INET6, words)
                found.add((addr, int(port_hex, 16)))
    return found


def _port_open(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


def _stop(proc: subprocess.Popen[bytes], timeout: float) -> None:
    if proc.poll() is None:
        # a test may have paused the server (SIGSTOP): resume it so that SIGTERM is handled
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGCONT)
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=timeout)
    # The server runs in its own session: end whatever it left in its group, by group id.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=timeout)


@contextlib.contextmanager
def mp_server(
    python: Path | str | Release,
    tmp_dir: Path,
    *,
    l1_size_gb: float = 1.0,
    chunk_size: int = 256,
    stubs: Literal["auto", "never"] | Sequence[str] = "auto",
    frontend: Frontend = "zmq",
    extra_args: Sequence[str] = (),
    extra_env: Mapping[str, str] | None = None,
    ready_timeout: float = 180.0,
    stop_timeout: float = 20.0,
    python_flags: Sequence[str] = (),
) -> Iterator[RunningServer]:
    """Run the release's MP server on 127.0.0.1 for the duration of the ``with`` block.

    ``python``: the venv interpreter that has the release installed (or its :class:`Release`).
    ``stubs``: ``"auto"`` injects stubs for the GPU modules the release imports at module level
    and lacks (see :attr:`Release.missing_gpu_modules`), ``"never"`` none, or name them.
    ``frontend="http"`` runs ``http_server`` instead (ZMQ server plus FastAPI on --http-port).
    Raises :class:`ServerStartError` (with the log and its first error line) when the server
    exits or is not ready within ``ready_timeout`` seconds.
    """
    release = python if isinstance(python, Release) else inspect_release(python)
    tmp_dir = Path(tmp_dir)
    tmp_dir.mkdir(parents=True, exist_ok=True)
    if stubs == "auto":
        used: tuple[str, ...] = release.missing_gpu_modules
    elif stubs == "never":
        used = ()
    else:
        used = tuple(stubs)
    host = "127.0.0.1"
    port = free_port(host)
    http_port = free_port(host) if frontend == "http" else None
    argv = server_argv(
        release,
        port=port,
        host=host,
        l1_size_gb=l1_size_gb,
        chunk_size=chunk_size,
        http_port=http_port,
        frontend=frontend,
        extra_args=extra_args,
    )
    env = server_env(tmp_dir, stubs=used, extra_env=extra_env)
    log_path = tmp_dir / f"mp-server-{release.version}-{port}.log"
    cmd = [str(release.python), *python_flags, "-m", *argv]
    log: IO[bytes]
    with open(log_path, "wb") as log:
        t0 = time.monotonic()
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=tmp_dir,
            start_new_session=True,
        )
    try:
        marker = READY_MARKER if frontend == "zmq" else HTTP_READY_MARKER
        probe_port = port if http_port is None else http_port
        deadline = t0 + ready_timeout
        while True:
            if proc.poll() is not None:
                raise ServerStartError(
                    f"lmcache {release.version} server exited with {proc.returncode}",
                    log=log_path.read_text(errors="replace"),
                    argv=cmd,
                )
            text = log_path.read_text(errors="replace")
            if marker in text and _port_open(host, probe_port):
                break
            if time.monotonic() > deadline:
                raise ServerStartError(
                    f"lmcache {release.version} server not ready after {ready_timeout:.0f} s",
                    log=text,
                    argv=cmd,
                )
            time.sleep(0.1)
        yield RunningServer(
            release=release,
            host=host,
            port=port,
            pid=proc.pid,
            argv=cmd,
            env=env,
            log_path=log_path,
            ready_seconds=time.monotonic() - t0,
            stubs=used,
            frontend=frontend,
            http_port=http_port,
        )
    finally:
        _stop(proc, stop_timeout)
