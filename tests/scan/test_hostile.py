"""Hostile and unlucky input: every case is bounded by a named budget or refused in one line,
and adapters never misroute data. Tests trip the fixed limits, never wall time."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lmcache_compat import (
    ConnectorAdapter,
    EngineAdapter,
    MPConfig,
    MPWorkerAdapter,
    NotAnEngineError,
    probe,
)
from lmcache_compat import budgets as sources_mod
from lmcache_compat.budgets import BUDGETS, Meter
from lmcache_compat.errors import (
    BudgetExceededError,
    InvalidSourceError,
    SourceTooLargeError,
    UnreadableArchiveError,
)
from lmcache_compat.report.cli import main
from lmcache_compat.upstream.matrix import load_matrix
from lmcache_compat.upstream.scanner import scan
from tests.support.archives import ADAPTER_0_3_10_POST2, V1, make_tree, make_wheel, metadata
from tests.support.fakes import Fake_0_5_6
from tools.generated_fakes import fake_module, instantiate


def _fails(target: Path, status: int, fragment: str, capsys: pytest.CaptureFixture[str]) -> str:
    code = main(["scan", str(target), "--json"])
    out, err = capsys.readouterr()
    assert code == status, (code, err)
    assert out == ""
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert fragment in err, err
    return err


# --- tiny inputs that would cost gigabytes or minutes ------------------------------------------


def test_doubling_base_classes_are_read_once_each(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = ["from somewhere import Ext", "class K0(Ext):", "    def m0(self): ..."]
    for i in range(1, 27):
        lines += [f"class K{i}(K{i - 1}, K{i - 1}):", f"    def m{i}(self): ..."]
    lines += ["class LMCacheConnectorV1Impl(K26):", "    pass"]
    whl = make_wheel(tmp_path / "d.whl", {V1: "\n".join(lines)})
    assert whl.stat().st_size < 4000
    meter = Meter()
    result = scan(whl, meter=meter)
    assert meter.classes == 28  # each class body read once: memoised, not 2**26 times
    assert result.external_bases["LMCacheConnectorV1Impl"] == ["Ext"]  # deduplicated
    assert len(json.dumps(result.to_json())) < 20_000
    assert main(["scan", str(whl), "--json"]) == 0
    assert len(capsys.readouterr().out) < 20_000


def test_a_class_budget_stops_a_wide_hierarchy(tmp_path: Path) -> None:
    lines = [f"class B{i}: ..." for i in range(200)]
    lines.append(f"class LMCacheConnectorV1Impl({', '.join(f'B{i}' for i in range(200))}): ...")
    whl = make_wheel(tmp_path / "w.whl", {V1: "\n".join(lines)})
    meter = Meter(dataclasses.replace(BUDGETS, classes=50))
    with pytest.raises(BudgetExceededError, match="classes=50"):
        scan(whl, meter=meter)


@pytest.mark.parametrize(
    ("source", "budget"),
    [
        (b"a\n" * (1 << 20), "source_bytes"),  # 2 MiB of statements: refused before parsing
        (b"a\n" * 30_000, "source_lines"),
        (b"a;" * 70_000, "source_words"),  # one line, 70k statements
    ],
    ids=["bytes", "lines", "words"],
)
def test_sources_over_the_parse_budgets_are_refused_before_parsing(
    source: bytes, budget: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    whl = make_wheel(tmp_path / "s.whl", {V1: source})
    err = _fails(whl, 6, f"scan budget {budget}=", capsys)
    assert V1 in err


def test_many_big_members_are_never_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """32 compressible 16 MiB members: a scan reads only what it needs (the known path), and a
    search reads at most the total budget, one member at a time."""
    big = b"#" * (16 * 1024 * 1024 - 16)
    files: dict[str, str | bytes] = {f"lmcache/junk{i}.py": big for i in range(32)}
    whl = make_wheel(tmp_path / "k.whl", {**files, V1: ADAPTER_0_3_10_POST2})
    assert whl.stat().st_size < 2_000_000
    meter = Meter()
    result = scan(whl, meter=meter)  # everything at its known path: no junk member is read
    assert result.capabilities["kv_events"] is True
    # the MP classes and engine are at no known path: a search looks, within its budget
    assert meter.read_bytes < 3 * BUDGETS.source_bytes


def test_overlapping_zip_entries_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    whl = make_wheel(tmp_path / "o.whl", {V1: ADAPTER_0_3_10_POST2})
    data = whl.read_bytes()
    with zipfile.ZipFile(whl) as zf:
        info = zf.getinfo(V1)
    # append central-directory entries that point at the same local header, many times
    with zipfile.ZipFile(whl, "a") as zf:
        for i in range(50):
            clone = zipfile.ZipInfo(f"lmcache/copy{i}.py")
            clone.header_offset = info.header_offset
            clone.compress_type = info.compress_type
            clone.compress_size = info.compress_size
            clone.file_size = info.file_size
            clone.CRC = info.CRC
            zf.filelist.append(clone)
            zf.NameToInfo[clone.filename] = clone
        zf._didModify = True  # type: ignore[attr-defined]  # rewrite the directory on close
    assert whl.read_bytes() != data
    _fails(whl, 5, "overlapping zip members", capsys)


# --- one line for every failure inside parsing -------------------------------------------------


def test_a_thousand_branch_elif_chain_at_module_level(tmp_path: Path) -> None:
    chain = "x = 1\nif x == 0:\n    pass\n" + "".join(
        f"elif x == {i}:\n    pass\n" for i in range(1, 1000)
    )
    whl = make_wheel(tmp_path / "e.whl", {V1: chain + ADAPTER_0_3_10_POST2})
    assert scan(whl).capabilities["shutdown"] is True


@pytest.mark.parametrize("codec", ["punycode", "utf-16", "rot13", "undefined"])
def test_only_an_allow_list_of_source_codecs_is_read(
    codec: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    whl = make_wheel(tmp_path / "c.whl", {V1: f"# -*- coding: {codec} -*-\nx = 1\n"})
    _fails(whl, 6, V1, capsys)


def test_memory_error_while_parsing_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ast

    def exhausted(*args: Any, **kwargs: Any) -> Any:
        raise MemoryError

    monkeypatch.setattr(ast, "parse", exhausted)
    with pytest.raises(InvalidSourceError, match="MemoryError"):
        scan(make_wheel(tmp_path / "m.whl", {V1: ADAPTER_0_3_10_POST2}))


# --- filesystem conditions ----------------------------------------------------------------------


def _tree_with_metadata(root: Path) -> Path:
    make_tree(root, {V1: ADAPTER_0_3_10_POST2})
    return root / "lmcache-0.3.10.post2.dist-info" / "METADATA"


def test_metadata_that_is_a_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    meta = _tree_with_metadata(tmp_path / "t")
    meta.mkdir(parents=True)
    _fails(tmp_path / "t", 5, "a directory, not a file", capsys)


def test_metadata_that_is_a_fifo_never_hangs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    meta = _tree_with_metadata(tmp_path / "t")
    meta.parent.mkdir(parents=True)
    os.mkfifo(meta)
    _fails(tmp_path / "t", 5, "a FIFO, not a file", capsys)


def test_metadata_linked_to_dev_zero(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    meta = _tree_with_metadata(tmp_path / "t")
    meta.parent.mkdir(parents=True)
    meta.symlink_to("/dev/zero")
    _fails(tmp_path / "t", 5, "link out of the source tree", capsys)


@pytest.mark.parametrize("where", ["lmcache/self.py", "lmcache/v1/loop.py"])
def test_a_symlink_loop_in_a_scanned_tree_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    """A module that links to itself: ``pathlib`` raises RuntimeError for it on Python 3.10 and
    3.11 and OSError on 3.13; every interpreter gives one line and status 5 (the scan-python
    tiers run this). The search by class name reads every file, the loop included."""
    root = make_tree(tmp_path / "t", {"lmcache/__init__.py": "", "lmcache/v1/x.py": "X = 1\n"})
    (root / where).symlink_to(Path(where).name)
    _fails(root, 5, f"{where}: a symlink loop", capsys)


def test_a_symlink_loop_in_an_installed_tree_is_skipped_like_a_dangling_link(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Links are followed in an installed tree (an installer's cache): a loop, like a link to
    nothing, is no file; the search by class name (the class moved) reads past it."""
    moved = {"lmcache/__init__.py": "", "lmcache/moved/adapter.py": ADAPTER_0_3_10_POST2}
    site = make_tree(tmp_path / "site", moved)
    (site / "lmcache" / "loop.py").symlink_to("loop.py")
    info = site / "lmcache-0.3.10.post2.dist-info"
    info.mkdir()
    (info / "METADATA").write_bytes(metadata("lmcache", "0.3.10.post2"))
    monkeypatch.syspath_prepend(str(site))
    result = scan()
    assert result.capabilities["kv_events"] is True
    assert set(result.found_by.values()) == {"search"}


