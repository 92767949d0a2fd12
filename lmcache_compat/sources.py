"""Reading a release's Python sources without running any of its code, within budgets.

A :class:`SourceTree` gives the bytes of ``package/...py`` files of a wheel, an sdist, an
unpacked source tree or an installed distribution, **on demand** (a wheel's members are read
only when the scan asks for them; an sdist's gzip stream is read through once), and lists the
package's Python files for a search by class name. Nothing is extracted to disk.

Every read is bounded (:class:`Budgets`; the README states the numbers): per file, per scan, per
archive. Exceeding one raises :class:`~lmcache_compat.errors.BudgetExceededError` naming it.
Every filesystem condition is one line: a target or member that is not a regular file (a
directory, a FIFO, a device) is never opened; permission errors, escaping names, links and
overlapping zip entries make the archive or tree unreadable. The installed distribution is the
exception for links: installers may link files into their own cache (``UV_LINK_MODE=symlink``).
"""

from __future__ import annotations

import io
import itertools
import os
import re
import stat
import tarfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from email.parser import HeaderParser
from pathlib import Path
from typing import IO, cast

from lmcache_compat.errors import (
    BudgetExceededError,
    NotLMCacheError,
    ScanError,
    SourceNotFoundError,
    UnreadableArchiveError,
)

__all__ = ["BUDGETS", "Budgets", "Meter", "SourceTree", "directory_tree", "open_source"]


@dataclass(frozen=True)
class Budgets:
    """The limits of one scan. Defaults hold every real release with a wide margin (the
    largest real LMCache module is 109 KB, 2,791 lines and 10,475 words; 0.5.7rc2 ships 892
    Python files, 8.6 MB)."""

    #: Bytes of any one member or file read (a zip member is never inflated past it).
    member_bytes: int = 16 * 1024 * 1024
    #: A Python source that is parsed: bytes, lines and words (``\\w+`` runs) before parsing
    #: (``ast.parse`` runs in C and cannot be interrupted, so its input is capped instead).
    source_bytes: int = 512 * 1024
    source_lines: int = 20_000
    source_words: int = 60_000
    #: Inflated bytes read in one scan, all members together.
    total_bytes: int = 96 * 1024 * 1024
    #: Inflated bytes of an sdist's gzip stream (it is read through once).
    stream_bytes: int = 512 * 1024 * 1024
    #: Entries of an archive, and Python files of a package listed for a search.
    members: int = 100_000
    files: int = 20_000
    #: Package metadata (``METADATA``/``PKG-INFO``) bytes.
    metadata_bytes: int = 1024 * 1024
    #: Class bodies read (bases included) and sources parsed in one scan.
    classes: int = 20_000
    parsed_bytes: int = 48 * 1024 * 1024


BUDGETS = Budgets()


class Meter:
    """Counts what one scan spends against its :class:`Budgets`."""

    def __init__(self, budgets: Budgets | None = None) -> None:
        self.budgets = budgets or BUDGETS
        self.read_bytes = 0
        self.parsed_bytes = 0
        self.classes = 0

    def spend(self, what: str, amount: int, where: str) -> None:
        limit = getattr(self.budgets, what)
        total = getattr(self, _COUNTERS[what]) + amount
        setattr(self, _COUNTERS[what], total)
        if total > limit:
            raise over(where, what, limit, _NAMES[what])


_COUNTERS = {"total_bytes": "read_bytes", "parsed_bytes": "parsed_bytes", "classes": "classes"}
_NAMES = {
    "total_bytes": "bytes read in one scan",
    "parsed_bytes": "source bytes parsed in one scan",
    "classes": "class bodies read in one scan",
}


def over(
    where: str, what: str, limit: int, detail: str, error: type[ScanError] = BudgetExceededError
) -> ScanError:
    """The error for a budget exceeded: where, what, and the budget's name and limit."""
    return error(f"{where}: {detail}: over the cap (scan budget {what}={limit})")


def _canonical(name: str) -> str:
    from packaging.utils import canonicalize_name

    return str(canonicalize_name(name))


