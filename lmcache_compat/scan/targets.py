"""Opening a scan target: a wheel, an sdist, a source directory, or the installed
distribution, as a :class:`~lmcache_compat.scan.sources.SourceTree` of one package."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

from lmcache_compat.budgets import Meter
from lmcache_compat.distributions import installed_package
from lmcache_compat.errors import NotLMCacheError, SourceNotFoundError, UnreadableArchiveError
from lmcache_compat.scan.sources import DirTree, SourceTree, describe_mode, metadata_of_dir

__all__ = ["open_source"]


def _open_dir(path: Path, package: str, meter: Meter) -> SourceTree:
    root = path
    init = root / package / "__init__.py"
    if not init.is_file():
        if path.name == package and (path / "__init__.py").is_file():
            root = path.parent
        else:
            raise NotLMCacheError(f"{path}: no {package}/__init__.py in this directory")
    project, version = metadata_of_dir(root, package, meter)
    return DirTree(
        f"directory {path}", project, version, package, meter, root=root, follow_links=False
    )


def _open_installed(package: str, meter: Meter) -> SourceTree:
    """The copy of ``package`` Python imports, with the version of the distribution that
    provides it (whatever it is called: a fork, a rebuild)."""
    found = installed_package(package)
    root = found.root
    if root is None:
        raise SourceNotFoundError(
            f"{package} is not installed in this environment ({sys.executable}); "
            "pass a wheel, an sdist or a source directory to scan instead"
        )
    provider = found.imported
    if provider is None or provider.version is None:
        why = found.problem or found.describe()
        if provider is not None and provider.problem is not None:
            raise UnreadableArchiveError(
                f"the installed {package}'s metadata cannot be read ({why})"
            )
        raise SourceNotFoundError(f"{why}; pass its source directory to scan instead")
    init = root / package / "__init__.py"
    if not init.is_file():
        raise SourceNotFoundError(
            f"the installed {package} {provider.version} has no {package}/__init__.py beside its "
            "metadata (an editable install?); pass its source directory to scan instead"
        )
    return DirTree(
        f"installed {package} {provider.version} ({init.parent})",
        package,
        provider.version,
        package,
        meter,
        root=root,
        follow_links=True,
    )


def open_source(
    target: str | os.PathLike[str] | None,
    package: str = "lmcache",
    meter: Meter | None = None,
) -> SourceTree:
    """Open ``target`` (a ``.whl``, a ``.tar.gz``, a directory, or ``None`` for the installed
    distribution) as the source tree of ``package``."""
    meter = meter or Meter()
    if target is None:
        return _open_installed(package, meter)
    path = Path(target)
    try:
        st = path.stat()
    except FileNotFoundError:
        raise SourceNotFoundError(f"{path}: no such file or directory") from None
    except PermissionError:
        raise UnreadableArchiveError(f"{path}: permission denied") from None
    except OSError as exc:
        raise UnreadableArchiveError(f"{path}: {exc.strerror or exc}") from None
    if stat.S_ISDIR(st.st_mode):
        return _open_dir(path, package, meter)
    name = path.name.lower()
    if not stat.S_ISREG(st.st_mode):
        raise UnreadableArchiveError(f"{path}: {describe_mode(st.st_mode)}, not an archive")
    # lazy: zipfile, tarfile and gzip (with shutil, bz2, lzma) only for an archive; doctor and
    # the installed release's scan read a directory
    if name.endswith((".whl", ".zip")):
        from lmcache_compat.scan.archives import open_wheel

        return open_wheel(path, package, meter)
    if name.endswith((".tar.gz", ".tgz")):
        from lmcache_compat.scan.archives import open_sdist

        return open_sdist(path, package, meter)
    raise UnreadableArchiveError(f"{path}: not a wheel (.whl), an sdist (.tar.gz) or a directory")
