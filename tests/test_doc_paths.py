"""Every repository path the README, CONTRIBUTING.md and ``docs/*.md`` name exists.

A path is a backticked word (a whole span, or a word of a backticked command) that starts with
a top-level entry of the repository and a ``/`` (``tests/tiers/grid/scenario.py``,
``scripts/update_docs.py``), or a relative link target. Dotted module names
(``lmcache.integration.vllm``), absolute and home paths (``/opt/wheels``, ``~/.cache``) and
paths relative to something else (``releases/index.json``) are not repository paths. A word with
a placeholder (``vllm-X-cpu.txt``, ``lmcache-<version>.txt``, ``*``, ``...``) is checked up to
the directory that holds it. ``::test`` and ``:line`` suffixes are dropped.

The module docstrings of ``lmcache_compat/``, ``tools/``, ``scripts/`` and ``tests/`` are read
too, backticked or not: a word there is a repository path when it starts with a top-level
directory of the repository and a ``/`` (``tools/maintainer.py``, ``tests/tiers/``).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

from tools.vllm_grid_data import UNIT_TEST_FILE

ROOT = Path(__file__).resolve().parent.parent

#: Paths of upstream repositories the docs name, with whose they are (not ours to have).
UPSTREAM = {
    UNIT_TEST_FILE: "vLLM's own test of its LMCache connector (docs/vllm.md)",
}
#: Top-level entries that a checkout may hold but the repository does not (tools' output).
_NOT_OURS = {".git", ".tox", "build", "dist", ".venv", "__pycache__"}
#: A backticked span (it may wrap a line); a fenced block counts as one span.
_SPAN = re.compile(r"`([^`]+)`")
_FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)
_LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)]*)?\)")
_SUFFIX = re.compile(r"(::\S*|:\d+(?:-\d+)?)$")
_PLACEHOLDER = re.compile(r"[<>*{}\[\]]|\.\.\.|(?<![A-Za-z])[A-Z](?![A-Za-z])")


def _top_level() -> set[str]:
    return {
        p.name
        for p in ROOT.iterdir()
        if p.name not in _NOT_OURS
        and not p.name.endswith(".egg-info")
        and not (p.name.startswith(".") and p.name.endswith("_cache"))
    }


def repository_paths(text: str, top: set[str]) -> Iterator[str]:
    """The repository paths ``text`` names in backticks."""
    text = _FENCE.sub(lambda m: " `" + m.group(1).replace("`", " ") + "` ", text)
    for span in _SPAN.findall(text):
        for raw in span.split():
            word = _SUFFIX.sub("", raw.strip("\"'(),;"))
            if "/" in word and word.split("/")[0] in top:
                yield word


def missing(path: str) -> bool:
    """Whether ``path`` (relative to the root, perhaps with a placeholder) names nothing."""
    parts = path.rstrip("/").split("/")
    for i, part in enumerate(parts):
        if _PLACEHOLDER.search(part):
            parts = parts[:i]
            break
    return not ROOT.joinpath(*parts).exists()


def _pages() -> list[Path]:
    return [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted(ROOT.glob("docs/*.md"))]


def test_every_path_the_docs_name_exists() -> None:
    top = _top_level()
    stale = [
        f"{page.relative_to(ROOT)}: {path}"
        for page in _pages()
        for path in repository_paths(page.read_text(encoding="utf-8"), top)
        if path not in UPSTREAM and missing(path)
    ]
    assert stale == [], stale


#: The folders whose modules' docstrings are read.
_CODE = ("lmcache_compat", "tools", "scripts", "tests")
#: A path-like word of a docstring: parts joined by ``/`` (placeholders allowed).
_DOC_WORD = re.compile(r"[\w.<>*{}\[\]-]+(?:/[\w.<>*{}\[\]-]*)+")


def docstring_paths(text: str, top_dirs: set[str]) -> Iterator[str]:
    """The repository paths a docstring names: words that start with a top-level directory."""
    for match in _DOC_WORD.finditer(text):
        word = _SUFFIX.sub("", match.group(0).rstrip("."))
        if word.split("/")[0] in top_dirs:
            yield word


def test_every_path_a_module_docstring_names_exists() -> None:
    top_dirs = {name for name in _top_level() if ROOT.joinpath(name).is_dir()}
    stale = []
    seen = 0
    for folder in _CODE:
        for path in sorted(ROOT.joinpath(folder).rglob("*.py")):
            doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")), clean=False)
            for word in docstring_paths(doc or "", top_dirs):
                seen += 1
                if word not in UPSTREAM and missing(word):
                    stale.append(f"{path.relative_to(ROOT)}: {word}")
    assert seen > 50  # the docstrings were read
    assert stale == [], stale


def test_the_docstring_rule_finds_paths_and_nothing_else() -> None:
    top_dirs = {"tests", "tools", "lmcache_compat"}
    text = (
        "one writer, tests/support/maintainer.json_lines, and tools/maintainer.py; the tiers\n"
        "(tests/tiers/). lmcache.integration.vllm, vllm/v1/x.py, /opt/wheels and\n"
        "lmcache_compat/upstream/data/releases/<version>.json, tests/x.py:12."
    )
    assert list(docstring_paths(text, top_dirs)) == [
        "tests/support/maintainer.json_lines",
        "tools/maintainer.py",
        "tests/tiers/",
        "lmcache_compat/upstream/data/releases/<version>.json",
        "tests/x.py",
    ]


def test_every_relative_link_exists() -> None:
    stale = []
    for page in _pages():
        for target in _LINK.findall(page.read_text(encoding="utf-8")):
            local = "://" not in target and not target.startswith("mailto:")
            if local and not (page.parent / target).exists():
                stale.append(f"{page.relative_to(ROOT)}: {target}")
    assert stale == [], stale


def test_the_rule_finds_stale_paths_and_nothing_else() -> None:
    top = _top_level()
    text = (
        "`tests/grid/scenario.py` `python scripts/update_docs.py --check` "
        "`lmcache.integration.vllm.vllm_v1_adapter` `lmcache_compat.core.binding.bind` "
        "`/opt/plugins` `~/.cache/lmcache-compat` `releases/<version>.json` "
        "`tests/tiers/real/constraints/vllm-X-cpu.txt` `lmcache_compat/core/catalog.py:74` "
        "`tests/upstream/test_matrix.py::test_x` `tests/nowhere/<version>.txt`\n"
        "```sh\npython scripts/gone.py\n```\n`python\nscripts/update_docs.py`"
    )
    found = list(repository_paths(text, top))
    assert found == [
        "tests/grid/scenario.py",
        "scripts/update_docs.py",
        "tests/tiers/real/constraints/vllm-X-cpu.txt",
        "lmcache_compat/core/catalog.py",
        "tests/upstream/test_matrix.py",
        "tests/nowhere/<version>.txt",
        "scripts/gone.py",
        "scripts/update_docs.py",
    ]
    assert [p for p in found if missing(p)] == [
        "tests/grid/scenario.py",
        "tests/nowhere/<version>.txt",
        "scripts/gone.py",
    ]
    assert UPSTREAM and all(missing(p) for p in UPSTREAM), "an UPSTREAM path is ours now"


def test_contributing_names_every_maintainer_script() -> None:
    """A new script under ``scripts/`` regenerates something: CONTRIBUTING.md says when."""
    text = ROOT.joinpath("CONTRIBUTING.md").read_text(encoding="utf-8")
    unnamed = [p.name for p in sorted(ROOT.glob("scripts/*.py")) if f"scripts/{p.name}" not in text]
    assert unnamed == [], unnamed
