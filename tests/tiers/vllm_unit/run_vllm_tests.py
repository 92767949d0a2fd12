"""Run vLLM's own unit tests of its LMCache connector against ``LMCacheCompatConnector``.

The test file (:data:`TEST_FILE`) comes from the vLLM source distribution on PyPI, fetched at run
time into a cache folder and checked against a pinned sha256 (:data:`SDIST_SHA256`); it is never
copied into this project. Only the test file, the ``conftest.py``/``__init__.py`` files on its
path, whatever it imports from vLLM's ``tests`` tree, and vLLM's ``pyproject.toml`` (its pytest
settings) are extracted, into a temporary folder. pytest then runs there with the
:mod:`substitute` plugin (beside this file): ``connector="compat"`` substitutes
``LMCacheCompatConnector`` for vLLM's ``LMCacheConnectorV1``, ``connector="vllm"`` runs vLLM's own
class (the baseline). The Python that runs pytest must have that vLLM, LMCache and lmcache-compat
installed (``python=``); ``pythonpath=`` puts folders first on its ``PYTHONPATH`` (say, a copy of
``lmcache_compat`` with a changed module).

    python tests/tiers/vllm_unit/run_vllm_tests.py run 0.32.0 --python VENV/bin/python
    python tests/tiers/vllm_unit/run_vllm_tests.py run 0.32.0 --connector vllm --python
    VENV/bin/python
    python tests/tiers/vllm_unit/run_vllm_tests.py survey 0.13.0 0.31.0   # which sdists ship it

``conftests="unit"`` (default) loads only the ``conftest.py`` beside the test
(``--confcutdir``); ``"all"`` extracts vLLM's whole ``tests`` tree and loads its root
``conftest.py`` too (needs ``tblib``; on a machine without an accelerator its autouse cleanup
fixture fails every test's teardown in ``torch.accelerator.empty_cache()``).
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import dataclasses
import hashlib
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Final, Literal

# a script folder: the repository root holds the shared index helper
sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from tools import index

__all__ = [
    "SDIST_SHA256",
    "TEST_FILE",
    "RunResult",
    "TestOutcome",
    "extract_tests",
    "fetch_sdist",
    "main",
    "run_tests",
    "survey",
]

#: The test file, relative to the root of a vLLM source distribution.
TEST_FILE: Final = "tests/v1/kv_connector/unit/test_lmcache_connector.py"

#: sha256 of ``vllm-<version>.tar.gz`` on PyPI for every release whose sdist ships
#: :data:`TEST_FILE` (checked against both PyPI JSON APIs; 0.15.x has no sdist).
SDIST_SHA256: Final[Mapping[str, str]] = {
    "0.13.0": "4ad43db45fef37114b550d03a4f423fb3fa3a31d8bc09ee810ef8b9cdcd4b5fe",
    "0.14.0": "ed86c6a9d22fbfd059648794493cad88444c71688f3ff6efcb26c5ca353f0e5d",
    "0.14.1": "c7c6d0a729d29e70ac10baacbc7186930da24f8ae34f60451330527ff0be84ac",
    "0.16.0": "1f684bb31fbef59d862e2fe666e23a41f1d39d93f86215ce1ce1db89a8f5665b",
    "0.17.0": "b0b62e58ef4eb633ef371f2726976372cf6dfcb7ff2ea9ddf7194c1930d5629a",
    "0.17.1": "d26a95dcb92e2ff78ed4b48bff247d845b0c768edf6c0acf2401376a56c57b61",
    "0.18.0": "9a1bee091db8dbb4664a2a09cd9c61912e9912a44af1ce12b8593a231d05971c",
    "0.18.1": "8d18eff1c4ed21eb8cf7a45a1d1b34752d5ec287e79186e451d5c2f797cacdb7",
    "0.19.0": "81e59cf87175e7a62eb8d9acf5989484bbd17089d5eface353f89067bda282d9",
    "0.19.1": "9fb88ce6b50991eba41d183584f65f51d7f6015d86a42cdabf79c1c8bd5d66fa",
    "0.20.0": "a6d50152936ee292455af3ffbe359f7a284ac43bf3b68caccf29f368e196cc72",
    "0.20.1": "778df065237704d51e8b4cc95bcc6f6a0c2317f13feb38295de3ce76146bf140",
    "0.20.2": "58809377798c5335c6e2fe30092abda54d9200b5b8a717b3735a63f5daa0e383",
    "0.21.0": "05ff89c3e926b88b77d7878e317a659ffba678afc21c1d48952037aa5457f058",
    "0.22.0": "6d41581a9e5288cd69278518a550c6d7ce510ae27a506556a3427d01284be7fe",
    "0.22.1": "cd34902729f3767e3dfbb391956b2986bc638a54be9893e78bda9cc55669f15c",
    "0.23.0": "760269db3d9611e12e524681df1bca0977d5d2f5fcb4481cc34d33efc4ae7ff5",
    "0.24.0": "0862453adc1f3339f1a0c9dca1179c34d6ed6e118f87b6e5bddd120af614ac66",
    "0.25.0": "7e04e2b37164de8c4012f27f75af6c4768039b32610865e9b6fb8c49c34a84aa",
    "0.25.1": "ddbdec3f1c0f21afa70b7eb6ddf3faa29d26b1302ee4b5d5e00ec3af41b0c2e4",
    "0.26.0": "23e9fa19d7e20ce7dcc1c074d41503e2116d23f19e688f5d5ea91b741f958502",
    "0.27.0": "862671641625d6cfb7aaab98a5386126738b59ca50e5d01ca539a4e32f63ffcb",
    "0.27.1": "eec2d54d137ac1e59cb4c39226dfee1943eefc8f4788f5821d7300d6acbdb646",
    "0.28.0": "ac96dd0ec5be9c13f2aa4bfb50498c4727110406f6e4980b58a4097e4d18634a",
    "0.29.0": "c03feb07943ecae9e69e7dc424d7c5569ecf8d1292513aef2a4de67af381cd97",
    "0.30.0": "5f8f4e890c042ffa1c3e103f81c35e2d96f60a0a175ac43a4adbae7006bef62b",
    "0.31.0": "dde46f1efbe846e5bd0c5c4ec6ec71842c42254c7ff3d9bebb2a57028715d380",
    "0.32.0": "d2c957d5eee3d0985012151315ddc62cbe0cd368fc96a5fc3510438d9dddf2ad",
    "0.33.0": "f4c33c2503d52bb411146afa9618a4f48bed68912f617e6803ac8d76e4c74112",
}

PLUGIN_DIR: Final = Path(__file__).resolve().parent
DEFAULT_CACHE: Final = Path(
    os.environ.get("LMCACHE_COMPAT_SDIST_CACHE")
    or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "lmcache-compat/sdists"
)

Connector = Literal["compat", "vllm"]
Conftests = Literal["unit", "all"]
Outcome = Literal["passed", "failed", "error", "skipped"]


class SdistError(RuntimeError):
    """The sdist is not pinned, not on the index, or its bytes do not match the pin."""


@dataclasses.dataclass(frozen=True)
class TestOutcome:
    """One test's result: pytest's outcome (``error`` = setup or teardown failed), the phase
    that decided it, that phase's exception line, and the test body's own outcome (``call``:
    ``"not run"`` when setup failed; a test whose body passed can still be an ``error`` of its
    teardown, which is how vLLM's root conftest fails on a machine without an accelerator)."""

    __test__ = False  # not a pytest test class

    nodeid: str
    outcome: Outcome
    phase: str
    message: str = ""
    call: str = "passed"


@dataclasses.dataclass(frozen=True)
class RunResult:
    """What one run of the vLLM test file gave."""

    version: str
    sdist_sha256: str
    mode: str
    connector: str
    connector_file: str
    exitstatus: int
    outcomes: Mapping[str, TestOutcome]
    collect_errors: Mapping[str, str]
    output: str

    def count(self, outcome: Outcome) -> int:
        return sum(1 for o in self.outcomes.values() if o.outcome == outcome)

    def summary(self) -> str:
        parts = [f"{self.count('passed')} passed", f"{self.count('failed')} failed"]
        parts += [f"{self.count(o)} {o}" for o in ("error", "skipped") if self.count(o)]
        if self.collect_errors:
            parts.append(f"{len(self.collect_errors)} collection errors")
        bodies = sum(
            1 for o in self.outcomes.values() if o.outcome == "error" and o.call == "passed"
        )
        text = ", ".join(parts)
        if bodies:
            text += f" ({bodies} of the errors are teardowns of tests whose body passed)"
        return text


# --- the sdist ---------------------------------------------------------------------------------


def sdist_filename(version: str) -> str:
    return f"vllm-{version}.tar.gz"


def fetch_sdist(
    version: str,
    *,
    sha256_table: Mapping[str, str] = SDIST_SHA256,
    cache_dir: Path = DEFAULT_CACHE,
) -> Path:
    """The vLLM ``version`` sdist in ``cache_dir``, downloaded from the index if needed; its sha256
    is checked against ``sha256_table`` (an unpinned version is refused)."""
    try:
        expected = sha256_table[version]
    except KeyError:
        raise SdistError(f"vLLM {version}: no pinned sdist sha256") from None
    path = cache_dir / sdist_filename(version)
    if path.exists() and index.sha256_of(path) == expected:
        return path
    # absent, or a corrupt copy (replaced only once a download matches the pin)
    entry = index.find_file("vllm", path.name)
    listed = entry.get("hashes", {}).get("sha256")
    if listed != expected:
        raise SdistError(f"{path.name}: the index lists sha256 {listed}, pinned {expected}")
    index.download(entry, path, sha256=expected)
    return path


# --- extraction --------------------------------------------------------------------------------


def _module_file(module: str, names: set[str], prefix: str) -> str | None:
    """The sdist member for ``tests.x.y`` (a module file or a package's ``__init__.py``)."""
    base = prefix + module.replace(".", "/")
    for candidate in (base + ".py", base + "/__init__.py"):
        if candidate in names:
            return candidate
    return None


def _tests_imports(source: str, package: str) -> set[str]:
    """Modules under ``tests`` that ``source`` imports (absolute or relative, at any depth)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "tests")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1])
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            if module.split(".")[0] != "tests":
                continue
            found.add(module)
            found.update(f"{module}.{a.name}" for a in node.names)  # may be submodules
    return found


def _needed_members(names: set[str], prefix: str, conftests: Conftests) -> list[str]:
    """The sdist members a run needs (see the module doc)."""
    if TEST_FILE not in {n[len(prefix) :] for n in names if n.startswith(prefix)}:
        raise SdistError(f"this sdist does not ship {TEST_FILE}")
    if conftests == "all":
        wanted = {n for n in names if n.startswith(prefix + "tests/")}
    else:
        wanted = {prefix + TEST_FILE}
        parts = TEST_FILE.split("/")[:-1]
        for depth in range(1, len(parts) + 1):
            folder = prefix + "/".join(parts[:depth])
            wanted.add(folder + "/__init__.py")
        wanted.add(prefix + "/".join(parts) + "/conftest.py")
    pyproject = prefix + "pyproject.toml"
    wanted.add(pyproject)
    return sorted(n for n in wanted if n in names)


def extract_tests(sdist: Path, dest: Path, *, conftests: Conftests = "unit") -> Path:
    """Extract what a run of :data:`TEST_FILE` needs into ``dest``; returns the sdist root
    there. In ``"unit"`` mode the ``tests.*`` modules the test and its conftest import are
    followed (transitively) and extracted with their packages' ``__init__.py``."""
    with tarfile.open(sdist, "r:gz") as tar:
        members = {m.name: m for m in tar.getmembers() if m.isfile()}
        prefix = sdist.name.removesuffix(".tar.gz") + "/"
        names = set(members)
        wanted = set(_needed_members(names, prefix, conftests))
        queue = [n for n in wanted if n.endswith(".py")]
        while queue and conftests == "unit":
            member = queue.pop()
            module = member[len(prefix) : -len(".py")].replace("/", ".")
            package = module.removesuffix(".__init__")
            package = package if member.endswith("__init__.py") else package.rpartition(".")[0]
            extracted = tar.extractfile(members[member])
            if extracted is None:
                continue
            for imported in _tests_imports(extracted.read().decode(), package):
                path = _module_file(imported, names, prefix)
                if path is None:
                    continue
                chain = imported.split(".")
                extra = {path} | {
                    f"{prefix}{'/'.join(chain[:depth])}/__init__.py"
                    for depth in range(1, len(chain))
                }
                for new in sorted(extra & names - wanted):
                    wanted.add(new)
                    queue.append(new)
        for name in sorted(wanted):
            tar.extract(members[name], dest, filter="data")
    return dest / prefix.rstrip("/")


# --- running -----------------------------------------------------------------------------------


def _offline_env(
    base: Mapping[str, str], scratch: Path, pythonpath: Sequence[Path]
) -> dict[str, str]:
    env = dict(base)
    paths = [str(p) for p in pythonpath] + [str(PLUGIN_DIR)]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    cache = scratch / "cache"
    (cache / "prometheus").mkdir(parents=True, exist_ok=True)
    env.update(
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        VLLM_CACHE_ROOT=str(cache / "vllm"),
        XDG_CACHE_HOME=str(cache),
        HF_HOME=str(cache / "hf"),
        PROMETHEUS_MULTIPROC_DIR=str(cache / "prometheus"),
        TORCHINDUCTOR_CACHE_DIR=str(cache / "inductor"),
        LMCACHE_DISABLE_BANNER="1",
        PYTHONDONTWRITEBYTECODE="1",
    )
    return env


def _outcome_of(nodeid: str, phases: Mapping[str, Mapping[str, str]]) -> TestOutcome:
    call = phases.get("call", {}).get("outcome", "not run")
    for phase in ("setup", "call", "teardown"):
        entry = phases.get(phase)
        if entry is None:
            continue
        message = entry.get("message", "")
        if entry["outcome"] == "failed":
            outcome: Outcome = "failed" if phase == "call" else "error"
            return TestOutcome(nodeid, outcome, phase, message, call)
        if entry["outcome"] == "skipped":
            return TestOutcome(nodeid, "skipped", phase, message, call)
    return TestOutcome(nodeid, "passed", "call", "", call)


@contextlib.contextmanager
def _scratch(keep: Path | None) -> Iterator[Path]:
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        yield keep
        return
    with tempfile.TemporaryDirectory(prefix="vllm-unit-") as tmp:
        yield Path(tmp)


def run_tests(
    version: str,
    *,
    connector: Connector = "compat",
    python: str = sys.executable,
    pythonpath: Sequence[Path] = (),
    conftests: Conftests = "unit",
    sha256_table: Mapping[str, str] = SDIST_SHA256,
    cache_dir: Path = DEFAULT_CACHE,
    workdir: Path | None = None,
    pytest_args: Sequence[str] = (),
    timeout: float = 1800,
) -> RunResult:
    """Fetch, extract and run :data:`TEST_FILE` of vLLM ``version`` with ``python``; returns the
    per-test outcomes. ``workdir``: extract there and keep it (default: a temporary folder)."""
    sdist = fetch_sdist(version, sha256_table=sha256_table, cache_dir=cache_dir)
    with _scratch(workdir) as scratch:
        root = extract_tests(sdist, scratch / "src", conftests=conftests)
        report = scratch / "outcomes.json"
        test_dir = Path(TEST_FILE).parent
        command = [python, "-m", "pytest", TEST_FILE, "-q", "-rfEs", "-p", "no:cacheprovider"]
        command += ["--rootdir", str(root), "-p", "substitute"]
        if (root / "pyproject.toml").exists():
            command += ["-c", str(root / "pyproject.toml")]
        if conftests == "unit":
            command += ["--confcutdir", str(root / test_dir)]
        command += [f"--lmcache-connector={connector}", f"--lmcache-outcomes={report}"]
        command += list(pytest_args)
        completed = subprocess.run(
            command,
            cwd=root,
            env=_offline_env(os.environ, scratch, pythonpath),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        output = completed.stdout + completed.stderr
        if not report.exists():
            raise RuntimeError(f"pytest wrote no outcomes (exit {completed.returncode}):\n{output}")
        data = json.loads(report.read_text())
    outcomes = {nodeid: _outcome_of(nodeid, phases) for nodeid, phases in data["tests"].items()}
    return RunResult(
        version=version,
        sdist_sha256=sha256_table[version],
        mode=str(data["mode"]),
        connector=str(data["connector"]),
        connector_file=str(data["connector_file"]),
        exitstatus=completed.returncode,
        outcomes=outcomes,
        collect_errors=dict(data["collect_errors"]),
        output=output,
    )


# --- survey: which sdists ship the test file ---------------------------------------------------


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(p) if p.isdigit() else -1 for p in version.split("."))


def survey(first: str, last: str) -> list[tuple[str, str, str | None]]:
    """``(version, sdist sha256 from the index, sha256 of TEST_FILE or None)`` for every vLLM
    release from ``first`` to ``last`` with an sdist on PyPI (each downloaded once, into a
    temporary folder, and checked against the index's sha256)."""
    rows: list[tuple[str, str, str | None]] = []
    low, high = _version_key(first), _version_key(last)
    files = index.project("vllm").get("files", [])
    for entry in files:
        name = str(entry["filename"])
        if not (name.startswith("vllm-") and name.endswith(".tar.gz")):
            continue
        version = name.removeprefix("vllm-").removesuffix(".tar.gz")
        if not all(p.isdigit() for p in version.split(".")):
            continue  # pre-releases and dev builds
        if not low <= _version_key(version) <= high:
            continue
        sha = str(entry["hashes"]["sha256"])
        with tempfile.TemporaryDirectory(prefix="vllm-survey-") as tmp:
            path = Path(tmp) / name
            index.download(entry, path, sha256=sha)
            with tarfile.open(path, "r:gz") as tar:
                try:
                    member = tar.getmember(f"vllm-{version}/{TEST_FILE}")
                except KeyError:
                    rows.append((version, sha, None))
                    continue
                stream = tar.extractfile(member)
                content = stream.read() if stream is not None else b""
        rows.append((version, sha, hashlib.sha256(content).hexdigest()))
    return sorted(rows, key=lambda row: _version_key(row[0]))


# --- command line ------------------------------------------------------------------------------


def _print_result(result: RunResult) -> None:
    print(f"vLLM {result.version} (sdist sha256 {result.sdist_sha256})")
    print(f"connector: {result.connector} ({result.connector_file}), mode={result.mode}")
    for nodeid in sorted(result.outcomes):
        outcome = result.outcomes[nodeid]
        detail = f" [{outcome.phase}] {outcome.message}" if outcome.outcome != "passed" else ""
        if outcome.outcome == "error":
            detail = f" (body {outcome.call}){detail}"
        print(f"  {outcome.outcome.upper():7} {nodeid.split('::', 1)[-1]}{detail}")
    for nodeid, message in result.collect_errors.items():
        print(f"  COLLECT {nodeid}: {message}")
    print(result.summary())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run the test file of one vLLM release")
    run.add_argument("version")
    run.add_argument("--connector", choices=("compat", "vllm"), default="compat")
    run.add_argument("--python", default=sys.executable, help="interpreter with vLLM installed")
    run.add_argument("--pythonpath", action="append", type=Path, default=[])
    run.add_argument("--conftests", choices=("unit", "all"), default="unit")
    run.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE)
    run.add_argument("--workdir", type=Path, default=None, help="extract here and keep it")
    run.add_argument("--show-output", action="store_true", help="print pytest's output")
    run.add_argument("--json", type=Path, default=None, help="write the outcomes here")
    scan = commands.add_parser("survey", help="which sdists ship the test file (downloads each)")
    scan.add_argument("first")
    scan.add_argument("last")
    args = parser.parse_args(argv)

    if args.command == "survey":
        for version, sha, content in survey(args.first, args.last):
            shipped = f"ships it (file sha256 {content[:12]})" if content else "does not ship it"
            print(f"{version:8} {sha}  {shipped}")
        return 0
    result = run_tests(
        args.version,
        connector=args.connector,
        python=args.python,
        pythonpath=args.pythonpath,
        conftests=args.conftests,
        cache_dir=args.cache_dir,
        workdir=args.workdir,
    )
    if args.show_output:
        print(result.output)
    _print_result(result)
    if args.json is not None:
        payload = dataclasses.asdict(result)
        payload.pop("output")
        args.json.write_text(json.dumps(payload, indent=1, sort_keys=True))
    return 0 if result.exitstatus == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
