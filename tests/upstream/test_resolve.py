"""Finding a class where a release left it: re-exports (explicit, ``from x import *``,
``__all__``), aliases kept by a rename, and the diff's reading of a move that leaves a shim."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from lmcache_compat.upstream import locations as loc
from lmcache_compat.upstream.diff import ChangeKind, ReleaseView, diff_releases
from lmcache_compat.upstream.resolve import clear_find_cache, find, static_members, where
from lmcache_compat.upstream.scanner import scan
from tests.support.archives import ADAPTER_0_3_10_POST2, V1, make_tree

NEW = "lmcache/inprocess/integration/vllm/vllm_v1_adapter.py"
ELSEWHERE = "lmcache/v2/connector.py"
RENAMED = ADAPTER_0_3_10_POST2.replace("class LMCacheConnectorV1Impl", "class LMCacheConnectorImpl")


def _scan(tmp_path: Path, files: dict[str, str]):  # type: ignore[no-untyped-def]
    return scan(make_tree(tmp_path / "src", files))


@pytest.mark.parametrize(
    "shim",
    [
        "from lmcache.v2.connector import *\n",
        "from lmcache.v2.connector import LMCacheConnectorV1Impl\n",
        "from ...v2.connector import LMCacheConnectorV1Impl  # relative\n",
        "from lmcache.v2 import connector\n"
        "LMCacheConnectorV1Impl = connector.LMCacheConnectorV1Impl\n",
        "import lmcache.v2.connector as c\nLMCacheConnectorV1Impl = c.LMCacheConnectorV1Impl\n",
        "try:\n    from lmcache.v2.connector import *\nexcept ImportError:\n    pass\n",
    ],
    ids=["star", "explicit", "relative", "module-attribute", "import-as", "guarded-star"],
)
def test_a_shim_at_the_old_path_is_followed_and_recorded(tmp_path: Path, shim: str) -> None:
    result = _scan(tmp_path, {ELSEWHERE: ADAPTER_0_3_10_POST2, V1: shim})
    name = loc.CONNECTOR_IMPL.name
    assert result.modules[name] == "lmcache.v2.connector"
    assert result.found_by[name] == "known"
    assert result.reexported_at == {name: ("lmcache.integration.vllm.vllm_v1_adapter",)}
    assert result.to_json()["reexported_at"] == {name: ["lmcache.integration.vllm.vllm_v1_adapter"]}
    assert result.capabilities["kv_events"]


def test_star_honours_all_and_private_names(tmp_path: Path) -> None:
    hidden = {
        ELSEWHERE: ADAPTER_0_3_10_POST2 + '\n__all__ = ["Other"]\n',
        V1: "from lmcache.v2.connector import *\n",
    }
    result = _scan(tmp_path / "a", hidden)
    # not exported by the star import: found by name instead (its definition elsewhere)
    assert result.found_by[loc.CONNECTOR_IMPL.name] == "search"
    assert loc.CONNECTOR_IMPL.name not in result.reexported_at
    listed = {
        ELSEWHERE: ADAPTER_0_3_10_POST2
        + '\n__all__ = ["Other"]\n__all__ += ["LMCacheConnectorV1Impl"]\n',
        V1: "from lmcache.v2.connector import *\n",
    }
    assert _scan(tmp_path / "b", listed).found_by[loc.CONNECTOR_IMPL.name] == "known"


def test_star_import_cycles_and_self_imports_terminate(tmp_path: Path) -> None:
    files = {
        V1: "from lmcache.a import *\nfrom lmcache.integration.vllm.vllm_v1_adapter import *\n",
        "lmcache/a.py": "from lmcache.b import *\n",
        "lmcache/b.py": "from lmcache.a import *\n"
        "from lmcache.integration.vllm.vllm_v1_adapter import *\n",
        "lmcache/v1/cache_engine.py": "class LMCacheEngine:\n    def x(self): ...\n",
    }
    result = _scan(tmp_path, files)
    assert loc.CONNECTOR_IMPL.name in result.missing_classes


def test_a_rename_that_keeps_an_alias_is_the_same_class(tmp_path: Path) -> None:
    result = _scan(tmp_path, {V1: RENAMED + "\nLMCacheConnectorV1Impl = LMCacheConnectorImpl\n"})
    assert result.modules[loc.CONNECTOR_IMPL.name] == "lmcache.integration.vllm.vllm_v1_adapter"
    assert result.capabilities["kv_events"]
    assert not result.reexported_at  # defined (under its new name) at the known path


def _view(tmp_path: Path, files: dict[str, str]) -> ReleaseView:
    return ReleaseView.from_scan(_scan(tmp_path, files))


def test_diff_reads_a_move_with_a_shim_as_not_breaking(tmp_path: Path) -> None:
    old = _view(tmp_path / "old", {V1: ADAPTER_0_3_10_POST2})
    shimmed = _view(
        tmp_path / "new",
        {
            NEW: ADAPTER_0_3_10_POST2,
            V1: "from lmcache.inprocess.integration.vllm.vllm_v1_adapter import *\n",
        },
    )
    bare = _view(tmp_path / "bare", {NEW: ADAPTER_0_3_10_POST2})
    moved = diff_releases(old, shimmed)
    assert [c.kind for c in moved.changes] == [ChangeKind.CLASS_MOVED_REEXPORTED]
    assert not moved.breaking
    assert "still re-exports it" in moved.format()
    assert moved.to_json()["classes"][loc.CONNECTOR_IMPL.name]["moved"]["old_path_reexports"]
    gone = diff_releases(old, bare)
    assert [c.kind for c in gone.changes] == [ChangeKind.CLASS_MOVED] and gone.breaking
    # and the recorded shim survives a round trip through the scan JSON
    assert ReleaseView.from_json(
        _scan(
            tmp_path / "j",
            {
                NEW: ADAPTER_0_3_10_POST2,
                V1: "from lmcache.inprocess.integration.vllm.vllm_v1_adapter import *\n",
            },
        ).to_json()
    ).reexported_at


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """Install a tree as the importable ``lmcache`` (and forget it afterwards)."""

    def install(files: dict[str, str]) -> None:
        site = make_tree(tmp_path / "site", files)
        (site / "lmcache-9.9.9.dist-info").mkdir()
        (site / "lmcache-9.9.9.dist-info" / "METADATA").write_text(
            "Name: lmcache\nVersion: 9.9.9\n"
        )
        monkeypatch.syspath_prepend(str(site))
        clear_find_cache()

    yield install
    for name in [m for m in sys.modules if m == "lmcache" or m.startswith("lmcache.")]:
        del sys.modules[name]
    clear_find_cache()


def test_find_imports_a_renamed_class_from_where_it_is_defined(installed) -> None:  # type: ignore[no-untyped-def]
    installed(
        {
            ELSEWHERE: RENAMED,
            V1: "from lmcache.v2.connector import LMCacheConnectorImpl as LMCacheConnectorV1Impl\n",
        }
    )
    found = where(loc.CONNECTOR_IMPL)
    assert found == ("lmcache.v2.connector", "known", "LMCacheConnectorImpl")
    cls = find(loc.CONNECTOR_IMPL)
    assert cls.__name__ == "LMCacheConnectorImpl" and cls.__module__ == "lmcache.v2.connector"
    assert "get_kv_events" in static_members(loc.CONNECTOR_IMPL)


def test_the_connector_finds_an_engine_module_that_starts_with_a_bom(installed) -> None:  # type: ignore[no-untyped-def]
    installed({V1: "\ufeff" + ADAPTER_0_3_10_POST2})
    assert where(loc.CONNECTOR_IMPL).module == "lmcache.integration.vllm.vllm_v1_adapter"
    assert find(loc.CONNECTOR_IMPL).__name__ == "LMCacheConnectorV1Impl"