def _check_member_name(archive: str, name: str) -> str:
    """The member's path, or :class:`UnreadableArchiveError` if it could escape a directory."""
    if "\x00" in name:
        raise UnreadableArchiveError(f"{archive}: unsafe member name {name!r} (NUL byte)")
    posix = name.replace("\\", "/")
    if posix.startswith("/") or (len(posix) > 1 and posix[1] == ":" and posix[0].isalpha()):
        raise UnreadableArchiveError(f"{archive}: unsafe absolute member name {name!r}")
    if ".." in posix.split("/"):
        raise UnreadableArchiveError(f"{archive}: unsafe member name {name!r} (contains '..')")
    return posix.rstrip("/")


def _describe_mode(mode: int) -> str:
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
            raise UnreadableArchiveError(f"{where}: {_describe_mode(mode)}, not a file")
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


def _read_capped(fh: IO[bytes], limit: int, where: str) -> bytes:
    data = fh.read(limit + 1)
    if len(data) > limit:
        raise over(where, "member_bytes", limit, "member inflates past the cap (zip bomb?)")
    return data


def _parse_metadata(raw: bytes) -> tuple[str | None, str | None]:
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


class _MemoryTree(SourceTree):
    """Members already read (an sdist: its stream is read through once)."""

    def __init__(self, *args: object, files: dict[str, bytes]) -> None:
        super().__init__(*args)  # type: ignore[arg-type]
        self._files = files

    def _read(self, relpath: str, limit: int | None) -> bytes | None:
        return self._files.get(relpath)

    def _python_files(self) -> Iterator[str]:
        return iter(sorted(self._files))


class _ZipTree(SourceTree):
    """A wheel, read member by member on demand."""

    def __init__(
        self, *args: object, zf: zipfile.ZipFile, members: dict[str, zipfile.ZipInfo]
    ) -> None:
        super().__init__(*args)  # type: ignore[arg-type]
        self._zf = zf
        self._members = members

    def _read(self, relpath: str, limit: int | None) -> bytes | None:
        info = self._members.get(relpath)
        if info is None:
            return None
        where = f"{self.description}!{relpath}"
        if limit is not None and info.file_size > limit:
            return b""  # declared too big to parse: not even opened
        try:
            with self._zf.open(info) as fh:
                if limit is not None:
                    return fh.read(limit + 1)
                return _read_capped(fh, self.meter.budgets.member_bytes, where)
        except ScanError:
            raise
        except Exception as exc:  # BadZipFile, zlib.error, EOFError...: corrupt, one line
            raise UnreadableArchiveError(f"{where}: corrupt member ({exc})") from None

    def _python_files(self) -> Iterator[str]:
        prefix = self.package + "/"
        return (n for n in sorted(self._members) if n.startswith(prefix) and n.endswith(".py"))

    def close(self) -> None:
        self._zf.close()


class _DirTree(SourceTree):
    """A directory on disk (a source tree, or the installed distribution's site-packages)."""

    def __init__(self, *args: object, root: Path, follow_links: bool) -> None:
        super().__init__(*args)  # type: ignore[arg-type]
        self.root = root
        self._real_root = root.resolve()
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
            real = path.resolve()
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
        top = self.root / self.package
        stack = [top]
        while stack:
            folder = stack.pop()
            try:
                entries = sorted(os.scandir(folder), key=lambda e: e.name)
            except PermissionError:
                raise UnreadableArchiveError(f"{folder}: permission denied") from None
            except OSError as exc:
                raise UnreadableArchiveError(f"{folder}: {exc.strerror}") from None
            for entry in entries:
                rel = os.path.relpath(entry.path, self.root).replace(os.sep, "/")
                if entry.is_dir(follow_symlinks=False):
                    stack.append(Path(entry.path))
                elif entry.name.endswith(".py"):
                    yield rel


# --- opening targets ------------------------------------------------------------------------------


def _require_project(where: str, project: str | None, package: str, *, has_package: bool) -> None:
    if project is not None and _canonical(project) != _canonical(package):
        raise NotLMCacheError(f"{where}: a release of {project!r}, not of {package!r}")
    if not has_package:
        raise NotLMCacheError(f"{where}: no {package}/ Python package inside")


def _check_overlaps(where: str, infos: list[zipfile.ZipInfo]) -> None:
    """Refuse a central directory whose entries share or overlap their data (a real wheel never
    does; a bomb lists one big member many times)."""
    spans = sorted((i.header_offset, i.header_offset + i.compress_size) for i in infos)
    for (start, end), (next_start, _) in itertools.pairwise(spans):
        if next_start < max(end, start + 1):
            raise UnreadableArchiveError(f"{where}: overlapping zip members (a zip bomb?)")


