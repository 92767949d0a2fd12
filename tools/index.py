"""The package index, reached the way this machine's installers are configured (never a written
address): ``PIP_INDEX_URL`` / ``UV_DEFAULT_INDEX`` / ``UV_INDEX_URL``, else pip's configured
``index-url``, else pip's own default. A company mirror configured for pip is what the tiers,
scripts and benchmarks read.

Read through the simple repository API in JSON (PEP 691, with PEP 700's ``versions``,
``upload-time`` and ``size``). :func:`releases` groups a project's files by version;
:func:`download` fetches one file, bounded and sha256-checked.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)

ACCEPT = "application/vnd.pypi.simple.v1+json"
#: Environment variables that name the index, in the order installers honour them.
INDEX_VARIABLES = ("PIP_INDEX_URL", "UV_DEFAULT_INDEX", "UV_INDEX_URL")


def _pip_python() -> str | None:
    """An interpreter that has pip: this one, or the one its virtual environment was made from
    (uv's venvs have no pip)."""
    if importlib.util.find_spec("pip") is not None:
        return sys.executable
    base = getattr(sys, "_base_executable", None)
    return base if base and base != sys.executable else None


def _pip(*args: str) -> str | None:
    python = _pip_python()
    if python is None:
        return None
    done = subprocess.run(
        [python, "-m", "pip", *args], capture_output=True, text=True, timeout=120, check=False
    )
    out = done.stdout.strip()
    return out if done.returncode == 0 and out else None


@functools.cache
def index_url() -> str:
    """The simple index this machine's installers use."""
    for name in INDEX_VARIABLES:
        value = os.environ.get(name, "").strip()
        if value:
            return value
    for key in ("global.index-url", "install.index-url", "download.index-url"):
        configured = _pip("config", "get", key)
        if configured:
            return configured
    default = _pip_default()
    if default is None:
        raise SystemExit(
            "no package index is configured and pip is not available to say its default: set "
            "PIP_INDEX_URL"
        )
    return default


def _pip_default() -> str | None:
    python = _pip_python()
    if python is None:
        return None
    done = subprocess.run(
        [python, "-c", "from pip._internal.models.index import PyPI; print(PyPI.simple_url)"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return done.stdout.strip() or None


def project(name: str) -> dict[str, Any]:
    """The index's JSON page of ``name`` (PEP 691), every file's ``url`` made absolute."""
    url = f"{index_url().rstrip('/')}/{canonicalize_name(name)}/"
    request = urllib.request.Request(url, headers={"Accept": ACCEPT})
    with urllib.request.urlopen(request, timeout=120) as response:
        data: dict[str, Any] = json.loads(response.read())
        base = response.geturl()
    for f in data.get("files", []):
        f["url"] = urllib.parse.urljoin(base, f["url"])
    return data


def file_version(filename: str) -> str | None:
    """The version a distribution file is of (``None``: not a wheel or an sdist name)."""
    try:
        if filename.endswith(".whl"):
            return str(parse_wheel_filename(filename)[1])
        return str(parse_sdist_filename(filename)[1])
    except (InvalidWheelFilename, InvalidSdistFilename):
        return None


def releases(name: str) -> dict[str, list[dict[str, Any]]]:
    """Version -> its files (``filename``, ``url``, ``hashes``, ``packagetype``, ``size``,
    ``upload-time``, ``yanked``), in the index's order."""
    out: dict[str, list[dict[str, Any]]] = {}
    for f in project(name).get("files", []):
        version = file_version(str(f["filename"]))
        if version is None:
            continue
        f["packagetype"] = "bdist_wheel" if str(f["filename"]).endswith(".whl") else "sdist"
        out.setdefault(version, []).append(f)
    return out


def find_file(name: str, filename: str) -> dict[str, Any]:
    files: list[dict[str, Any]] = project(name).get("files", [])
    for f in files:
        if f["filename"] == filename:
            return f
    raise SystemExit(f"{filename} is not on the index ({index_url()})")


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def download(
    f: dict[str, Any], dest: Path, *, sha256: str | None = None, max_bytes: int = 1 << 31
) -> Path:
    """``f`` (an index file entry) as ``dest`` (a file path, or a directory to put it in),
    written atomically and only when its sha256 is ``sha256`` (default: the index's). A file
    already there with that digest is kept."""
    want = sha256 or f.get("hashes", {}).get("sha256")
    if not want:
        raise SystemExit(f"{f['filename']}: the index gives no sha256")
    path = dest / str(f["filename"]) if dest.is_dir() else dest
    if path.exists() and sha256_of(path) == want:
        return path
    if int(f.get("size") or 0) > max_bytes:
        raise SystemExit(f"{f['filename']}: {f['size']} bytes, over {max_bytes}")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    tmp = Path(tmp_name)
    try:
        digest, size = hashlib.sha256(), 0
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(f["url"], timeout=600) as resp:
            for block in iter(lambda: resp.read(1 << 20), b""):
                size += len(block)
                if size > max_bytes:
                    raise SystemExit(f"{f['filename']}: over {max_bytes} bytes")
                digest.update(block)
                out.write(block)
        if digest.hexdigest() != want:
            raise SystemExit(f"{f['filename']}: sha256 {digest.hexdigest()} is not {want}")
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def cached(f: dict[str, Any], cache: Path, *, offline: bool, project_name: str = "") -> Path:
    """The artifact ``f`` (``filename`` and ``hashes.sha256``; ``url`` optional) from ``cache``
    when a file with that sha256 is there, else downloaded into it (an entry without ``url`` is
    looked up on ``project_name``'s index page first). ``offline``: the cache only. The one
    cache-or-download of the maintainer scripts."""
    path = cache / str(f["filename"])
    want = str(f["hashes"]["sha256"])
    if path.exists() and sha256_of(path) == want:
        return path
    if offline:
        raise SystemExit(f"{path} is not in the cache (with sha256 {want}) and --offline was given")
    print(f"  downloading {f['filename']}", file=sys.stderr)
    entry = f if "url" in f else find_file(project_name, str(f["filename"]))
    return download(entry, path, sha256=want)
