from __future__ import annotations

import ast
import io
import json
import os
import tarfile
import zipfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from lmcache_compat import budgets as sources
from lmcache_compat.core.catalog import owned_by
from lmcache_compat.core.probes import live_surface, probe
from lmcache_compat.core.roles import CONNECTOR
from lmcache_compat.core.signatures import (
    LiteralDefault,
    facts_of,
    from_json,
    render_params,
    to_json,
)
from lmcache_compat.report.cli import main
from lmcache_compat.scan.classreader import function_facts
from lmcache_compat.upstream.scanner import scan
from tests.support.archives import (
    ADAPTER_0_3_10_POST2,
    ENGINE,
    MP,
    V1,
    make_sdist,
    make_tree,
    make_wheel,
)
from tests.support.fakes import connector_view

#: What the test archive's connector (tests.support.archives.ADAPTER_0_3_10_POST2, written for
#: these tests) carries: a fact of that archive, not of the catalog; every other connector
#: capability is absent from it.
ARCHIVE_CAPS = {
    "get_finished",
    "request_finished",
    "async_lookup",
    "load_error_reporting",
    "shutdown",
    "kv_events",
}
EXPECTED_CAPS = {c.value: c.value in ARCHIVE_CAPS for c in owned_by(CONNECTOR)}


def _json(
    target: Path | None, *extra: str, capsys: pytest.CaptureFixture[str]
) -> tuple[int, Any, str]:
    code = main(["scan", *([str(target)] if target else []), "--json", *extra])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if out.strip() else None), err


