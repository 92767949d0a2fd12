"""The supported API is one list (``lmcache_compat._api.SUPPORTED``), tied to the code and docs:

* every module of the package is supported (the list names it) or internal by the rule
  (``_api.is_internal``), so a name in any ``__all__`` is on the list or internal;
* a supported module's ``__all__`` is exactly its names on the list; a package's lazy table
  names only them, and each resolves to a module that defines or exports it;
* docs/api.md is rendered from the list, every name has a summary there, and every
  ``from lmcache_compat... import`` the README, docs and examples show imports supported names;
* the modules the subpackage layout moved still import, as the new module, with one warning.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
import subprocess
import sys
import warnings
from pathlib import Path
from types import ModuleType

import pytest

import lmcache_compat
from lmcache_compat import _api

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "lmcache_compat"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("update_docs", ROOT / "scripts/update_docs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _static_all(path: Path) -> list[str] | None:
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            value = ast.literal_eval(node.value)
            assert isinstance(value, list), path
            return value
    return None


def test_the_list_has_no_duplicates_and_names_real_modules() -> None:
    assert len(set(_api.SUPPORTED)) == len(_api.SUPPORTED)
    modules = _modules()
    for module in _api.supported_modules():
        assert module in modules, f"{module}: on the supported list but no such module"
        assert not _api.is_internal(module), module


def test_every_module_is_supported_or_internal() -> None:
    """A new module (or a name added to an ``__all__``) is either on the list or internal by
    the documented rule: nothing is public by accident."""
    supported = _api.supported_modules()
    undecided = [
        m
        for m in _modules()
        if m not in supported and not _api.is_internal(m) and m not in _api.MOVED
    ]
    assert undecided == [], (
        f"{undecided}: neither supported nor internal; add the public names to "
        "lmcache_compat/_api.py SUPPORTED, or make the module internal (_api.INTERNAL)"
    )


def test_a_supported_modules_all_is_its_names_on_the_list() -> None:
    modules = _modules()
    for module, names in _api.supported_modules().items():
        declared = _static_all(modules[module])
        assert declared is not None, f"{module}: supported, but has no __all__"
        extra, missing = set(declared) - set(names), set(names) - set(declared)
        assert not extra, (
            f"{module}.__all__ names {sorted(extra)}, which lmcache_compat/_api.py SUPPORTED "
            f'does not list: add a line "{module}.<name>", per name (or drop it from __all__)'
        )
        assert not missing, f"{module}: {sorted(missing)} on the list but not in its __all__"


def test_the_lazy_tables_name_supported_names_that_resolve() -> None:
    script = _script()
    modules = _modules()
    supported = _api.supported_modules()
    for module, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        lazy = script._lazy_table(tree)
        if not lazy:
            continue
        assert module in supported, f"{module}: a lazy table in an internal module"
        assert set(lazy) <= set(supported[module]), (
            module,
            sorted(set(lazy) - set(supported[module])),
        )
        for name, target in lazy.items():
            assert target in modules, (module, name, target)
            exported = _static_all(modules[target])
            assert exported is not None and name in exported, (
                f"{module}._LAZY[{name!r}] -> {target}, whose __all__ lacks it"
            )
    for module, names in supported.items():
        for name in names:
            script.definition(module, name)  # LookupError if it leads nowhere


def _type_checking_imports(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for stmt in node.body:
                if isinstance(stmt, ast.ImportFrom):
                    names.update(alias.asname or alias.name for alias in stmt.names)
    return names


def test_a_packages_lazy_names_are_what_type_checkers_import() -> None:
    """mypy sees a lazy name only through the package's ``TYPE_CHECKING`` imports."""
    script = _script()
    for module, path in _modules().items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        lazy = set(script._lazy_table(tree))
        if lazy:
            assert _type_checking_imports(tree) == lazy, module


#: Third-party packages a supported name may need at first use (not installed in the unit tier).
_HEAVY = {"vllm", "torch", "sglang", "lmcache"}


def test_every_supported_name_resolves() -> None:
    skipped = []
    for module, names in _api.supported_modules().items():
        loaded = importlib.import_module(module)
        for name in names:
            try:
                getattr(loaded, name)
            except ModuleNotFoundError as exc:
                if (exc.name or "").split(".")[0] not in _HEAVY:
                    raise
                skipped.append(f"{module}.{name}")
    # the connector classes subclass vLLM's base: they need vLLM (the grid tiers import them)
    assert all(name.startswith("lmcache_compat.vllm.") for name in skipped), skipped


