"""Reading a release's Python sources without running any of its code.

A :class:`SourceTree` gives the bytes of ``package/...py`` files from a wheel, an sdist, an
unpacked source tree or an installed distribution. Archives are read in memory (nothing is
extracted to disk) with bounded work:

* every member name is checked: absolute names, ``..`` components, drive letters, symlinks and
  hard links make the whole archive unsafe (a real release has none);
* a member larger than :data:`MAX_MEMBER_BYTES` is refused whatever its header claims (reads stop
  at the cap), and a gzip stream that inflates past :data:`MAX_STREAM_BYTES`, or an archive with
  more than :data:`MAX_MEMBERS` members, is refused (zip and gzip bombs);
* metadata decides what the archive is: a wheel or sdist of another project is "not an LMCache
  release".
"""

from __future__ import annotations

import io
import os
import re
import stat
import sys
import tarfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from email.parser import HeaderParser
from pathlib import Path, PurePosixPath
from typing import IO, cast

from lmcache_compat.errors import LMCacheCompatError

__all__ = [
    "MAX_MEMBERS",
    "MAX_MEMBER_BYTES",
    "MAX_STREAM_BYTES",
    "InvalidSourceError",
    "NotLMCacheError",
    "ScanError",
    "SourceNotFoundError",
    "SourceTree",
    "UnreadableArchiveError",
    "open_source",
]

MAX_MEMBER_BYTES = 16 * 1024 * 1024
MAX_STREAM_BYTES = 512 * 1024 * 1024
MAX_MEMBERS = 100_000


class ScanError(LMCacheCompatError):
    """A scan could not be done. ``exit_code`` is the command line's exit status for it."""

    exit_code = 1


class SourceNotFoundError(ScanError):
    """The target does not exist (or LMCache/vLLM is not installed)."""

    exit_code = 3


class NotLMCacheError(ScanError):
    """The target exists but is not an LMCache release (or a vLLM with the vendored copy)."""

    exit_code = 4


class UnreadableArchiveError(ScanError):
    """The archive is corrupt, unsafe or too large to read within the caps."""

    exit_code = 5


class InvalidSourceError(ScanError):
    """A Python source file cannot be decoded or parsed (or nests too deeply)."""

    exit_code = 6


