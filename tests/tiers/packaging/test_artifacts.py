"""The artifacts a fresh clone builds: no warning, ``twine check`` clean, the sdist holds every
file of the clone (so its tests run from it: this tier runs them there), the metadata says what
pyproject.toml means (SPDX license, license file, classifiers, extras, the long description)."""

from __future__ import annotations

import os
import re
import tarfile
import zipfile
from email.message import Message
from email.parser import Parser
from pathlib import Path

import pytest

import lmcache_compat
from tests.tiers.packaging.prepare import NOT_IN_A_CLONE, tracked_files
from tools.paths import ROOT

pytestmark = pytest.mark.packaging

#: What the build writes into an sdist beside the clone's files.
GENERATED = re.compile(r"^(PKG-INFO|setup\.cfg|lmcache_compat\.egg-info/.+)$")
#: The supported Pythons (``requires-python = ">=3.10"``, and the scan-python tiers).
PYTHONS = ("3.10", "3.11", "3.12", "3.13")


def _metadata(wheel: Path) -> Message:
    with zipfile.ZipFile(wheel) as archive:
        (name,) = (n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        return Parser().parsestr(archive.read(name).decode("utf-8"))


def test_the_build_does_not_warn(packaging_dir: Path) -> None:
    log = (packaging_dir / "build.log").read_text(encoding="utf-8")
    warned = [line for line in log.splitlines() if re.search(r"warn|deprecat", line, re.I)]
    assert warned == [], "\n".join(warned)


def test_twine_check_passes(packaging_dir: Path) -> None:
    """``twine check --strict`` of both (run by prepare.py in its tools venv: this env pins the
    oldest packaging, which twine cannot import)."""
    log = (packaging_dir / "twine.log").read_text(encoding="utf-8")
    assert log.startswith("exit 0\n"), log
    assert log.count("PASSED") == 2, log


def test_the_sdist_holds_every_file_of_the_clone(sdist: Path) -> None:
    """Its tests need the suite, the docs and scripts they read, tox.ini, .ci/ and the example:
    every file a clone holds, and nothing else but what the build generates."""
    with tarfile.open(sdist) as archive:
        names = {m.name.partition("/")[2] for m in archive.getmembers() if m.isfile()}
    checkout = Path(os.environ.get("LMCACHE_COMPAT_CHECKOUT", ROOT))
    clone = tracked_files(checkout)
    if clone is None:  # this tree is itself an unpacked sdist: its own files, minus generated
        clone = [p.relative_to(checkout).as_posix() for p in checkout.rglob("*") if p.is_file()]
        clone = [
            n for n in clone if not GENERATED.match(n) and not set(n.split("/")) & NOT_IN_A_CLONE
        ]
    assert sorted(set(clone) - names) == [], "in the clone, not in the sdist (MANIFEST.in)"
    extra = sorted(n for n in names - set(clone) if not GENERATED.match(n))
    assert extra == [], "in the sdist, not in the clone"


def test_the_metadata(wheel: Path) -> None:
    import trove_classifiers  # this tier's own dependency (tox.ini)

    meta = _metadata(wheel)
    assert meta["Name"] == "lmcache-compat"
    assert meta["Version"] == lmcache_compat.__version__
    assert meta["License-Expression"] == "Apache-2.0"
    assert meta.get_all("License-File") == ["LICENSE"]
    assert meta["Requires-Python"] == ">=3.10"
    classifiers = meta.get_all("Classifier") or []
    assert set(classifiers) <= trove_classifiers.classifiers, "not a known classifier"
    # superseded by License-Expression (PEP 639): setuptools refuses the two together
    assert not [c for c in classifiers if c.startswith("License ::")]
    versions = [c.rsplit(" :: ", 1)[1] for c in classifiers if re.fullmatch(r".*:: 3\.\d+", c)]
    assert tuple(versions) == PYTHONS
    assert any(c.startswith("Operating System ::") for c in classifiers)
    assert any(c.startswith("Topic ::") for c in classifiers)
    # the tests' and linters' dependencies are PEP 735 groups, not options of the package
    assert set(meta.get_all("Provides-Extra") or []) == {
        "config",
        "sglang",
    }  # no vllm: docs/vllm.md
    assert (meta.get_all("Requires-Dist") or [""])[0] == "packaging>=21"


def test_the_long_description_reads_right_off_the_repository(wheel: Path) -> None:
    meta = _metadata(wheel)
    assert meta["Description-Content-Type"] == "text/markdown"
    description = meta.get_payload()
    assert description == (ROOT / "docs" / "pypi.md").read_text(encoding="utf-8")
    relative = re.findall(r"\]\((?!https?://)([^)]+)\)", description)
    assert relative == [], "a link relative to the repository breaks on the index"
    assert "pip install lmcache-compat" in description


def test_the_wheel_ships_the_license_the_types_and_the_data(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    dist_info = f"lmcache_compat-{lmcache_compat.__version__}.dist-info"
    assert f"{dist_info}/licenses/LICENSE" in names
    assert "lmcache_compat/py.typed" in names
    shipped = {
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / "lmcache_compat" / "upstream" / "data").rglob("*.json")
    }
    assert shipped and shipped <= names
    assert not [n for n in names if n.startswith("tests/")]
