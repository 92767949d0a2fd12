"""The package index helper (tools/index.py): the installers' configuration decides the
address; the JSON simple API is read with absolute URLs; downloads are bounded and checked."""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path
from typing import Any

import pytest

from tools import index


@pytest.fixture(autouse=True)
def _fresh() -> Any:
    index.index_url.cache_clear()
    yield
    index.index_url.cache_clear()


def test_an_index_named_in_the_environment_is_the_one_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PIP_INDEX_URL", "https://mirror.example/simple")
    assert index.index_url() == "https://mirror.example/simple"


def test_without_configuration_pip_says_its_default(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in index.INDEX_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(index, "_pip", lambda *args: None)
    monkeypatch.setattr(index, "_pip_default", lambda: "https://default.example/simple")
    assert index.index_url() == "https://default.example/simple"


def test_files_come_with_absolute_urls_grouped_by_version(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PIP_INDEX_URL", "https://mirror.example/simple")

    class Response(io.BytesIO):
        def geturl(self) -> str:
            return "https://mirror.example/simple/lmcache/"

    files = [
        {"filename": "lmcache-0.5.6-cp311-cp311-manylinux_2_17_x86_64.whl", "url": "../f/a.whl"},
        {"filename": "lmcache-0.5.6.tar.gz", "url": "https://files.example/b.tar.gz"},
        {"filename": "lmcache-0.5.7rc2.tar.gz", "url": "c.tar.gz"},
        {"filename": "not-a-distribution.txt", "url": "d"},
    ]
    seen: list[Any] = []

    def urlopen(request: Any, timeout: float) -> Response:
        seen.append(request)
        return Response(json.dumps({"files": files}).encode())

    monkeypatch.setattr("urllib.request.urlopen", urlopen)
    got = index.releases("LMCache")
    assert seen[0].full_url == "https://mirror.example/simple/lmcache/"
    assert seen[0].get_header("Accept") == index.ACCEPT
    assert sorted(got) == ["0.5.6", "0.5.7rc2"]
    assert got["0.5.6"][0]["url"] == "https://mirror.example/simple/f/a.whl"
    assert [f["packagetype"] for f in got["0.5.6"]] == ["bdist_wheel", "sdist"]
    assert got["0.5.7rc2"][0]["url"] == "https://mirror.example/simple/lmcache/c.tar.gz"


def test_a_download_is_checked_and_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = b"wheel bytes"
    good = hashlib.sha256(data).hexdigest()
    monkeypatch.setattr("urllib.request.urlopen", lambda url, timeout: io.BytesIO(data))
    entry = {"filename": "x.whl", "url": "https://f/x.whl", "hashes": {"sha256": good}}
    assert index.download(entry, tmp_path).read_bytes() == data
    with pytest.raises(SystemExit, match="sha256"):
        index.download({**entry, "filename": "y.whl", "hashes": {"sha256": "0" * 64}}, tmp_path)
    assert not (tmp_path / "y.whl").exists()
    with pytest.raises(SystemExit, match="over"):
        index.download({**entry, "filename": "z.whl"}, tmp_path, max_bytes=4)