def test_the_docs_list_every_supported_name_with_a_summary() -> None:
    script = _script()
    rendered = script.render_api()
    for module, names in _api.supported_modules().items():
        assert f"`{module}`:" in rendered
        for name in names:
            where, node = script.definition(module, name)
            assert script._summary(where, node), (
                f"{module}.{name}: no docstring or #: comment at {where} for docs/api.md"
            )
    # test_docs.py::test_generated_sections_are_current proves the page equals this rendering
    assert ("docs/api.md", "supported-api") in script.SECTIONS


_FROM_IMPORT = re.compile(r"^\s*from (lmcache_compat[\w.]*) import \(?([\w, ]+)", re.MULTILINE)
_IMPORT = re.compile(r"^\s*import (lmcache_compat[\w.]*)", re.MULTILINE)


def test_the_docs_and_examples_import_only_supported_names() -> None:
    pages = [ROOT / "README.md", *sorted(ROOT.joinpath("docs").glob("*.md"))]
    pages += sorted(ROOT.joinpath("examples").rglob("*.py"))
    supported = _api.supported_modules()
    wrong = []
    for page in pages:
        text = page.read_text(encoding="utf-8")
        for module, names in _FROM_IMPORT.findall(text):
            for name in (n.strip() for n in names.split(",")):
                if (
                    name
                    and f"{module}.{name}" not in _api.SUPPORTED
                    and f"{module}.{name}" not in supported
                ):
                    wrong.append(f"{page.relative_to(ROOT)}: from {module} import {name}")
        for module in _IMPORT.findall(text):
            if module not in supported:
                wrong.append(f"{page.relative_to(ROOT)}: import {module}")
    assert wrong == [], wrong


@pytest.mark.parametrize("old", sorted(_api.MOVED))
def test_a_moved_module_imports_as_its_new_home_with_one_warning(old: str) -> None:
    new, removed_in = _api.MOVED[old]
    code = (
        "import warnings, importlib\n"
        "warnings.simplefilter('always')\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        f"    first = importlib.import_module({old!r})\n"
        f"    again = importlib.import_module({old!r})\n"
        f"assert first is again is importlib.import_module({new!r})\n"
        "print(len(caught)); print(caught[0].category.__name__); print(caught[0].message)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout.splitlines()
    assert out[:2] == ["1", "DeprecationWarning"], out
    assert new in out[2] and removed_in in out[2] and old in out[2], out[2]
    assert _api.INSTEAD[old] in out[2], out[2]


def test_a_moved_module_names_the_supported_api_to_use_instead() -> None:
    """Each deprecated module's advice names supported names only (never an internal module as
    the thing to import); where no supported name replaces it, it says its new home is
    internal (all of them are)."""
    assert all(_api.is_internal(new) for new, _ in _api.MOVED.values())
    assert set(_api.INSTEAD) == set(_api.MOVED)
    supported = set(_api.SUPPORTED)
    for old, advice in _api.INSTEAD.items():
        names = re.findall(r"\blmcache_compat(?:\.\w+)+", advice)
        assert names, old
        assert all(name in supported for name in names), (old, names)
        assert advice.startswith("use ") or "its new home is internal" in advice, old


def test_a_moved_modules_warning_points_at_the_importer() -> None:
    old = next(iter(_api.MOVED))
    sys.modules.pop(old, None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        importlib.import_module(old)
    assert [w.category for w in caught] == [DeprecationWarning]
    assert caught[0].filename != str(PACKAGE / f"{old.rpartition('.')[2]}.py")
    assert "_api.py" not in caught[0].filename


def test_the_changelog_says_what_is_deprecated() -> None:
    # The section of the version that deprecates them: this one (``__version__``), or the next
    # (``[Unreleased]``) for a module moved since.
    text = ROOT.joinpath("CHANGELOG.md").read_text(encoding="utf-8")
    deprecated = ""
    for heading in ("[Unreleased]", f"[{lmcache_compat.__version__}]"):
        start = text.index(f"## {heading}")
        section = text[start : text.index("\n## [", start + 1)]
        if "### Deprecated" in section:
            deprecated += section[section.index("### Deprecated") :]
    for old, (new, removed_in) in _api.MOVED.items():
        assert f"`{old}`" in deprecated and f"`{new}`" in deprecated, old
        assert removed_in in deprecated
