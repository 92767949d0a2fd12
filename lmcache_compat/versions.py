"""Installed versions, read from distribution metadata: never by importing the package.

``importlib.metadata`` and ``packaging`` are imported on first use only, so that
``import lmcache_compat`` stays cheap.
"""

from __future__ import annotations

import functools
from importlib import metadata
from typing import TYPE_CHECKING, Literal

from packaging.version import InvalidVersion, Version

from lmcache_compat.errors import LMCacheVersionError, MetadataError

if TYPE_CHECKING:
    from packaging.version import Version

__all__ = [
    "Expectation",
    "expectation",
    "installed_distribution_version",
    "installed_lmcache_version",
    "parse_version",
    "version_or_none",
]

Expectation = Literal["yes", "no", "maybe", "unknown"]


def parse_version(text: object) -> Version:
    """Parse a PEP 440 version (``0.3.12.dev40``, ``0.5.6+g1a2b3c`` and ``v0.3.9`` included).

    Raises :class:`LMCacheVersionError` naming the text when it is not a version.
    """

    if not isinstance(text, str):
        raise LMCacheVersionError(f"expected a version string, got {type(text).__name__}")
    try:
        return Version(text.strip())
    except InvalidVersion:
        raise LMCacheVersionError(
            f"{text!r} is not a PEP 440 version (expected e.g. '1.2.3', '1.2.3.post1', '1.2rc1')"
        ) from None


@functools.cache
def installed_distribution_version(name: str) -> str | None:
    """The version string in ``name``'s installed metadata, ``None`` if it is not installed.

    Raises :class:`MetadataError` (one line) when the metadata exists but cannot be read.
    Cached; call ``installed_distribution_version.cache_clear()`` after (un)installing in-process.
    """

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None
    except (OSError, UnicodeError, ValueError) as exc:
        raise MetadataError(
            f"the installed {name}'s metadata cannot be read ({type(exc).__name__}: {exc})"
        ) from None


def version_or_none(name: str) -> str | None:
    """:func:`installed_distribution_version`, or ``None`` when the metadata cannot be read
    (for messages, where "unknown" is the honest answer)."""
    try:
        return installed_distribution_version(name)
    except MetadataError:
        return None


def installed_lmcache_version() -> Version | None:
    """The installed LMCache release as a :class:`packaging.version.Version`, or ``None``.

    Read from the ``lmcache`` distribution's metadata; LMCache itself is never imported. Dev and
    local versions parse (``0.3.12.dev40``, ``0.5.6+g1a2b3c``). Metadata whose version is not
    PEP 440 raises :class:`LMCacheVersionError`.
    """
    raw = installed_distribution_version("lmcache")
    if raw is None:
        return None
    try:
        return parse_version(raw)
    except LMCacheVersionError as exc:
        raise LMCacheVersionError(f"installed lmcache distribution: {exc}") from None


def expectation(since: str, version: Version | None, removed: str | None = None) -> Expectation:
    """Whether a release at ``version`` should have a capability first released in ``since``
    (and, with ``removed``, no longer present from that release on).

    ``"maybe"`` for a pre-release or dev build of the very release that introduced it (a
    ``0.3.12.dev40`` snapshot may or may not have a 0.3.12 feature: probe the live object), and
    ``"unknown"`` when no version is known. Local versions compare as their public release.
    """
    if version is None:
        return "unknown"

    first = Version(since)
    if removed is not None and version >= Version(removed):
        return "no"
    if version >= first:
        return "yes"
    if version.is_prerelease or version.is_devrelease:
        # The final release this snapshot leads to (0.3.12rc1 -> 0.3.12, 0.3.10.post2.dev1 ->
        # 0.3.10.post2): if that release has it, the snapshot may or may not.
        target = ".".join(map(str, version.release))
        if version.post is not None:
            target += f".post{version.post}"
        if Version(target) >= first:
            return "maybe"
    return "no"
