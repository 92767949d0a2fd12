from __future__ import annotations

from typing import Any

import pytest
from packaging.version import Version

from lmcache_compat import LMCacheVersionError, installed_lmcache_version, parse_version, versions
from lmcache_compat.versions import expectation, installed_distribution_version


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0.3.9.post1", Version("0.3.9.post1")),
        ("0.3.12.dev40", Version("0.3.12.dev40")),
        ("0.5.6+g1a2b3c", Version("0.5.6+g1a2b3c")),
        (" v0.3.9 ", Version("0.3.9")),
        ("0.4.0rc1", Version("0.4.0rc1")),
    ],
)
def test_parse_version(text: str, expected: Version) -> None:
    assert parse_version(text) == expected


@pytest.mark.parametrize("bad", ["", "latest", "0.3.x", "1.0-beta-final!", None, 3, b"0.3.9"])
def test_unparseable_versions_are_clear_errors(bad: Any) -> None:
    with pytest.raises(LMCacheVersionError) as info:
        parse_version(bad)
    assert isinstance(info.value, ValueError)
    assert "version" in str(info.value)


@pytest.fixture
def fake_metadata(monkeypatch: pytest.MonkeyPatch) -> dict[str, str | None]:
    table: dict[str, str | None] = {}
    monkeypatch.setattr(versions, "installed_version", lambda name: table.get(name))
    return table


@pytest.mark.parametrize("raw", ["0.3.12.dev40", "0.5.6+g1a2b3c", "0.3.10.post2"])
def test_installed_version_from_metadata(fake_metadata: dict[str, str | None], raw: str) -> None:
    fake_metadata["lmcache"] = raw
    assert installed_lmcache_version() == Version(raw)


def test_not_installed_is_none(fake_metadata: dict[str, str | None]) -> None:
    assert installed_lmcache_version() is None


def test_garbage_metadata_is_a_clear_error(fake_metadata: dict[str, str | None]) -> None:
    fake_metadata["lmcache"] = "not-a-version"
    with pytest.raises(
        LMCacheVersionError, match="installed lmcache distribution: 'not-a-version'"
    ):
        installed_lmcache_version()


def test_real_metadata_lookup_of_a_missing_distribution() -> None:
    assert installed_distribution_version("surely-not-installed-lmcache-compat-x") is None
    assert installed_distribution_version("packaging") is not None


@pytest.mark.parametrize(
    ("since", "version", "expected"),
    [
        ("0.3.12", "0.3.12", "yes"),
        ("0.3.12", "0.5.6+g1a2b3c", "yes"),
        ("0.3.12", "0.3.11", "no"),
        ("0.3.12", "0.3.12.dev40", "maybe"),
        ("0.3.12", "0.3.12rc1", "maybe"),
        ("0.3.12", "0.3.11.dev3", "no"),
        ("0.3.10.post2", "0.3.10.post2.dev1", "maybe"),
        ("0.3.10.post2", "0.3.10.post1", "no"),
        ("0.3.9.post1", "0.3.9", "no"),
        ("0.3.9.post1", "0.3.9.post2", "yes"),
    ],
)
def test_expectation(since: str, version: str, expected: str) -> None:
    assert expectation(since, Version(version)) == expected


def test_expectation_without_version() -> None:
    assert expectation("0.3.1", None) == "unknown"
