"""Where this lmcache-compat came from, decided once, and the install command that works there.

A hint that names lmcache-compat itself (an extra to install, an upgrade) must work where the
user is: in a clone of the repository (or an unpacked sdist), ``pip install '.[config]'``; with
an installed distribution, ``pip install 'lmcache-compat[config]'``. :func:`source_tree` decides
which, once per process: the package is imported from a source tree (its parent holds the
project's ``pyproject.toml``: a checkout on ``PYTHONPATH``, the tests), or the installed
distribution was installed from one (its ``direct_url.json`` names a directory: ``pip install
.``, ``pip install -e .``). Nothing is read until a hint is asked for.
"""

from __future__ import annotations

import functools
import shlex
from pathlib import Path

__all__ = ["DISTRIBUTION", "install_hint", "pip_line", "source_tree"]

DISTRIBUTION = "lmcache-compat"
#: The line of pyproject.toml that says a directory is this project's source tree.
_PROJECT_NAME = f'name = "{DISTRIBUTION}"'


def _is_source_tree(root: Path) -> bool:
    try:
        text = (root / "pyproject.toml").read_text(encoding="utf-8")
    except (OSError, UnicodeError):
        return False
    return _PROJECT_NAME in text.splitlines()


def _installed_from() -> tuple[Path, bool] | None:
    """The directory the installed distribution was installed from, and whether editably."""
    from importlib import metadata  # lazy: only a hint pays for it

    try:
        raw = metadata.distribution(DISTRIBUTION).read_text("direct_url.json")
    except (metadata.PackageNotFoundError, OSError, UnicodeError, ValueError):
        return None
    from lmcache_compat.errors import LMCacheCompatError, MetadataError
    from lmcache_compat.inputs import load_json  # the reader contract: budgets, one error

    try:
        data = load_json(raw or "null", "direct_url.json", MetadataError)
    except LMCacheCompatError:
        return None
    if not isinstance(data, dict) or "dir_info" not in data:
        return None  # from an index, or an archive file
    url = str(data.get("url", ""))
    if not url.startswith("file://"):
        return None
    from urllib.parse import unquote, urlsplit
    from urllib.request import url2pathname

    editable = bool((data.get("dir_info") or {}).get("editable"))
    return Path(url2pathname(unquote(urlsplit(url).path))), editable


@functools.cache
def source_tree() -> tuple[Path, bool] | None:
    """The source tree this lmcache-compat runs from or was installed from, and whether the
    install follows the tree (editable, or imported from it directly); ``None``: an installed
    distribution."""
    here = Path(__file__).resolve().parent.parent
    if _is_source_tree(here):
        return here, True
    found = _installed_from()
    if found is not None and _is_source_tree(found[0]):
        return found
    return None


def _spelled(root: Path) -> str:
    """``.`` for the current directory, else the tree's path."""
    try:
        if Path.cwd().resolve() == root:
            return "."
    except OSError:
        pass
    return str(root)


def install_hint(extra: str | None = None, *, upgrade: bool = False) -> str:
    """The command that installs lmcache-compat (with ``extra``), or upgrades it, here: from the
    source tree when it came from one, else from the package index."""
    tree = source_tree()
    if tree is None:
        name = f"{DISTRIBUTION}[{extra}]" if extra else DISTRIBUTION
        return f"pip install {'-U ' if upgrade else ''}{shlex.quote(name)}"
    root, follows = tree
    where = _spelled(root)
    if upgrade:
        pull = "git pull" if where == "." else f"git -C {shlex.quote(where)} pull"
        return pull if follows else f"{pull} && pip install {shlex.quote(where)}"
    return f"pip install {shlex.quote(f'{where}[{extra}]' if extra else where)}"


def pip_line(*requirements: str, no_deps: bool = False) -> str:
    """The ``pip install`` line for third-party ``requirements`` (``vllm==X``,
    ``lmcache>=A,<B``), each quoted for a POSIX shell; ``no_deps``: keep what is installed
    (``--no-deps``: LMCache's own requirements would replace a CPU build's torch)."""
    flags = "--no-deps " if no_deps else ""
    return f"pip install {flags}{' '.join(shlex.quote(r) for r in requirements)}"
