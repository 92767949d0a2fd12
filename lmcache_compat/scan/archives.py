"""Wheels and sdists, read in memory without running or extracting anything.

A wheel's members are read on demand (:class:`ZipTree`); an sdist's gzip stream is read through
once and only the package's Python files are kept (:class:`MemoryTree`). Every member name is
checked (absolute names, ``..``, NUL, links make the archive unsafe), every read is capped, and
overlapping zip entries are refused.
"""

from __future__ import annotations

import gzip
import io
import itertools
import re
import stat
import tarfile
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, cast

from lmcache_compat.budgets import Meter, over
from lmcache_compat.errors import NotLMCacheError, ScanError, UnreadableArchiveError
from lmcache_compat.scan.sources import (
    SourceTree,
    artifact_description,
    parse_metadata,
    require_project,
)

__all__ = ["open_sdist", "open_wheel"]


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


def _read_capped(fh: IO[bytes], limit: int, where: str) -> bytes:
    data = fh.read(limit + 1)
    if len(data) > limit:
        raise over(where, "member_bytes", limit, "member inflates past the cap (zip bomb?)")
    return data


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


def _check_overlaps(where: str, infos: list[zipfile.ZipInfo]) -> None:
    """Refuse a central directory whose entries share or overlap their data (a real wheel never
    does; a bomb lists one big member many times)."""
    spans = sorted((i.header_offset, i.header_offset + i.compress_size) for i in infos)
    for (start, end), (next_start, _) in itertools.pairwise(spans):
        if next_start < max(end, start + 1):
            raise UnreadableArchiveError(f"{where}: overlapping zip members (a zip bomb?)")


def open_wheel(path: Path, package: str, meter: Meter) -> SourceTree:
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
            project, version = parse_metadata(raw)
        has = any(n.startswith(package + "/") for n in members)
        require_project(where, project, package, has_package=has)
    except ScanError:
        zf.close()
        raise
    except Exception as exc:  # BadZipFile, zlib.error, EOFError...: corrupt, one line
        zf.close()
        raise UnreadableArchiveError(f"{where}: corrupt member ({exc})") from None
    return _ZipTree(
        artifact_description(path), project, version, package, meter, zf=zf, members=members
    )


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


#: Tar records whose whole content ``tarfile`` reads into memory before the member they
#: describe (pax extended headers, GNU long names and links); a GNU sparse member's map of
#: extension blocks is read the same way (and no sdist has sparse files).
_HEADER_TYPES = frozenset(
    {tarfile.XHDTYPE, tarfile.XGLTYPE, tarfile.SOLARIS_XHDTYPE, tarfile.GNUTYPE_LONGNAME,
     tarfile.GNUTYPE_LONGLINK}
)  # fmt: skip


def _bounded_tarinfo(limit: int, where: str) -> type[tarfile.TarInfo]:
    """A ``TarInfo`` that refuses a header record over ``limit`` bytes (and sparse members)
    from its header block, before ``tarfile`` reads the record's content."""

    class BoundedTarInfo(tarfile.TarInfo):
        # ``_proc_member`` is where tarfile (3.10-3.13 alike) dispatches on the type just read
        # from the 512-byte header block, before it reads any content.
        def _proc_member(self, tf: tarfile.TarFile) -> tarfile.TarInfo:
            if self.type in _HEADER_TYPES and self.size > limit:
                raise over(
                    where,
                    "header_bytes",
                    limit,
                    f"a {self.size}-byte tar header record (pax or GNU long name)",
                )
            if self.type == tarfile.GNUTYPE_SPARSE:
                raise UnreadableArchiveError(f"{where}: a GNU sparse member {self.name!r}")
            return super()._proc_member(tf)  # type: ignore[misc,no-any-return]

    return BoundedTarInfo


def open_sdist(path: Path, package: str, meter: Meter) -> SourceTree:
    where = str(path)
    budgets = meter.budgets
    files: dict[str, bytes] = {}
    pkg_info: dict[str, bytes] = {}
    kept = 0
    try:
        with path.open("rb") as raw, gzip.GzipFile(fileobj=raw) as gz:
            counted = _CountingReader(cast(IO[bytes], gz), budgets.stream_bytes, where)
            stream = io.BufferedReader(counted)
            tarinfo = _bounded_tarinfo(budgets.header_bytes, where)
            with tarfile.open(fileobj=stream, mode="r|", tarinfo=tarinfo) as tf:
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
    project, version = parse_metadata(pkg_info[root]) if root in pkg_info else (None, None)
    require_project(where, project, package, has_package=bool(files))
    prefix = root + "/"
    return _MemoryTree(
        artifact_description(path),
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
