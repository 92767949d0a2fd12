"""Scan hypothesis-generated wheels, sdists and source trees: every one is read within the
scan's budgets or refused in one line (a ``ScanError``), under the address-space and time limits
of ``conftest.py``. Never another exception, never a hang."""

from __future__ import annotations

import io
import os
import stat
import tarfile
import threading
import zipfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from lmcache_compat.errors import ScanError
from lmcache_compat.report.cli import main
from lmcache_compat.upstream.scanner import scan
from tests.support.archives import ADAPTER_0_3_10_POST2, MP, V1, metadata
from tests.tiers.fuzz.conftest import EXAMPLES, SECONDS_PER_SCAN, SEED, STATS

pytestmark = pytest.mark.fuzz

FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,  # capsys: read and cleared per example
    ],
)

_IDENT = st.sampled_from(
    ["LMCacheConnectorV1Impl", "LMCacheEngine", "Base", "K", "X", "shutdown", "get_kv_events"]
)
_VALID = st.sampled_from(
    [
        V1,
        MP,
        "lmcache/__init__.py",
        "lmcache/v1/cache_engine.py",
        "lmcache/inprocess/x.py",
        "lmcache/a/b/c.py",
    ]
)
_HOSTILE = st.sampled_from(
    [
        "lmcache/../evil.py",
        "/abs.py",
        "C:/win.py",
        "lmcache\\back.py",
        "lmcache/nul\x00.py",
        "lmcache-0.1.dist-info/METADATA",
        "other/x.py",
    ]
)


@st.composite
def python_source(draw: st.DrawFn) -> bytes:
    """Python-ish text: classes with bases, methods, decorators, dataclass fields, or noise."""
    kind = draw(st.sampled_from(["classes"] * 6 + ["real", "real", "noise", "deep", "coding"]))
    if kind == "real":
        return ADAPTER_0_3_10_POST2.encode()
    if kind == "noise":
        return draw(st.binary(max_size=2000))
    if kind == "deep":
        depth = draw(st.integers(1, 3000))
        return ("x = " + "(" * depth + ")" * depth + "\n").encode()
    if kind == "coding":
        codec = draw(st.sampled_from(["utf-8", "latin-1", "punycode", "utf-16", "bogus"]))
        return f"# -*- coding: {codec} -*-\nclass A: ...\n".encode()
    lines = [draw(st.sampled_from(["from lmcache.a import Base", "import lmcache.x as y", ""]))]
    for _ in range(draw(st.integers(0, 12))):
        name = draw(_IDENT)
        bases = ", ".join(draw(st.lists(_IDENT, max_size=4)))
        deco = draw(st.sampled_from(["", "@dataclass\n", "@dataclasses.dataclass(kw_only=True)\n"]))
        lines.append(f"{deco}class {name}({bases}):")
        for _ in range(draw(st.integers(0, 4))):
            meth = draw(_IDENT)
            parts = ["a", "b=1", "*c", "e=2", "**d"]
            args = ", ".join(p for p in parts if draw(st.booleans()))
            prefix = draw(st.sampled_from(["def", "async def", "@property\n    def"]))
            lines.append(f"    {prefix} {meth}(self{', ' if args else ''}{args}): ...")
        lines.append(f"    {draw(_IDENT)}: int = 0")
    return "\n".join(lines).encode()


@st.composite
def _members(draw: st.DrawFn) -> dict[str, bytes]:
    """Mostly files a release could have; one in five archives also has a hostile name."""
    files = draw(st.dictionaries(_VALID, python_source(), max_size=6))
    if draw(st.integers(0, 4)) == 0:
        files[draw(_HOSTILE)] = draw(python_source())
    elif draw(st.booleans()):  # usually the connector module too, so that most scans succeed
        files.setdefault(V1, ADAPTER_0_3_10_POST2.encode())
    return files


members = _members()


