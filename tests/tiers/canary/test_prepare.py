"""The canary's choices (tests/tiers/canary/prepare.py) on index data shaped like PyPI's JSON
API."""

from __future__ import annotations

from typing import Any

import pytest

from tests.tiers.canary import prepare


def _file(name: str, yanked: bool = False) -> dict[str, Any]:
    kind = "bdist_wheel" if name.endswith(".whl") else "sdist"
    return {"filename": name, "packagetype": kind, "yanked": yanked, "url": f"../../p/{name}"}


WHEEL = "lmcache-{v}-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl"
RELEASES = {
    "0.5.6": [_file(WHEEL.format(v="0.5.6")), _file("lmcache-0.5.6.tar.gz")],
    "0.5.6rc4.dev27": [_file(WHEEL.format(v="0.5.6rc4.dev27"))],
    "0.5.7rc2": [_file(WHEEL.format(v="0.5.7rc2"))],
    "0.5.8.dev3": [_file(WHEEL.format(v="0.5.8.dev3"), yanked=True)],
    "not-pep440": [_file("lmcache-x.tar.gz")],
    "0.5.7": [],
}


def test_newest_counts_pre_releases_and_dev_builds_and_skips_yanked_files() -> None:
    version, files = prepare.newest(RELEASES, None, bool)
    assert version == "0.5.7rc2"  # 0.5.8.dev3 is yanked, 0.5.7 has no file
    assert [f["filename"] for f in files] == [WHEEL.format(v="0.5.7rc2")]
    assert prepare.newest(RELEASES, "0.5.6rc4.dev27", bool)[0] == "0.5.6rc4.dev27"
    with pytest.raises(SystemExit, match="no usable file"):
        prepare.newest(RELEASES, "0.5.7", bool)
    with pytest.raises(SystemExit, match=r"no usable release 9\.9"):
        prepare.newest(RELEASES, "9.9", bool)


def test_the_artifact_is_a_wheel_this_interpreter_installs_else_the_sdist() -> None:
    other = _file(WHEEL.format(v="0.5.6").replace("cp311-cp311", "cp310-cp310"))
    sdist = _file("lmcache-0.5.6.tar.gz")
    ours = _file(WHEEL.format(v="0.5.6"))
    assert prepare.pick_artifact([other, sdist, ours]) is ours
    assert prepare.pick_artifact([other, sdist]) is sdist
    with pytest.raises(SystemExit):
        prepare.pick_artifact([other])