def test_a_huge_sparse_pkg_info_is_never_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = make_tree(tmp_path / "t", {V1: ADAPTER_0_3_10_POST2})
    with (root / "PKG-INFO").open("wb") as fh:
        fh.write(metadata("lmcache", "0.3.10.post2"))
        fh.truncate(3 * 1024**3)  # 3 GB, sparse: no disk used
    _fails(root, 5, "scan budget metadata_bytes=", capsys)


@pytest.mark.parametrize("suffix", ["x.whl", "x.tar.gz"])
def test_an_archive_that_is_a_fifo_never_hangs(
    suffix: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fifo = tmp_path / suffix
    os.mkfifo(fifo)
    _fails(fifo, 5, "a FIFO", capsys)


def test_a_member_that_is_not_a_regular_file_in_a_tree(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = make_tree(tmp_path / "t", {})
    (root / V1).parent.mkdir(parents=True)
    os.mkfifo(root / V1)
    _fails(root, 5, "a FIFO, not a file", capsys)


def test_permission_errors_are_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """CI runs as root, where chmod 000 changes nothing: the OS error is injected."""
    root = make_tree(tmp_path / "t", {V1: ADAPTER_0_3_10_POST2})
    real_open = os.open

    def denied(path: Any, *args: Any, **kwargs: Any) -> int:
        if str(path).endswith("vllm_v1_adapter.py"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", denied)
    _fails(root, 5, "permission denied", capsys)
    monkeypatch.undo()

    real_scandir = os.scandir

    def no_listing(path: Any) -> Iterator[os.DirEntry[str]]:
        if str(path).endswith("lmcache"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", no_listing)
    moved = make_tree(tmp_path / "m", {"lmcache/elsewhere.py": ADAPTER_0_3_10_POST2})
    _fails(moved, 5, "permission denied", capsys)


def test_installed_distribution_may_link_into_an_installer_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``UV_LINK_MODE=symlink``: every file of the install links into uv's cache."""
    cache = make_tree(tmp_path / "cache", {V1: ADAPTER_0_3_10_POST2})
    site = tmp_path / "site"
    (site / V1).parent.mkdir(parents=True)
    (site / "lmcache" / "__init__.py").symlink_to(cache / "lmcache" / "__init__.py")
    (site / V1).symlink_to(cache / V1)
    info = site / "lmcache-0.3.10.post2.dist-info"
    info.mkdir()
    (info / "METADATA").symlink_to(tmp_path / "METADATA")
    (tmp_path / "METADATA").write_bytes(metadata("lmcache", "0.3.10.post2"))
    monkeypatch.syspath_prepend(str(site))
    assert scan().capabilities["kv_events"] is True


def test_non_ascii_output_on_an_ascii_terminal(tmp_path: Path) -> None:
    target = tmp_path / "répertoire-ü"
    make_tree(target, {V1: ADAPTER_0_3_10_POST2})
    env = {**os.environ, "PYTHONIOENCODING": "ascii"}
    for args in (["scan", str(target)], ["scan", str(tmp_path / "nope-é")]):
        r = subprocess.run(
            [sys.executable, "-m", "lmcache_compat", *args], capture_output=True, env=env
        )
        assert b"Traceback" not in r.stderr, r.stderr
        assert r.returncode in (0, 3)
        assert b"\\xe9" in r.stdout + r.stderr or b"\\xfc" in r.stdout + r.stderr


def test_doctor_with_non_utf8_metadata(tmp_path: Path) -> None:
    site = tmp_path / "site"
    make_tree(site, {V1: ADAPTER_0_3_10_POST2})
    info = site / "lmcache-0.3.10.post2.dist-info"
    info.mkdir()
    (info / "METADATA").write_bytes(b"Metadata-Version: 2.1\nName: lmcache\nVersion: \xff\xfe\n")
    env = {**os.environ, "PYTHONPATH": str(site)}
    r = subprocess.run(
        [sys.executable, "-m", "lmcache_compat", "doctor"], capture_output=True, text=True, env=env
    )
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == 0
    assert "cannot be read" in r.stdout
    assert (
        "installed, version unknown" in r.stdout
        and "not installed" not in r.stdout.split("vLLM")[0]
    )


# --- adapters that never misroute data ------------------------------------------------------------


class _EqualMeta(type):
    """Every class made by this metaclass compares (and hashes) equal to every other one."""

    def __eq__(cls, other: object) -> bool:
        return isinstance(other, _EqualMeta)

    def __hash__(cls) -> int:
        return 1


def test_probe_cache_is_keyed_by_identity_not_equality() -> None:
    base: Any = Fake_0_5_6

    class A(base, metaclass=_EqualMeta):  # type: ignore[misc]
        def get_block_ids_with_load_errors(self) -> set[int]:
            return set()

    class B(base, metaclass=_EqualMeta):  # type: ignore[misc]
        def get_block_ids_with_load_errors(self) -> set[int]:
            return {7}

    assert A == B and hash(A) == hash(B)
    assert ConnectorAdapter(A()).get_block_ids_with_load_errors() == set()
    assert ConnectorAdapter(B()).get_block_ids_with_load_errors() == {7}


def test_salts_given_as_a_generator_are_read_once_in_order() -> None:
    mod = fake_module(load_matrix().row("0.5.6"))
    target = instantiate(mod.LMCacheMPWorkerAdapter)
    worker = MPWorkerAdapter(target)
    salts = (s for s in ["tenant-a", "", "tenant-c"])
    worker.batched_submit_store_requests(
        ["r1", "r2", "r3"], ["o1", "o2", "o3"], "ev", cache_salts=salts
    )
    _, _, kwargs = target._call_args[-1]
    assert kwargs["cache_salts"] == ["tenant-a", "", "tenant-c"]
    assert kwargs["request_ids"] == ["r1", "r2", "r3"]
    with pytest.raises(ValueError, match="2 values for 3 requests"):
        worker.batched_submit_store_requests(
            ["r1", "r2", "r3"], ["o1", "o2", "o3"], "ev", cache_salts=iter(["a", "b"])
        )


def test_a_class_is_refused_where_an_engine_is_expected() -> None:
    mod = fake_module(load_matrix().row("0.5.6"))
    with pytest.raises(NotAnEngineError, match="not an instance"):
        EngineAdapter(mod.LMCacheEngine)
    with pytest.raises(NotAnEngineError, match="not an instance"):
        ConnectorAdapter(Fake_0_5_6)


def test_server_urls_from_an_unordered_collection_are_refused() -> None:
    for unordered in ({"tcp://a:1", "tcp://b:1"}, frozenset({"tcp://a:1"}), {"tcp://a:1": 1}):
        with pytest.raises(TypeError, match="order"):
            MPConfig(unordered, "m", 16)  # type: ignore[arg-type]


def test_odd_method_objects_are_not_capabilities() -> None:
    base: Any = Fake_0_5_6

    class Builtin(base):  # type: ignore[misc]
        shutdown = len  # a builtin stored on a class is not bound: shutdown() would not bind

    class Async(base):  # type: ignore[misc]
        async def shutdown(self) -> None:  # a coroutine that would never run
            await asyncio.sleep(0)

    for cls in (Builtin, Async):
        assert "shutdown" not in probe(cls), cls
        shutdown: Any = ConnectorAdapter(cls()).shutdown
        assert shutdown() is None  # the documented fallback, a no-op


def test_adapters_over_many_engine_classes_make_no_classes() -> None:
    """Fallbacks and strict-mode raisers are bound per instance: whatever the number of engine
    classes, every adapter is a ConnectorAdapter (no class is generated per shape)."""
    base: Any = Fake_0_5_6
    for i in range(300):
        cls = type(f"Engine{i}", (base,), {})
        assert type(ConnectorAdapter(cls(), strict=True)) is ConnectorAdapter


def test_source_budget_errors_are_source_errors() -> None:
    assert issubclass(SourceTooLargeError, InvalidSourceError)
    assert issubclass(BudgetExceededError, UnreadableArchiveError)
    assert sources_mod.BUDGETS.source_bytes >= 4 * 110_000  # the largest real module is 109 KB


# --- directory walks: every entry counts, checked while walking -----------------------------


class _CountingScandir:
    """``os.scandir`` that counts the entries a walk takes from it."""

    def __init__(self) -> None:
        self.taken = 0
        self._real = os.scandir

    def __call__(self, path: Any) -> Any:
        listing = self._real(path)
        counter = self

        class Listing:
            def __enter__(self) -> Iterator[os.DirEntry[str]]:
                def entries() -> Iterator[os.DirEntry[str]]:
                    for entry in listing:
                        counter.taken += 1
                        yield entry

                return entries()

            def __exit__(self, *exc: object) -> None:
                listing.close()

        return Listing()


def test_stray_files_stop_a_search_at_the_entries_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Files that are not Python count too (400k stray files took 16 s): the walk stops at the
    budget, not after listing everything."""
    root = make_tree(tmp_path / "src", {"lmcache/v1/other.py": "x = 1\n"})
    stray = root / "lmcache" / "data"
    stray.mkdir()
    for i in range(3000):
        (stray / f"f{i}.bin").touch()
    monkeypatch.setattr(sources_mod, "BUDGETS", dataclasses.replace(BUDGETS, entries=1000))
    counting = _CountingScandir()
    monkeypatch.setattr(os, "scandir", counting)
    _fails(root, 5, "scan budget entries=1000", capsys)
    assert counting.taken <= 1002  # stopped while walking (the budget, plus the one over it)


def test_deep_directories_stop_at_the_depth_budget(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = make_tree(tmp_path / "src", {"lmcache/v1/other.py": "x = 1\n"})
    deep = root / "lmcache"
    for i in range(BUDGETS.depth + 2):
        deep = deep / f"d{i}"
    deep.mkdir(parents=True)
    err = _fails(root, 5, f"scan budget depth={BUDGETS.depth}", capsys)
    assert "directories nested too deep" in err


def test_a_real_sized_tree_is_well_within_the_walk_budgets(tmp_path: Path) -> None:
    # 0.5.7rc2 installed: about 2,100 entries, 7 deep
    files = {f"lmcache/p{i // 100}/q/m{i}.py": "x = 1\n" for i in range(2100)}
    files[V1] = ADAPTER_0_3_10_POST2
    root = make_tree(tmp_path / "src", files)
    assert BUDGETS.entries >= 20 * 2135 and BUDGETS.depth >= 4 * 7
    assert scan(root).capabilities["kv_events"]


# --- tar header records: bounded before tarfile reads them --------------------------------------


def _sdist_with_header(
    path: Path, *, pax: int = 0, long_name: int = 0, sparse: bool = False
) -> Path:
    import io
    import tarfile

    fmt = tarfile.GNU_FORMAT if long_name or sparse else tarfile.PAX_FORMAT
    with tarfile.open(path, "w:gz", format=fmt) as tf:
        data = metadata("lmcache", "0.3.0")
        info = tarfile.TarInfo("lmcache-0.3.0/PKG-INFO")
        info.size = len(data)
        tf.addfile(info, io.BytesIO(data))
        src = ADAPTER_0_3_10_POST2.encode()
        name = f"lmcache-0.3.0/{V1}"
        if long_name:
            name = "lmcache-0.3.0/lmcache/" + "d/" * (long_name // 2) + "m.py"
        info = tarfile.TarInfo(name)
        info.size = len(src)
        if pax:
            info.pax_headers = {"comment": "x" * pax}
        if sparse:
            info.type = tarfile.GNUTYPE_SPARSE
        tf.addfile(info, io.BytesIO(src))
    return path


def test_a_huge_pax_header_is_refused_before_it_is_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A 150 MB pax header peaked at 552 MB; now the 512-byte header block that announces it is
    enough to refuse it (the test uses 1 MB; the budget is 64 KiB)."""
    sd = _sdist_with_header(tmp_path / "pax.tar.gz", pax=1 << 20)
    err = _fails(sd, 5, f"scan budget header_bytes={BUDGETS.header_bytes}", capsys)
    assert "tar header record" in err


def test_a_huge_gnu_long_name_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sd = _sdist_with_header(tmp_path / "gnu.tar.gz", long_name=200_000)
    _fails(sd, 5, "scan budget header_bytes=", capsys)


def test_ordinary_pax_and_gnu_records_are_read(tmp_path: Path) -> None:
    assert scan(_sdist_with_header(tmp_path / "a.tar.gz", pax=1000)).capabilities["kv_events"]
    assert scan(_sdist_with_header(tmp_path / "b.tar.gz", long_name=300)).version == "0.3.0"


def test_a_sparse_member_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _fails(_sdist_with_header(tmp_path / "s.tar.gz", sparse=True), 5, "GNU sparse member", capsys)
