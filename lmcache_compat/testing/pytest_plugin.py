"""An opt-in pytest plugin: run a connector's tests over several LMCache releases.

Enable it with ``-p lmcache_compat.testing.pytest_plugin`` or ``pytest_plugins =
["lmcache_compat.testing.pytest_plugin"]`` in the root ``conftest.py``. It has no ``pytest11``
entry point on purpose: one would load in every project that has lmcache-compat installed (and
mark the package for assertion rewriting at each start-up).

``--lmcache-release=SPEC`` picks the releases: ``installed`` (the default: the real installed
LMCache), a version, a PEP 440 specifier set, ``all``, ``distinct`` or ``distinct:ROLE`` (see
:mod:`lmcache_compat.report.releases`). A test that takes the ``lmcache_release`` fixture runs
once per selected release; ``@pytest.mark.lmcache_requires("kv_events", ...)`` skips it, with
the reason, on a release without those capabilities.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from lmcache_compat.core.catalog import Capability, CapabilitySpec
from lmcache_compat.upstream.matrix import ReleaseRow, load_matrix

__all__ = ["INSTALLED", "Release", "release_for"]

#: The ``--lmcache-release`` value (the default) that means the installed LMCache release.
INSTALLED = "installed"
MARKER = "lmcache_requires"


@dataclass(frozen=True)
class Release:
    """One selected release: its version, its fakes (or, with ``installed``, the real
    classes), and what it can do."""

    version: str
    row: ReleaseRow
    installed: bool = False

    def fake(self, name: str) -> type[Any]:
        """The class ``name`` of this release: a fake generated from the shipped data, or with
        ``installed`` the real class (found by lmcache_compat.upstream.resolve, imported only
        from its own module; a class that does not import here skips the test, saying why)."""
        if self.installed:
            from lmcache_compat.testing.installed import real_class  # lazy: pytest start-up

            cls: type[Any] = _importable(self.version, name, real_class)
            return cls
        from lmcache_compat.testing.fakes import fake_class  # lazy: pytest start-up

        return fake_class(self.version, name)

    def engine(self, name: str) -> Any:
        """An instance of the fake of ``name``, built with no arguments. With ``installed``: a
        double of the real class (a subclass of it whose public members are the fake's, read
        from the installed files; see :mod:`lmcache_compat.testing.installed`), so the same
        test runs on fakes and on the real classes."""
        if self.installed:
            from lmcache_compat.testing.installed import double  # lazy: pytest start-up

            return _importable(self.version, name, double)
        from lmcache_compat.testing.fakes import fake  # lazy: pytest start-up

        return fake(self.version, name)

    def has(self, capability: Capability | str) -> bool:
        """Whether this release has ``capability`` (from its row: the shipped one, or with
        ``installed`` the scan of the installed files)."""
        return self.row.has(capability)

    def fallback(self, capability: Capability | str) -> CapabilitySpec:
        """The catalog row of ``capability``: ``.fallback`` (what an adapter calls when it is
        absent), ``.fallback_result`` (what that returns, in words), ``.impact``."""
        return Capability(capability).spec

    def __str__(self) -> str:
        return self.version


def _importable(version: str, name: str, get: Callable[[str], Any]) -> Any:
    """``get(name)``; a real class whose module does not import here skips the test."""
    try:
        return get(name)
    except ImportError as exc:
        first = str(exc).splitlines()[0] if str(exc) else ""
        pytest.skip(
            f"LMCache {version}'s {name} does not import here: {type(exc).__name__}: {first}"
        )


def release_for(spec: str) -> list[Release]:
    """The releases ``spec`` selects (``installed``: the one installed here)."""
    from lmcache_compat.errors import LMCacheCompatError  # lazy: pytest start-up

    if spec == INSTALLED:
        from lmcache_compat.testing.installed import installed_row  # lazy: pytest start-up
        from lmcache_compat.versions import installed_lmcache_version  # lazy: pytest start-up

        if installed_lmcache_version() is None:
            raise pytest.UsageError(
                "--lmcache-release=installed: LMCache is not installed (fix: pip install "
                "lmcache, or pass --lmcache-release=distinct to test against fakes)"
            )
        try:
            row = installed_row()
        except LMCacheCompatError as exc:
            raise pytest.UsageError(f"--lmcache-release=installed: {exc}") from None
        return [Release(row.version, row, installed=True)]
    from lmcache_compat.inputs import shown  # lazy: pytest start-up
    from lmcache_compat.upstream.release_query import select  # lazy: pytest start-up

    try:  # every SPEC is read under the reader contract: one usage line, never INTERNALERROR
        versions = select(spec)
    except LMCacheCompatError as exc:
        raise pytest.UsageError(f"--lmcache-release={shown(spec, 80)}: {exc}") from None
    matrix = load_matrix()
    return [Release(v, matrix.row(v)) for v in versions]


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("lmcache-compat")
    group.addoption(
        "--lmcache-release",
        default=INSTALLED,
        metavar="SPEC",
        help="LMCache releases to run lmcache_release tests over: installed (default), a "
        "version, a PEP 440 specifier set, all, distinct, distinct:connector|mp|engine",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(*capabilities): skip on an LMCache release without these capabilities",
    )
    config.stash[_SELECTED] = release_for(config.getoption("lmcache_release"))


_SELECTED = pytest.StashKey[list[Release]]()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "lmcache_release" in metafunc.fixturenames:
        releases = metafunc.config.stash[_SELECTED]
        metafunc.parametrize(
            "lmcache_release", releases, ids=[r.version for r in releases], indirect=True
        )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A ``lmcache_requires`` test must take the ``lmcache_release`` fixture (the marker is
    read per release): one clear error instead of a marker that silently does nothing."""
    for item in items:
        names = getattr(item, "fixturenames", ())
        if item.get_closest_marker(MARKER) is not None and "lmcache_release" not in names:
            raise pytest.UsageError(
                f"{item.nodeid}: @pytest.mark.{MARKER} needs the lmcache_release fixture "
                f"(fix: add a lmcache_release parameter to the test)"
            )


@pytest.fixture
def lmcache_release(request: pytest.FixtureRequest) -> Release:
    """The LMCache release this run of the test is for."""
    release: Release = request.param
    for mark in request.node.iter_markers(MARKER):
        for capability in mark.args:
            if not release.has(capability):
                cap = Capability(capability)
                pytest.skip(
                    f"LMCache {release.version} lacks {cap.value} (since {cap.spec.since}): "
                    f"{cap.spec.impact}"
                )
    return release
