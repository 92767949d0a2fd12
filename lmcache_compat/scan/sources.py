"""Reading a release's Python sources without running any of its code, within budgets.

A :class:`SourceTree` gives the bytes of ``package/...py`` files of a wheel, an sdist, an
unpacked source tree or an installed distribution, **on demand** (a wheel's members are read
only when the scan asks for them; an sdist's gzip stream is read through once), and lists the
package's Python files for a search by class name. Nothing is extracted to disk.

Every read is bounded (:mod:`lmcache_compat.budgets`; the README states the numbers): per
file, per scan, per archive; exceeding one is an error naming it.
Every filesystem condition is one line: a target or member that is not a regular file (a
directory, a FIFO, a device) is never opened; permission errors, escaping names, links and
overlapping zip entries make the archive or tree unreadable. The installed distribution is the
exception for links: installers may link files into their own cache (``UV_LINK_MODE=symlink``).
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from lmcache_compat.budgets import BUDGETS, Budgets, Meter, over
from lmcache_compat.errors import (
    BudgetExceededError,
    NotLMCacheError,
    UnreadableArchiveError,
)
from lmcache_compat.scan.describe import artifact_description

__all__ = [
    "BUDGETS",
    "Budgets",
    "DirTree",
    "Meter",
    "SourceTree",
    "artifact_description",
    "describe_mode",
    "directory_tree",
    "metadata_of_dir",
    "package_root",
    "parse_metadata",
    "read_regular_file",
    "require_project",
    "sha256_of_regular_file",
]


def _canonical(name: str) -> str:
    from packaging.utils import canonicalize_name  # lazy: a known artifact needs no names

    return str(canonicalize_name(name))


def describe_mode(mode: int) -> str:
    for test, word in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return word
    return "not a regular file"


def read_regular_file(path: Path, limit: int, what: str, where: str | None = None) -> bytes:
    """The bytes of a regular file, at most ``limit`` (over it: a budget error), never blocking
    on a FIFO or a device; every OS error is one line."""
    where = where or str(path)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except PermissionError:
        raise UnreadableArchiveError(f"{where}: permission denied") from None
    except OSError as exc:
        raise UnreadableArchiveError(f"{where}: cannot open ({exc.strerror or exc})") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise UnreadableArchiveError(f"{where}: {describe_mode(mode)}, not a file")
        size = os.fstat(fd).st_size
        if size > limit:
            raise over(where, what, limit, f"{size} bytes")
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = fh.read(limit + 1)
    except OSError as exc:
        raise UnreadableArchiveError(f"{where}: cannot read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)
    if len(data) > limit:
        raise over(where, what, limit, "the file grew while it was read")
    return data


def sha256_of_regular_file(path: Path, limit: int) -> str:
    """The hex sha256 of a regular file of at most ``limit`` bytes (read in chunks; never
    blocking on a FIFO or a device; every OS error is one line)."""
    import hashlib  # lazy: only a scan of a known artifact hashes

    where = str(path)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        raise UnreadableArchiveError(f"{where}: cannot open ({exc.strerror or exc})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnreadableArchiveError(f"{where}: {describe_mode(st.st_mode)}, not a file")
        if st.st_size > limit:
            raise over(where, "stream_bytes", limit, f"{st.st_size} bytes")
        digest = hashlib.sha256()
        with os.fdopen(fd, "rb", closefd=False) as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
    except OSError as exc:
        raise UnreadableArchiveError(f"{where}: cannot read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)
    return digest.hexdigest()


def parse_metadata(raw: bytes) -> tuple[str | None, str | None]:
    from email.parser import HeaderParser  # lazy: as in _canonical

    headers = HeaderParser().parsestr(raw.decode("utf-8", "replace"))
    return headers.get("Name"), headers.get("Version")


class SourceTree:
    """Python files of one package, by POSIX path relative to the tree's root
    (``lmcache/integration/vllm/vllm_v1_adapter.py``). Use as a context manager (or call
    :meth:`close`): an open wheel keeps its file open until then."""

    def __init__(
        self,
        description: str,
        project: str | None,
        version: str | None,
        package: str,
        meter: Meter,
    ) -> None:
        self.description = description
        self.project = project
        self.version = version
        self.package = package
        self.meter = meter

    def read(self, relpath: str, limit: int | None = None) -> bytes | None:
        """The file's bytes (``None``: no such file), counted against the scan's budgets. With
        ``limit``, a file longer than that is not returned: ``b""`` (the search by class name
        skips what could never be parsed)."""
        data = self._read(relpath, limit)
        if data is not None:
            self.meter.spend("total_bytes", len(data), f"{self.description}: {relpath}")
            if limit is not None and len(data) > limit:
                return b""
        return data

    def python_files(self) -> Iterator[str]:
        """Every ``.py`` file of the package (at most ``budgets.files``)."""
        limit = self.meter.budgets.files
        for count, name in enumerate(self._python_files()):
            if count >= limit:
                raise over(self.description, "files", limit, "too many Python files listed")
            yield name

    def _read(self, relpath: str, limit: int | None) -> bytes | None:  # pragma: no cover
        raise NotImplementedError

    def _python_files(self) -> Iterator[str]:  # pragma: no cover - abstract
        raise NotImplementedError

    def close(self) -> None:
        """Release the archive (nothing to do for directories)."""

    def __enter__(self) -> SourceTree:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def real_path(path: Path, where: str) -> Path:
    """``path`` with every link resolved, as ``os.path.realpath`` does on every Python; a link
    loop (``pathlib`` raises ``RuntimeError`` for one on 3.10 and 3.11, ``OSError`` on 3.13)
    is one :class:`UnreadableArchiveError` line."""
    try:
        real = Path(os.path.realpath(path, strict=True))
    except FileNotFoundError:
        return Path(os.path.realpath(path))  # a link to nothing: callers decide
    except (OSError, RuntimeError) as exc:
        code = getattr(exc, "errno", None)
        reason = "a symlink loop" if code in (None, errno.ELOOP) else str(exc)
        raise UnreadableArchiveError(f"{where}: {reason}") from None
    return real


class DirTree(SourceTree):
    """A directory on disk (a source tree, or the installed distribution's site-packages)."""

    def __init__(self, *args: object, root: Path, follow_links: bool) -> None:
        super().__init__(*args)  # type: ignore[arg-type]
        self.root = root
        self._real_root = real_path(root, str(root))
        self._follow_links = follow_links

    def _path(self, relpath: str) -> Path | None:
        path = self.root.joinpath(*relpath.split("/"))
        try:
            st = path.lstat()
        except FileNotFoundError:
            return None
        except PermissionError:
            raise UnreadableArchiveError(f"{self.root}: {relpath}: permission denied") from None
        except OSError as exc:
            raise UnreadableArchiveError(f"{self.root}: {relpath}: {exc.strerror}") from None
        if not self._follow_links:
            real = real_path(path, f"{self.root}: {relpath}")
            if self._real_root not in real.parents:
                raise UnreadableArchiveError(
                    f"{self.root}: {relpath} resolves to {real}, outside the source tree (symlink)"
                )
        elif stat.S_ISLNK(st.st_mode) and not path.exists():
            return None
        return path

    def _read(self, relpath: str, limit: int | None) -> bytes | None:
        path = self._path(relpath)
        if path is None:
            return None
        where = f"{self.root}: {relpath}"
        if limit is not None:
            try:
                return read_regular_file(path, limit, "source_bytes", where)
            except BudgetExceededError:
                return b""  # too big to parse: a search skips it
        return read_regular_file(path, self.meter.budgets.member_bytes, "member_bytes", where)

    def _python_files(self) -> Iterator[str]:
        budgets = self.meter.budgets
        top = self.root / self.package
        stack: list[tuple[Path, int]] = [(top, 0)]
        seen = 0
        while stack:
            folder, depth = stack.pop()
            names: list[tuple[str, bool]] = []
            try:
                with os.scandir(folder) as listing:
                    for entry in listing:  # counted as read: a huge folder stops at the budget
                        seen += 1
                        if seen > budgets.entries:
                            raise over(
                                f"{self.root}: {self.package}/",
                                "entries",
                                budgets.entries,
                                "too many directory entries to list",
                            )
                        names.append((entry.name, entry.is_dir(follow_symlinks=False)))
            except PermissionError:
                raise UnreadableArchiveError(f"{folder}: permission denied") from None
            except OSError as exc:
                raise UnreadableArchiveError(f"{folder}: {exc.strerror or exc}") from None
            for name, is_dir in sorted(names):
                path = folder / name
                if is_dir:
                    if depth + 1 > budgets.depth:
                        raise over(
                            f"{self.root}: {path.relative_to(self.root).as_posix()}",
                            "depth",
                            budgets.depth,
                            "directories nested too deep",
                        )
                    stack.append((path, depth + 1))
                elif name.endswith(".py"):
                    yield path.relative_to(self.root).as_posix()


# --- opening targets ------------------------------------------------------------------------------


def require_project(where: str, project: str | None, package: str, *, has_package: bool) -> None:
    if project is not None and _canonical(project) != _canonical(package):
        raise NotLMCacheError(f"{where}: a release of {project!r}, not of {package!r}")
    if not has_package:
        raise NotLMCacheError(f"{where}: no {package}/ Python package inside")


def metadata_of_dir(root: Path, package: str, meter: Meter) -> tuple[str | None, str | None]:
    """``(project, version)`` from ``root/PKG-INFO`` or a ``*.dist-info/METADATA`` of
    ``package`` in ``root``; metadata that is a link out of the tree or not a file is refused."""
    limit = meter.budgets.metadata_bytes
    candidates = [root / "PKG-INFO"]
    try:
        candidates += sorted(root.glob("*.dist-info/METADATA"))
    except OSError as exc:
        raise UnreadableArchiveError(f"{root}: {exc.strerror or exc}") from None
    real_root = real_path(root, str(root))
    for meta in candidates:
        if not os.path.lexists(meta):
            continue
        if real_root not in real_path(meta, str(meta)).parents:
            raise UnreadableArchiveError(f"{meta}: a link out of the source tree")
        project, version = parse_metadata(read_regular_file(meta, limit, "metadata_bytes"))
        if meta.name == "PKG-INFO" or (project and _canonical(project) == _canonical(package)):
            return project, version
    return None, None


def directory_tree(root: Path, package: str, meter: Meter) -> SourceTree:
    """The importable ``package`` under ``root`` (e.g. site-packages), links followed (an
    installer may link files into its cache)."""
    return DirTree(
        f"{package} at {root / package}",
        package,
        None,
        package,
        meter,
        root=root,
        follow_links=True,
    )


def package_root(package: str) -> Path | None:
    """The directory that holds the importable package ``package`` (its ``site-packages``),
    found without importing it (:func:`lmcache_compat.distributions.import_origin`)."""
    from lmcache_compat.distributions import import_origin  # lazy: only the installed copy

    origin = import_origin(package)
    return None if origin is None or not origin.is_dir() else origin.parent