@pytest.mark.parametrize("kind", ["wheel", "sdist", "tree"])
def test_scan_each_kind_of_target(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = {V1: ADAPTER_0_3_10_POST2, "lmcache/__init__.py": ""}
    if kind == "wheel":
        target = make_wheel(tmp_path / "lmcache-0.3.10.post2-py3-none-any.whl", files)
    elif kind == "sdist":
        target = make_sdist(tmp_path / "lmcache-0.3.10.post2.tar.gz", files, version="0.3.10.post2")
    else:
        target = make_tree(tmp_path / "src", files)
        (target / "PKG-INFO").write_bytes(b"Name: lmcache\nVersion: 0.3.10.post2\n\n")
    code, data, err = _json(target, capsys=capsys)
    assert code == 0, err
    assert data["lmcache_version"] == "0.3.10.post2"
    assert connector_view(data["capabilities"]) == EXPECTED_CAPS
    surface = data["surfaces"]["LMCacheConnectorV1Impl"]
    assert surface["save_kv_layer"] == ["layer_name", "kv_layer", "attn_metadata", "**kwargs"]
    assert surface["__init__"] == ["vllm_config", "role", "parent"]
    assert surface["wait_for_save"] == []
    assert kind in data["source"] or "directory" in data["source"]
    assert set(data["missing_classes"]) >= {"LMCacheMPSchedulerAdapter", "LMCacheEngine"}


SCAN_NEVER_RUNS = """
import pathlib
pathlib.Path({marker!r}).write_text("executed")
raise SystemExit("executed at import")
"""


def test_scanning_runs_no_code(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    marker = tmp_path / "marker"
    evil = SCAN_NEVER_RUNS.format(marker=str(marker))
    target = make_tree(
        tmp_path / "src",
        {"lmcache/__init__.py": evil, V1: evil + ADAPTER_0_3_10_POST2},
    )
    code, data, _ = _json(target, capsys=capsys)
    assert code == 0
    assert data["capabilities"]["shutdown"] is True
    assert not marker.exists()


BASES = {
    "lmcache/integration/vllm/base.py": """
class Base:
    def shutdown(self): ...
    def get_kv_events(self): ...
    @property
    def lookup_client(self): ...
""",
    "lmcache/integration/vllm/mixins.py": """
class Mixin:
    def register_kv_caches(self, kv_caches): ...
""",
    "lmcache/integration/vllm/__init__.py": "from .mixins import Mixin as ReExported\n",
    V1: """
from lmcache.integration.vllm.base import Base
from . import mixins
from lmcache.integration.vllm import ReExported
from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1
from typing import overload

class LMCacheConnectorV1Impl(Base, ReExported, KVConnectorBase_V1):
    def get_kv_events(self, *, required_flag): ...      # overrides the base: no longer usable
    get_block_ids_with_load_errors = None                  # an attribute, not a method
    @staticmethod
    def get_inference_info(): ...
    @classmethod
    def build(cls, x): ...
    @overload
    def request_finished(self, request): ...
    def request_finished(self, request, block_ids, /, extra=1, *args, flag=0, opt=2, **kw): ...
    if True:
        def get_finished(self, finished_req_ids): ...
""",
}


def test_bases_in_the_package_are_followed(tmp_path: Path) -> None:
    result = scan(make_tree(tmp_path / "src", BASES)).to_json()
    caps = result["capabilities"]
    assert caps["shutdown"] and caps["register_kv_caches"] and caps["inference_info"]
    assert caps["get_finished"] and caps["request_finished"]
    assert not caps["kv_events"]  # the override has a required keyword-only argument
    assert not caps["load_error_reporting"]
    surface = result["surfaces"]["LMCacheConnectorV1Impl"]
    assert "lookup_client" not in surface  # property
    assert surface["build"] == ["x"]
    assert surface["get_inference_info"] == []
    assert surface["request_finished"] == [
        "request",
        "block_ids",
        "/",
        "extra",
        "*args",
        "flag",
        "opt",
        "**kw",
    ]
    assert result["external_bases"] == {"LMCacheConnectorV1Impl": ["KVConnectorBase_V1"]}
    assert result["details"]["LMCacheConnectorV1Impl"]["request_finished"]["optional"] == [
        "extra",
        "flag",
        "opt",
    ]


def test_relative_import_and_base_cycles_terminate(tmp_path: Path) -> None:
    files = {
        V1: "from .a import LMCacheConnectorV1Impl\n",
        "lmcache/integration/vllm/a.py": "from .b import LMCacheConnectorV1Impl\n",
        "lmcache/integration/vllm/b.py": "from .a import LMCacheConnectorV1Impl\n",
        "lmcache/integration/vllm/__init__.py": "",
        "lmcache/integration/__init__.py": "",
        "lmcache/v1/cache_engine.py": (
            "class A(B): ...\nclass B(A): ...\nclass LMCacheEngine(A):\n    def x(self): ...\n"
        ),
    }
    result = scan(make_tree(tmp_path / "src", files)).to_json()
    assert "LMCacheConnectorV1Impl" in result["missing_classes"]
    assert result["surfaces"]["LMCacheEngine"] == {"x": []}


def test_dataclass_init_is_synthesised(tmp_path: Path) -> None:
    mp = """
from dataclasses import dataclass, field, KW_ONLY
from typing import ClassVar

@dataclass
class Base:
    use_mla: bool
    tp_size: int = 1

@dataclass
class ParallelStrategy(Base):
    VERSION: ClassVar[int] = 3
    pp_size: int = 1
    dcp_size: int = field(default=1)
    cache: dict = field(init=False, default_factory=dict)

@dataclass(frozen=True)
class LoadStoreOp:
    token_ids: list
    block_ids: list
    _: KW_ONLY
    start: int = 0
"""
    result = scan(make_tree(tmp_path / "src", {MP: mp, V1: ADAPTER_0_3_10_POST2})).to_json()
    assert result["surfaces"]["ParallelStrategy"]["__init__"] == [
        "use_mla",
        "tp_size",
        "pp_size",
        "dcp_size",
    ]
    assert result["surfaces"]["LoadStoreOp"]["__init__"] == ["token_ids", "block_ids", "*", "start"]


# --- bad input: clear errors, bounded work, distinct exit statuses ------------------------


def _fails(
    target: Path, status: int, fragment: str, capsys: pytest.CaptureFixture[str], *extra: str
) -> None:
    code = main(["scan", str(target), *extra])
    out, err = capsys.readouterr()
    assert code == status, (code, err)
    assert out == ""
    assert err.count("\n") == 1 and "Traceback" not in err
    assert fragment in err, err


def test_not_found(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _fails(tmp_path / "nope.whl", 3, "no such file", capsys)


def test_not_installed(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from lmcache_compat.distributions import Installed
    from lmcache_compat.scan import targets

    monkeypatch.setattr(targets, "installed_package", lambda name: Installed(name, None, ()))
    code = main(["scan"])
    assert code == 3
    assert "lmcache is not installed" in capsys.readouterr().err


@pytest.mark.parametrize(
    "member",
    ["../evil.py", "lmcache/../../evil.py", "/etc/evil.py", "C:/evil.py", "lmcache\\..\\..\\x.py"],
)
def test_wheel_with_escaping_member_names(
    member: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    whl = make_wheel(tmp_path / "x.whl", {V1: ADAPTER_0_3_10_POST2}, raw_names={member: b"x = 1\n"})
    _fails(whl, 5, "unsafe", capsys)


def test_wheel_with_symlink(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    whl = make_wheel(tmp_path / "x.whl", {"lmcache/__init__.py": ""}, symlinks={V1: "/etc/passwd"})
    _fails(whl, 5, "symlink", capsys)


@pytest.mark.parametrize("kind", ["links", "hardlinks"])
def test_sdist_with_links(kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    links = {"lmcache/x.py": "/etc/passwd"}
    sd = make_sdist(
        tmp_path / "x.tar.gz",
        {V1: ADAPTER_0_3_10_POST2},
        links=links if kind == "links" else None,
        hardlinks=links if kind == "hardlinks" else None,
    )
    _fails(sd, 5, "link member", capsys)


def test_sdist_with_escaping_member(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sd = make_sdist(tmp_path / "x.tar.gz", {V1: ADAPTER_0_3_10_POST2, "../../evil.py": "x=1"})
    _fails(sd, 5, "'..'", capsys)


def test_zip_bomb_member_is_refused_at_the_cap(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bomb = b"#" * (sources.BUDGETS.member_bytes + 1024)  # compresses to a few KB
    whl = make_wheel(tmp_path / "bomb.whl", {V1: bomb})
    assert whl.stat().st_size < 200_000
    _fails(whl, 5, "cap", capsys)


def test_zip_member_that_lies_about_its_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sources, "BUDGETS", replace(sources.BUDGETS, member_bytes=4096))
    whl = make_wheel(tmp_path / "lie.whl", {V1: "#" * 10_000})
    _fails(whl, 5, "cap", capsys)


def test_gzip_bomb_sdist_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sources, "BUDGETS", replace(sources.BUDGETS, stream_bytes=1 << 20))
    sd = make_sdist(
        tmp_path / "bomb.tar.gz", {V1: ADAPTER_0_3_10_POST2, "lmcache/zeros.bin": b"\0" * (4 << 20)}
    )
    _fails(sd, 5, "gzip bomb", capsys)


def test_sdist_member_over_the_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sources, "BUDGETS", replace(sources.BUDGETS, member_bytes=1000))
    sd = make_sdist(tmp_path / "big.tar.gz", {V1: ADAPTER_0_3_10_POST2 + "#" * 2000})
    _fails(sd, 5, "cap", capsys)


def test_too_many_members(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sources, "BUDGETS", replace(sources.BUDGETS, members=10))
    files: dict[str, str | bytes] = {f"lmcache/m{i}.py": "" for i in range(20)}
    _fails(make_wheel(tmp_path / "many.whl", files), 5, "over the cap", capsys)
    _fails(make_sdist(tmp_path / "many.tar.gz", files), 5, "more than", capsys)


@pytest.mark.parametrize("payload", [b"not a zip at all", b"PK\x03\x04" + b"\0" * 50])
def test_garbage_wheel(payload: bytes, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "garbage.whl"
    p.write_bytes(payload)
    _fails(p, 5, "not a readable zip", capsys)


def test_corrupt_member_data(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    whl = make_wheel(tmp_path / "c.whl", {V1: ADAPTER_0_3_10_POST2 * 20})
    data = bytearray(whl.read_bytes())
    with zipfile.ZipFile(whl) as zf:
        info = zf.getinfo(V1)
    start = info.header_offset + 30 + len(info.filename) + 10
    data[start : start + 200] = b"\xff" * 200
    whl.write_bytes(bytes(data))
    _fails(whl, 5, "corrupt", capsys)


def test_truncated_and_garbage_sdists(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sd = make_sdist(tmp_path / "t.tar.gz", {V1: ADAPTER_0_3_10_POST2 * 50})
    sd.write_bytes(sd.read_bytes()[:300])
    _fails(sd, 5, "", capsys)
    junk = tmp_path / "junk.tar.gz"
    junk.write_bytes(b"\x1f\x8b" + os.urandom(100))
    _fails(junk, 5, "", capsys)


def test_unknown_extension(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "x.rar"
    p.write_bytes(b"x")
    _fails(p, 5, "not a wheel", capsys)


def test_wheel_of_another_project(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    whl = make_wheel(
        tmp_path / "requests.whl", {"requests/__init__.py": ""}, name="requests", version="2.0"
    )
    _fails(whl, 4, "'requests', not of 'lmcache'", capsys)


def test_directory_that_is_not_lmcache(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "d").mkdir()
    _fails(tmp_path / "d", 4, "no lmcache/__init__.py", capsys)


def test_lmcache_without_any_known_module(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    whl = make_wheel(tmp_path / "l.whl", {"lmcache/__init__.py": "", "lmcache/other.py": ""})
    _fails(whl, 4, "none of the modules", capsys)


def test_non_utf8_source(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    whl = make_wheel(tmp_path / "e.whl", {V1: b"x = '\xff\xfe'\n"})
    _fails(whl, 6, "not decodable", capsys)


def test_declared_encoding_is_honoured(tmp_path: Path) -> None:
    src = "# -*- coding: latin-1 -*-\n# caf\xe9\n" + ADAPTER_0_3_10_POST2
    whl = make_wheel(tmp_path / "l1.whl", {V1: src.encode("latin-1")})
    assert scan(whl).capabilities["shutdown"]


def test_a_utf8_byte_order_mark_is_read_as_python_reads_it(tmp_path: Path) -> None:
    """A module starting with a BOM was refused as "declares the source encoding utf-8-sig"."""
    bom = b"\xef\xbb\xbf" + ADAPTER_0_3_10_POST2.encode()
    assert scan(make_wheel(tmp_path / "b.whl", {V1: bom})).capabilities["kv_events"]
    tree = make_tree(tmp_path / "src", {V1: bom})
    assert scan(tree).modules["LMCacheConnectorV1Impl"].endswith("vllm_v1_adapter")
    # with a coding line as well (PEP 263 allows both when they agree)
    both = b"\xef\xbb\xbf# -*- coding: utf-8 -*-\n" + ADAPTER_0_3_10_POST2.encode()
    assert scan(make_wheel(tmp_path / "c.whl", {V1: both})).capabilities["kv_events"]


def test_syntax_error_names_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    whl = make_wheel(tmp_path / "s.whl", {V1: "class X:\n    def f(self:\n"})
    _fails(whl, 6, f"{V1}:", capsys)


@pytest.mark.parametrize(
    "src",
    [
        "x = " + "(" * 5000 + ")" * 5000,
        "x = " + "+".join(["1"] * 200_000),
        "x = " + "-" * 200_000 + "1",
        "x = 1\0\n",
    ],
    ids=["parens", "long-chain", "unary", "nul"],
)
def test_deep_nesting_is_a_clear_error(
    src: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    whl = make_wheel(tmp_path / "d.whl", {V1: src})
    _fails(whl, 6, V1, capsys)


def test_directory_symlink_escaping_the_tree(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outside = tmp_path / "outside.py"
    outside.write_text(ADAPTER_0_3_10_POST2)
    root = make_tree(tmp_path / "src", {})
    target = root / V1
    target.parent.mkdir(parents=True)
    target.symlink_to(outside)
    _fails(root, 5, "outside the source tree", capsys)


def test_directory_can_be_the_package_itself(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "src", {V1: ADAPTER_0_3_10_POST2})
    assert scan(root / "lmcache").capabilities["kv_events"]


# --- live probe and static scan agree on the same class ---------------------------------


def test_live_and_static_agree(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "src", {V1: ADAPTER_0_3_10_POST2})
    static = scan(root)
    namespace: dict[str, Any] = {}
    exec(compile(ADAPTER_0_3_10_POST2, V1, "exec"), namespace)  # our own test source
    cls = namespace["LMCacheConnectorV1Impl"]
    assert probe(cls).as_dict(CONNECTOR) == connector_view(static.capabilities)
    live = {n: render_params(f) for n, f in live_surface(cls).items()}
    assert live == static.surfaces()["LMCacheConnectorV1Impl"]


@pytest.mark.parametrize(
    "params",
    [[], ["a", "b"], ["a", "/", "b"], ["a", "*args", "k", "**kw"], ["a", "*", "k"], ["*args"]],
)
def test_facts_round_trip_through_json(params: list[str]) -> None:
    assert render_params(from_json(params)) == params


def test_scan_installed_distribution(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The installed lmcache is located through importlib.metadata, not imported."""
    site = tmp_path / "site"
    make_tree(site, {V1: ADAPTER_0_3_10_POST2})
    dist_info = site / "lmcache-0.3.10.post2.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: lmcache\nVersion: 0.3.10.post2\n"
    )
    (dist_info / "RECORD").write_text("")
    monkeypatch.syspath_prepend(str(site))
    code, data, err = _json(None, capsys=capsys)
    assert code == 0, err
    assert data["lmcache_version"] == "0.3.10.post2"
    assert data["capabilities"]["kv_events"] is True
    assert "installed lmcache 0.3.10.post2" in data["source"]


def test_vllm_native_layout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    native = "vllm/distributed/kv_transfer/kv_connector/v1/lmcache_integration/"
    root = tmp_path / "site"
    for rel, text in {
        "vllm/__init__.py": "",
        native + "vllm_v1_adapter.py": ADAPTER_0_3_10_POST2,
    }.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    (root / "vllm-0.32.0.dist-info").mkdir()
    (root / "vllm-0.32.0.dist-info" / "METADATA").write_text("Name: vllm\nVersion: 0.32.0\n")
    code, data, err = _json(None, "--vllm-native", str(root), capsys=capsys)
    assert code == 0, err
    assert data["lmcache_version"] is None
    assert data["vllm_version"] == "0.32.0"
    assert data["capabilities"]["kv_events"] is True
    # the target may also come first: `scan X --vllm-native` scans X (it was ignored)
    code, data, err = _json(root, "--vllm-native", capsys=capsys)
    assert code == 0, err
    assert data["vllm_version"] == "0.32.0" and str(root) in data["source"]
    assert data["modules"]["LMCacheConnectorV1Impl"].endswith("lmcache_integration.vllm_v1_adapter")


def test_scan_text_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = make_tree(tmp_path / "src", {V1: ADAPTER_0_3_10_POST2})
    assert main(["scan", str(root)]) == 0
    out = capsys.readouterr().out
    assert "save_kv_layer(layer_name, kv_layer, attn_metadata, **kwargs)" in out
    assert "absent:          inference_info, register_kv_caches" in out


def test_engine_module_classes_with_same_names_elsewhere_are_ignored(tmp_path: Path) -> None:
    files = {
        V1: ADAPTER_0_3_10_POST2,
        ENGINE: "class LMCacheEngine:\n    def lookup(self, tokens, lookup_id): ...\n",
        "lmcache/storage_backend/cache_engine.py": (
            "class LMCacheEngine:\n    def other(self): ...\n"
        ),
    }
    result = scan(make_tree(tmp_path / "src", files)).to_json()
    assert result["surfaces"]["LMCacheEngine"] == {"lookup": ["tokens", "lookup_id"]}


def test_members_stream_stays_bounded_for_real_sized_sdist(tmp_path: Path) -> None:
    # a sanity check that reading many ordinary members works under the default caps
    files: dict[str, str | bytes] = {f"lmcache/m{i}.py": "x = 1\n" * 100 for i in range(300)}
    files[V1] = ADAPTER_0_3_10_POST2
    sd = make_sdist(tmp_path / "ok.tar.gz", files)
    assert scan(sd).lmcache_version == "0.3.0"
    with tarfile.open(sd) as tf:
        assert len(tf.getmembers()) == 302
    _ = io  # keep the import used for readers of this file


@pytest.mark.parametrize(
    ("source", "literal"),
    [
        ("None", "None"),
        ("-1", "-1"),
        ("+2.5", "2.5"),
        ("'x'", "'x'"),
        ("b'\\x00'", "b'\\x00'"),
        ("True", "True"),
        ("[]", None),
        ("frozenset()", None),
        ("float('inf')", None),
        ("1e999", None),
        ("'" + "y" * 100 + "'", None),
        ("...", None),
    ],
)
def test_literal_defaults_are_recorded_constants_only(source: str, literal: str | None) -> None:
    tree = ast.parse(f"def f(self, a={source}, *, b={source}): pass")
    fn = tree.body[0]
    assert isinstance(fn, ast.FunctionDef)
    facts = function_facts(fn, drop_first=True)
    detail = to_json(facts)[1]
    assert detail.get("defaults") == (None if literal is None else {"a": literal, "b": literal})
    namespace: dict[str, object] = {}
    exec(compile(tree, "<test>", "exec"), namespace)
    live = facts_of(namespace["f"])
    assert live == facts and to_json(live)[1] == detail  # live and static agree
    assert all(isinstance(p.default, LiteralDefault) is (literal is not None) for p in facts.params)