def _open_wheel(path: Path, package: str, meter: Meter) -> SourceTree:
    where = str(path)
    budgets = meter.budgets
    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        raise UnreadableArchiveError(f"{where}: not a readable zip/wheel ({exc})") from None
    try:
        infos = zf.infolist()
        if len(infos) > budgets.members:
            raise over(where, "members", budgets.members, f"{len(infos)} members")
        _check_overlaps(where, infos)
        members: dict[str, zipfile.ZipInfo] = {}
        metadata: zipfile.ZipInfo | None = None
        for info in infos:
            name = _check_member_name(where, info.filename)
            mode = info.external_attr >> 16
            if stat.S_ISLNK(mode):
                raise UnreadableArchiveError(f"{where}: unsafe symlink member {name!r}")
            if stat.S_IFMT(mode) not in (0, stat.S_IFREG, stat.S_IFDIR):
                raise UnreadableArchiveError(f"{where}: member {name!r} is not a regular file")
            if name.endswith(".py"):
                members[name] = info
            elif re.fullmatch(r"[^/]+\.dist-info/METADATA", name):
                metadata = info
        project = version = None
        if metadata is not None:
            with zf.open(metadata) as fh:
                raw = _read_capped(fh, budgets.metadata_bytes, f"{where}!METADATA")
            project, version = _parse_metadata(raw)
        has = any(n.startswith(package + "/") for n in members)
        _require_project(where, project, package, has_package=has)
    except ScanError:
        zf.close()
        raise
    except Exception as exc:  # BadZipFile, zlib.error, EOFError...: corrupt, one line
        zf.close()
        raise UnreadableArchiveError(f"{where}: corrupt member ({exc})") from None
    return _ZipTree(f"wheel {path.name}", project, version, package, meter, zf=zf, members=members)


class _CountingReader(io.RawIOBase):
    """A file object that refuses to yield more than ``limit`` bytes (the inflated stream)."""

    def __init__(self, inner: IO[bytes], limit: int, where: str) -> None:
        self._inner = inner
        self._left = limit
        self._limit = limit
        self._where = where

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        data = self._inner.read(min(len(buffer), self._left + 1))
        if len(data) > self._left:
            raise over(
                self._where, "stream_bytes", self._limit, "inflates past the cap (gzip bomb?)"
            )
        self._left -= len(data)
        n = len(data)
        buffer[:n] = data
        return n


def _open_sdist(path: Path, package: str, meter: Meter) -> SourceTree:
    where = str(path)
    budgets = meter.budgets
    files: dict[str, bytes] = {}
    pkg_info: dict[str, bytes] = {}
    kept = 0
    try:
        import gzip

        with path.open("rb") as raw, gzip.GzipFile(fileobj=raw) as gz:
            counted = _CountingReader(cast(IO[bytes], gz), budgets.stream_bytes, where)
            stream = io.BufferedReader(counted)
            with tarfile.open(fileobj=stream, mode="r|") as tf:
                for count, member in enumerate(_members(tf, where)):
                    if count >= budgets.members:
                        raise over(where, "members", budgets.members, "more than that many members")
                    name = _check_member_name(where, member.name)
                    if member.issym() or member.islnk():
                        raise UnreadableArchiveError(f"{where}: unsafe link member {name!r}")
                    if not member.isfile():
                        continue
                    parts = name.split("/")
                    if len(parts) == 2 and parts[1] == "PKG-INFO":
                        pkg_info[parts[0]] = _extract(tf, member, budgets.metadata_bytes, where)
                    elif len(parts) > 2 and parts[1] == package and name.endswith(".py"):
                        data = _extract(tf, member, budgets.member_bytes, where)
                        kept += len(data)
                        if kept > budgets.total_bytes:
                            raise over(where, "total_bytes", budgets.total_bytes, "sources kept")
                        files[name] = data
    except ScanError:
        raise
    except (tarfile.TarError, OSError, EOFError, ValueError) as exc:
        raise UnreadableArchiveError(f"{where}: not a readable .tar.gz sdist ({exc})") from None
    except Exception as exc:  # zlib.error: corrupt stream, never a traceback
        raise UnreadableArchiveError(f"{where}: corrupt archive ({exc})") from None
    roots = {name.split("/", 1)[0] for name in files}
    if len(roots) > 1:
        raise NotLMCacheError(f"{where}: {package}/ found under several roots {sorted(roots)}")
    root = roots.pop() if roots else next(iter(pkg_info), "")
    project, version = _parse_metadata(pkg_info[root]) if root in pkg_info else (None, None)
    _require_project(where, project, package, has_package=bool(files))
    prefix = root + "/"
    return _MemoryTree(
        f"sdist {path.name}",
        project,
        version,
        package,
        meter,
        files={name[len(prefix) :]: data for name, data in files.items()},
    )


