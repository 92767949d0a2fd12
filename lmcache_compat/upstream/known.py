"""A scan answered from the shipped matrix: an artifact whose sha256 is a row's is the very file
that row was scanned from (``scripts/build_release_matrix.py``; the ``releases`` tier re-scans
every release and compares), so its scan is the row, and nothing is parsed.

This keeps ``lmcache-compat scan`` of a published release to hashing the file and reading the
shipped JSON: the scanner's modules are not even imported (most of the cost where bytecode is not
cached, as in tox envs run with ``PYTHONDONTWRITEBYTECODE``). ``scan --rescan`` reads the files.

The installed release is answered from its row the same way when its files are that release's
(:func:`shipped_row_of_tree`: one digest over every Python file of the package, compared with
the one recorded for the artifact): ``doctor`` then hashes the installed package instead of
parsing its largest modules.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator

from lmcache_compat.errors import LMCacheCompatError
from lmcache_compat.scan.describe import artifact_description
from lmcache_compat.upstream.shipped import release_index, release_row, scan_json_of

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up time)
if TYPE_CHECKING:
    from typing import Any

    from lmcache_compat.scan.sources import DirTree, SourceTree

__all__ = ["ARTIFACT_SUFFIXES", "shipped_row_of_tree", "shipped_scan_json", "tree_sha256"]

#: The artifacts a matrix row is built from.
ARTIFACT_SUFFIXES = (".whl", ".tar.gz")


def shipped_scan_json(target: str | os.PathLike[str] | None) -> dict[str, Any] | None:
    """``scan --json`` of ``target`` from the shipped matrix, or ``None`` when it is not an
    artifact a row was built from (then scan it: the scan reads it within its budgets, and says
    what it cannot read). Only a regular file of the size of a listed artifact is hashed (none
    is near the scan's stream budget); then the matrix's index and that one release's file are
    read, and neither the readers nor a model of the matrix are imported."""
    if target is None:
        return None
    name = os.fspath(target)
    if not name.endswith(ARTIFACT_SUFFIXES):
        return None
    try:
        st = os.stat(name)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    listed = [e for e in release_index()["releases"] if e.get("size") == st.st_size]
    if not listed:
        return None
    import hashlib  # lazy: only an artifact of a listed size is hashed

    digest = hashlib.sha256()
    try:
        with open(name, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
    except OSError:
        return None
    for entry in listed:
        if entry["sha256"] == digest.hexdigest():
            row = release_row(entry["version"])
            return scan_json_of(row, source=artifact_description(name))
    return None


def tree_sha256(tree: SourceTree) -> str:
    """One digest of every Python file of a release's package: the sha256 of
    ``relpath NUL sha256(file) LF`` per file, by path. A scan reads nothing but these files
    (and the version), so two trees with one digest scan alike; the maintainer script records
    each artifact's (``tree_sha256`` in its release's file)."""
    import hashlib  # lazy: only a tree of a listed release is hashed

    from lmcache_compat.scan.sources import DirTree  # lazy: as above

    if isinstance(tree, DirTree):
        files = _directory_files(tree)
    else:
        files = ((relpath, tree.read(relpath) or b"") for relpath in tree.python_files())
    lines = sorted(f"{relpath}\0{hashlib.sha256(data).hexdigest()}\n" for relpath, data in files)
    return hashlib.sha256("".join(lines).encode("utf-8")).hexdigest()


class _NotPlain(Exception):
    """A directory the plain walk will not vouch for (then the scan reads it, with its checks)."""


def _directory_files(tree: DirTree) -> Iterator[tuple[str, bytes]]:
    """``(relpath, bytes)`` of every ``.py`` file under the package of an installed tree, as the
    scan lists them (directories by ``is_dir`` without following links, at most the budgets'
    entries, depth, files and bytes), read with plain ``os`` calls: the scan's own reader checks
    links and special files per file through ``pathlib``, several times the cost of hashing. A
    tree this walk cannot read plainly (a special file, a budget) raises :class:`_NotPlain`."""
    budgets = tree.meter.budgets
    root = os.fspath(tree.root)
    stack = [(os.path.join(root, tree.package), tree.package, 0)]
    seen = files = spent = 0
    while stack:
        folder, rel, depth = stack.pop()
        with os.scandir(folder) as listing:
            entries = [(e.name, e.is_dir(follow_symlinks=False)) for e in listing]
        seen += len(entries)
        if seen > budgets.entries or depth > budgets.depth:
            raise _NotPlain
        for name, is_dir in entries:
            if is_dir:
                stack.append((os.path.join(folder, name), f"{rel}/{name}", depth + 1))
            elif name.endswith(".py"):
                files += 1
                with open(os.path.join(folder, name), "rb") as fh:
                    st = os.fstat(fh.fileno())
                    if not stat.S_ISREG(st.st_mode) or st.st_size > budgets.member_bytes:
                        raise _NotPlain
                    data = fh.read(st.st_size + 1)  # one more byte: a file that grew shows
                spent += len(data)
                if files > budgets.files or len(data) > budgets.member_bytes:
                    raise _NotPlain
                if spent > budgets.total_bytes:
                    raise _NotPlain
                yield f"{rel}/{name}", data


def shipped_row_of_tree(tree: SourceTree) -> dict[str, Any] | None:
    """The shipped row of an opened LMCache tree whose files are exactly its release's (the
    installed release, as ``doctor`` reads it), or ``None`` (another release, a modified or a
    dev tree: then scan it). Only a tree whose version the matrix lists is hashed."""
    from lmcache_compat.upstream import locations as loc  # lazy: as in tree_sha256
    from lmcache_compat.versions import parse_version

    if tree.package != loc.LMCACHE or not tree.version:
        return None
    try:
        version = parse_version(tree.version)
    except LMCacheCompatError:
        return None
    for entry in release_index()["releases"]:
        if parse_version(entry["version"]) == version:
            row = release_row(entry["version"])
            want = row.get("tree_sha256")
            try:
                return row if want and tree_sha256(tree) == want else None
            except (_NotPlain, OSError, LMCacheCompatError):
                return None  # the scan reads it, and says what it cannot read
    return None