def _scan_bounded(target: Path | str) -> None:
    """Scan in a thread with a wall-clock limit; one line or a result, nothing else."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["result"] = scan(target)
        except BaseException as exc:  # recorded and judged below
            outcome["error"] = exc

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(SECONDS_PER_SCAN)
    assert not worker.is_alive(), f"scan of {target} ran over {SECONDS_PER_SCAN} s"
    STATS["examples"] += 1
    error = outcome.get("error")
    if error is None:
        STATS["scanned"] += 1
        return
    assert isinstance(error, ScanError), f"{type(error).__name__}: {error}"
    assert "\n" not in str(error).strip() or "HINT" in str(error)
    STATS["refused"] += 1


@seed(SEED)
@FUZZ
@given(
    files=members,
    meta=st.sampled_from(["ok", "ok", "ok", "none", "garbage", "other"]),
    data=st.data(),
)
def test_wheels(
    files: dict[str, bytes], meta: str, data: st.DataObject, tmp_path_factory: Any
) -> None:
    path = tmp_path_factory.mktemp("w") / "x.whl"
    with zipfile.ZipFile(
        path, "w", data.draw(st.sampled_from([zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED]))
    ) as zf:
        if meta != "none":
            body = {
                "ok": metadata("lmcache", "0.1"),
                "garbage": b"\xff\x00" * 9,
                "other": metadata("requests", "1"),
            }[meta]
            zf.writestr("lmcache-0.1.dist-info/METADATA", body)
        for name, content in files.items():
            info = zipfile.ZipInfo(name)
            if data.draw(st.integers(0, 9)) == 0:
                info.external_attr = (
                    data.draw(st.sampled_from([stat.S_IFLNK, stat.S_IFIFO, stat.S_IFREG])) << 16
                )
            zf.writestr(info, content)
    _scan_bounded(path)


@seed(SEED)
@FUZZ
@given(files=members, links=st.booleans(), truncate=st.integers(0, 64))
def test_sdists(files: dict[str, bytes], links: bool, truncate: int, tmp_path_factory: Any) -> None:
    path = tmp_path_factory.mktemp("s") / "x.tar.gz"
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        entries = {"PKG-INFO": metadata("lmcache", "0.1"), **files}
        for name, content in entries.items():
            info = tarfile.TarInfo(f"lmcache-0.1/{name}")
            info.size = len(content)
            tf.addfile(info, io.BytesIO(content))
        if links:
            info = tarfile.TarInfo("lmcache-0.1/lmcache/link.py")
            info.type = tarfile.SYMTYPE
            info.linkname = "/etc/passwd"
            tf.addfile(info)
    raw = buf.getvalue()
    path.write_bytes(raw[: len(raw) - truncate] if truncate else raw)
    _scan_bounded(path)


@seed(SEED)
@FUZZ
@given(
    files=members,
    specials=st.lists(st.sampled_from(["fifo", "dir", "outlink", "inlink"]), max_size=3),
)
def test_source_trees(files: dict[str, bytes], specials: list[str], tmp_path_factory: Any) -> None:
    root = tmp_path_factory.mktemp("t")
    (root / "lmcache").mkdir()
    (root / "lmcache" / "__init__.py").write_text("")
    for name, content in files.items():
        if ".." in name or name.startswith("/") or ":" in name or "\x00" in name or "\\" in name:
            continue
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.is_dir():
            path.write_bytes(content)
    target = root / V1
    target.parent.mkdir(parents=True, exist_ok=True)
    for special in specials:
        if os.path.lexists(target):
            if target.is_dir() and not target.is_symlink():
                continue
            target.unlink()
        if special == "fifo":
            os.mkfifo(target)
        elif special == "dir":
            target.mkdir()
        elif special == "outlink":
            target.symlink_to("/dev/zero")
        else:
            target.symlink_to(root / "lmcache" / "__init__.py")
    _scan_bounded(root)


@seed(SEED)
@FUZZ
@given(files=members)
def test_the_command_line_never_shows_a_traceback(
    files: dict[str, bytes], tmp_path_factory: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path_factory.mktemp("c") / "x.whl"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("lmcache-0.1.dist-info/METADATA", metadata("lmcache", "0.1"))
        for name, content in files.items():
            zf.writestr(name, content)
    code = main(["scan", str(path), "--json"])
    out, err = capsys.readouterr()
    STATS["examples"] += 1
    assert code in (0, 4, 5, 6), (code, err)
    if code:
        STATS["refused"] += 1
        assert out == "" and err.count("\n") == 1 and "Traceback" not in err
    else:
        STATS["scanned"] += 1