def _members(tf: tarfile.TarFile, where: str) -> Iterator[tarfile.TarInfo]:
    while True:
        try:
            member = tf.next()
        except tarfile.TarError as exc:
            raise UnreadableArchiveError(f"{where}: corrupt tar stream ({exc})") from None
        if member is None:
            return
        yield member


def _extract(tf: tarfile.TarFile, member: tarfile.TarInfo, limit: int, where: str) -> bytes:
    if member.size > limit:
        raise over(where, "member_bytes", limit, f"member {member.name!r} is {member.size} bytes")
    fh = tf.extractfile(member)
    if fh is None:
        return b""
    return _read_capped(fh, limit, f"{where}!{member.name}")


def _metadata_of_dir(root: Path, package: str, meter: Meter) -> tuple[str | None, str | None]:
    """``(project, version)`` from ``root/PKG-INFO`` or a ``*.dist-info/METADATA`` of
    ``package`` in ``root``; metadata that is a link out of the tree or not a file is refused."""
    limit = meter.budgets.metadata_bytes
    candidates = [root / "PKG-INFO"]
    try:
        candidates += sorted(root.glob("*.dist-info/METADATA"))
    except OSError as exc:
        raise UnreadableArchiveError(f"{root}: {exc.strerror or exc}") from None
    real_root = root.resolve()
    for meta in candidates:
        if not os.path.lexists(meta):
            continue
        if real_root not in meta.resolve().parents:
            raise UnreadableArchiveError(f"{meta}: a link out of the source tree")
        project, version = _parse_metadata(read_regular_file(meta, limit, "metadata_bytes"))
        if meta.name == "PKG-INFO" or (project and _canonical(project) == _canonical(package)):
            return project, version
    return None, None


def _open_dir(path: Path, package: str, meter: Meter) -> SourceTree:
    root = path
    init = root / package / "__init__.py"
    if not init.is_file():
        if path.name == package and (path / "__init__.py").is_file():
            root = path.parent
        else:
            raise NotLMCacheError(f"{path}: no {package}/__init__.py in this directory")
    project, version = _metadata_of_dir(root, package, meter)
    return _DirTree(
        f"directory {path}", project, version, package, meter, root=root, follow_links=False
    )


def _open_installed(package: str, meter: Meter) -> SourceTree:
    from importlib import metadata

    try:
        dist = metadata.distribution(package)
        version = dist.version
    except metadata.PackageNotFoundError:
        import sys

        raise SourceNotFoundError(
            f"{package} is not installed in this environment ({sys.executable}); "
            "pass a wheel, an sdist or a source directory to scan instead"
        ) from None
    except (OSError, UnicodeError, ValueError) as exc:
        raise UnreadableArchiveError(
            f"the installed {package}'s metadata cannot be read ({type(exc).__name__}: {exc})"
        ) from None
    init = Path(str(dist.locate_file(f"{package}/__init__.py")))
    if not init.is_file():
        raise SourceNotFoundError(
            f"the installed {package} {version} has no {package}/__init__.py beside its "
            "metadata (an editable install?); pass its source directory to scan instead"
        )
    return _DirTree(
        f"installed {package} {version} ({init.parent})",
        package,
        version,
        package,
        meter,
        root=init.parent.parent,
        follow_links=True,
    )


def directory_tree(root: Path, package: str, meter: Meter) -> SourceTree:
    """The importable ``package`` under ``root`` (e.g. site-packages), links followed (an
    installer may link files into its cache)."""
    return _DirTree(
        f"{package} at {root / package}",
        package,
        None,
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
        raise UnreadableArchiveError(f"{path}: {_describe_mode(st.st_mode)}, not an archive")
    if name.endswith((".whl", ".zip")):
        return _open_wheel(path, package, meter)
    if name.endswith((".tar.gz", ".tgz")):
        return _open_sdist(path, package, meter)
    raise UnreadableArchiveError(f"{path}: not a wheel (.whl), an sdist (.tar.gz) or a directory")