def _normalise_name(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _check_member_name(archive: str, name: str) -> str:
    """The member's path, or :class:`UnreadableArchiveError` if it could escape a directory."""
    if "\x00" in name:
        raise UnreadableArchiveError(f"{archive}: unsafe member name {name!r} (NUL byte)")
    posix = name.replace("\\", "/")
    if posix.startswith("/") or re.match(r"^[A-Za-z]:", posix):
        raise UnreadableArchiveError(f"{archive}: unsafe absolute member name {name!r}")
    if ".." in PurePosixPath(posix).parts:
        raise UnreadableArchiveError(f"{archive}: unsafe member name {name!r} (contains '..')")
    return posix.rstrip("/")


@dataclass
class SourceTree:
    """Python source files of one package, keyed by POSIX path relative to the tree's root
    (``lmcache/integration/vllm/vllm_v1_adapter.py``)."""

    description: str
    project: str | None
    version: str | None
    files: dict[str, bytes] = field(default_factory=dict, repr=False)
    root: Path | None = None

    def read(self, relpath: str) -> bytes | None:
        """The file's bytes, or ``None`` if the tree has no such file."""
        data = self.files.get(relpath)
        if data is not None or self.root is None:
            return data
        return _read_file_under(self.root, relpath)

    def has(self, relpath: str) -> bool:
        if relpath in self.files:
            return True
        return self.root is not None and _file_under(self.root, relpath) is not None


def _file_under(root: Path, relpath: str) -> Path | None:
    path = root.joinpath(*relpath.split("/"))
    if not path.is_file():
        return None
    # a symlink (anywhere on the way) may point out of the tree: only follow it if it stays in
    real, real_root = path.resolve(), root.resolve()
    if real_root not in real.parents:
        raise UnreadableArchiveError(
            f"{root}: {relpath} resolves to {real}, outside the source tree (symlink)"
        )
    return path


def _read_file_under(root: Path, relpath: str) -> bytes | None:
    path = _file_under(root, relpath)
    if path is None:
        return None
    try:
        size = path.stat().st_size
        if size > MAX_MEMBER_BYTES:
            raise UnreadableArchiveError(
                f"{path}: {size} bytes is over the {MAX_MEMBER_BYTES}-byte cap for a source file"
            )
        with path.open("rb") as fh:
            return _read_capped(fh, str(path))
    except OSError as exc:
        raise UnreadableArchiveError(f"{path}: cannot read ({exc.strerror or exc})") from None


def _read_capped(fh: IO[bytes], where: str) -> bytes:
    data = fh.read(MAX_MEMBER_BYTES + 1)
    if len(data) > MAX_MEMBER_BYTES:
        raise UnreadableArchiveError(
            f"{where}: member inflates past the {MAX_MEMBER_BYTES}-byte cap (zip bomb?)"
        )
    return data


def _parse_metadata(raw: bytes) -> tuple[str | None, str | None]:
    headers = HeaderParser().parsestr(raw[:65536].decode("utf-8", "replace"))
    return headers.get("Name"), headers.get("Version")


# --- wheels -----------------------------------------------------------------------------


def _open_wheel(path: Path, package: str, subtree: str) -> SourceTree:
    where = str(path)
    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        raise UnreadableArchiveError(f"{where}: not a readable zip/wheel ({exc})") from None
    with zf:
        infos = zf.infolist()
        if len(infos) > MAX_MEMBERS:
            raise UnreadableArchiveError(f"{where}: {len(infos)} members is over the cap")
        wanted: list[tuple[str, zipfile.ZipInfo]] = []
        metadata: zipfile.ZipInfo | None = None
        for info in infos:
            name = _check_member_name(where, info.filename)
            mode = info.external_attr >> 16
            if stat.S_ISLNK(mode):
                raise UnreadableArchiveError(f"{where}: unsafe symlink member {name!r}")
            if name.startswith(subtree) and name.endswith(".py"):
                wanted.append((name, info))
            elif re.fullmatch(r"[^/]+\.dist-info/METADATA", name):
                metadata = info
        project = version = None
        try:
            if metadata is not None:
                with zf.open(metadata) as fh:
                    project, version = _parse_metadata(_read_capped(fh, f"{where}!METADATA"))
            _require_project(where, project, package, has_package=bool(wanted))
            files = {}
            for name, info in wanted:
                with zf.open(info) as fh:
                    files[name] = _read_capped(fh, f"{where}!{name}")
        except (zipfile.BadZipFile, OSError, EOFError, NotImplementedError, RuntimeError) as exc:
            raise UnreadableArchiveError(f"{where}: corrupt member ({exc})") from None
        except Exception as exc:  # zlib.error and friends: corrupt data, never a traceback
            if isinstance(exc, ScanError):
                raise
            raise UnreadableArchiveError(f"{where}: corrupt member ({exc})") from None
    return SourceTree(f"wheel {path.name}", project, version, files)


def _require_project(where: str, project: str | None, package: str, *, has_package: bool) -> None:
    if project is not None and _normalise_name(project) != _normalise_name(package):
        raise NotLMCacheError(f"{where}: a release of {project!r}, not of {package!r}")
    if not has_package:
        raise NotLMCacheError(f"{where}: no {package}/ Python package inside")


# --- sdists -----------------------------------------------------------------------------


class _CountingReader(io.RawIOBase):
    """A file object that refuses to yield more than ``limit`` bytes (the inflated stream)."""

    def __init__(self, inner: IO[bytes], limit: int, where: str) -> None:
        self._inner = inner
        self._left = limit
        self._where = where

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        data = self._inner.read(min(len(buffer), self._left + 1))
        if len(data) > self._left:
            raise UnreadableArchiveError(
                f"{self._where}: inflates past the {MAX_STREAM_BYTES}-byte cap (gzip bomb?)"
            )
        self._left -= len(data)
        n = len(data)
        buffer[:n] = data
        return n


def _open_sdist(path: Path, package: str, subtree: str) -> SourceTree:
    where = str(path)
    files: dict[str, bytes] = {}
    pkg_info: dict[str, bytes] = {}
    try:
        import gzip

        with path.open("rb") as raw, gzip.GzipFile(fileobj=raw) as gz:
            counted = _CountingReader(cast(IO[bytes], gz), MAX_STREAM_BYTES, where)
            stream = io.BufferedReader(counted)
            with tarfile.open(fileobj=stream, mode="r|") as tf:
                for count, member in enumerate(_members(tf, where)):
                    if count >= MAX_MEMBERS:
                        raise UnreadableArchiveError(f"{where}: more than {MAX_MEMBERS} members")
                    name = _check_member_name(where, member.name)
                    if member.issym() or member.islnk():
                        raise UnreadableArchiveError(f"{where}: unsafe link member {name!r}")
                    if not member.isfile():
                        continue
                    parts = name.split("/")
                    if len(parts) == 2 and parts[1] == "PKG-INFO":
                        pkg_info[parts[0]] = _extract(tf, member, where)
                    elif (
                        len(parts) > 2
                        and parts[1] == package
                        and "/".join(parts[1:]).startswith(subtree)
                        and name.endswith(".py")
                    ):
                        files[name] = _extract(tf, member, where)
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
    return SourceTree(
        f"sdist {path.name}",
        project,
        version,
        {name[len(prefix) :]: data for name, data in files.items()},
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


def _extract(tf: tarfile.TarFile, member: tarfile.TarInfo, where: str) -> bytes:
    if member.size > MAX_MEMBER_BYTES:
        raise UnreadableArchiveError(
            f"{where}: member {member.name!r} is {member.size} bytes, over the "
            f"{MAX_MEMBER_BYTES}-byte cap"
        )
    fh = tf.extractfile(member)
    if fh is None:
        return b""
    return _read_capped(fh, f"{where}!{member.name}")


# --- directories and installed distributions ---------------------------------------------


def _version_from_dir(root: Path, package: str) -> tuple[str | None, str | None]:
    pkg_info = root / "PKG-INFO"
    if pkg_info.is_file():
        return _parse_metadata(pkg_info.read_bytes())
    for meta in sorted(root.glob("*.dist-info/METADATA")):
        project, version = _parse_metadata(meta.read_bytes())
        if project and _normalise_name(project) == _normalise_name(package):
            return project, version
    return None, None


def _open_dir(path: Path, package: str) -> SourceTree:
    root = path
    if not (root / package / "__init__.py").is_file():
        if path.name == package and (path / "__init__.py").is_file():
            root = path.parent
        else:
            raise NotLMCacheError(f"{path}: no {package}/__init__.py in this directory")
    project, version = _version_from_dir(root, package)
    return SourceTree(f"directory {path}", project, version, root=root)


def _open_installed(package: str) -> SourceTree:
    from importlib import metadata

    try:
        dist = metadata.distribution(package)
    except metadata.PackageNotFoundError:
        raise SourceNotFoundError(
            f"{package} is not installed in this environment ({sys.executable}); "
            "pass a wheel, an sdist or a source directory to scan instead"
        ) from None
    init = Path(str(dist.locate_file(f"{package}/__init__.py")))
    if not init.is_file():
        raise SourceNotFoundError(
            f"the installed {package} {dist.version} has no {package}/__init__.py beside its "
            "metadata (an editable install?); pass its source directory to scan instead"
        )
    return SourceTree(
        f"installed {package} {dist.version} ({init.parent})",
        dist.metadata["Name"],
        dist.version,
        root=init.parent.parent,
    )


def open_source(
    target: str | os.PathLike[str] | None,
    package: str = "lmcache",
    subtree: str | None = None,
) -> SourceTree:
    """Open ``target`` (a ``.whl``, a ``.tar.gz``, a directory, or ``None`` for the installed
    distribution) as the source tree of ``package``. Archives keep only the ``.py`` files under
    ``subtree`` (a path prefix, default: the whole package); directories are read on demand."""
    subtree = subtree or package + "/"
    if target is None:
        return _open_installed(package)
    path = Path(target)
    if not path.exists():
        raise SourceNotFoundError(f"{path}: no such file or directory")
    if path.is_dir():
        return _open_dir(path, package)
    name = path.name.lower()
    if name.endswith(".whl") or name.endswith(".zip"):
        return _open_wheel(path, package, subtree)
    if name.endswith((".tar.gz", ".tgz")):
        return _open_sdist(path, package, subtree)
    raise UnreadableArchiveError(f"{path}: not a wheel (.whl), an sdist (.tar.gz) or a directory")
