"""Each release fact has one source.

* first releases: the catalog (capabilities), the argument table (arguments no capability
  carries) and the known-issue table; every other module reads them (no version literal in code);
* the keywords releases gained: the catalog rows; the mappers read them (no keyword literal);
* where upstream code lives: ``locations.py`` (module paths: ``test_locations.py``; class names
  looked up by string: here);
* fallbacks: the catalog rows; the adapters' docstrings and the tests read them.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from lmcache_compat import CATALOG, Capability, ConnectorAdapter
from lmcache_compat.core.arguments import ARGUMENTS
from lmcache_compat.core.catalog import fallback_table
from lmcache_compat.core.roles import CONNECTOR, MP_SCHEDULER, MP_WORKER
from lmcache_compat.mp import MPSchedulerAdapter, MPWorkerAdapter
from lmcache_compat.upstream import locations as loc
from lmcache_compat.upstream.matrix import load_matrix

PACKAGE = Path(__file__).resolve().parent.parent / "lmcache_compat"
#: The tables that state release facts (and ``__init__``'s own ``__version__``).
FACT_TABLES = {
    "catalog.py",
    "arguments.py",
    "known_issues.py",
    "__init__.py",
    # sglang: the backend's variants (named by the first release of their run) and the
    # behaviours no signature shows
    "variants.py",
    "issues.py",  # sglang/known/issues.py
    # lmcache-compat's own releases: when a deprecated module path is removed
    "_api.py",
    # where each fact comes from: the release diff that shows a gate, the range of what no
    # surface shows (upstream/provenance.py)
    "provenance.py",
}
VERSION = re.compile(r"(?<![\w.])0\.\d+\.\d+")


def _code_strings(path: Path) -> list[tuple[int, str]]:
    """String constants of a module, docstrings left out (documentation, not code)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                docs.add(id(body[0].value))
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs
    ]


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_no_release_version_is_written_outside_the_fact_tables() -> None:
    found = [
        f"{path.name}:{line}: {text!r}"
        for path in _modules()
        if path.name not in FACT_TABLES
        for line, text in _code_strings(path)
        if VERSION.search(text)
    ]
    assert found == []


def test_keywords_releases_gained_are_named_by_the_catalog_only() -> None:
    keywords = {row.keyword for row in CATALOG if row.keyword}
    homonyms = {
        ("config.py", "server_urls"),  # MPConfig's own field: our API's name
        ("worker_calls.py", "start"),  # LoadStoreOp's own start field (0.3.14), not the lookup's
        ("scheduler_calls.py", "start"),  # free_lookup_locks' own range start, not the lookup's
        # the MP adapters' and the engine's own request ids, not SGLang metadata's (0.4.6)
        ("calls.py", "request_id"),
        ("scheduler_calls.py", "request_id"),
        ("worker_calls.py", "request_id"),
        # sglang's own RadixKey(..., cache_salt=), not the MP lookup's (0.4.4)
        ("reader.py", "cache_salt"),
        # sglang's TreeCacheBuildContext field, read by name
        ("backend.py", "tp_group"),
        # 0.3.3's name of the pinned lookup's id: the parameter its first release's diff shows
        ("provenance.py", "request_id"),
    }
    found = [
        f"{path.name}:{line}: {text!r}"
        for path in _modules()
        # arguments: keyed rows, tested below; roles and locations: the parameter and field
        # names that identify a class (every release of it has them)
        if path.name not in ("catalog.py", "arguments.py", "roles.py", "locations.py")
        for line, text in _code_strings(path)
        if text in keywords and (path.name, text) not in homonyms
    ]
    assert found == []


def test_upstream_classes_are_looked_up_by_the_names_in_locations_only() -> None:
    names = {place.name for place in loc.PLACES}
    found = [
        f"{path.name}:{line}: {text!r}"
        for path in _modules()
        # roles: the class names adapters wrap; arguments: the member column
        if path.name not in ("locations.py", "roles.py", "arguments.py")
        for line, text in _code_strings(path)
        if text in names
    ]
    assert found == []


def test_argument_rows_take_first_releases_and_names_from_their_capability() -> None:
    for row in ARGUMENTS:
        if row.capability is None:
            assert row.first is not None, row.key
            continue
        assert row.first is None, f"{row.key}: its first release is its capability's"
        assert row.since == row.capability.since
        if row.capability.spec.keyword and row.name is None:
            assert row.argument == row.capability.spec.keyword


def test_the_catalog_firsts_are_the_matrix_firsts() -> None:
    matrix = load_matrix()
    for row in CATALOG:
        assert matrix.since(row.capability) == row.since, row.capability


def test_scanned_known_issues_read_the_matrix() -> None:
    from lmcache_compat.upstream.known_issues import KNOWN_ISSUES, Lacks

    for row in KNOWN_ISSUES:
        if row.source == "scanned":
            assert isinstance(row.lmcache, Lacks), row.key


def test_fallbacks_are_documented_from_the_catalog() -> None:
    for adapter, owner in (
        (ConnectorAdapter, CONNECTOR),
        (MPSchedulerAdapter, MP_SCHEDULER),
        (MPWorkerAdapter, MP_WORKER),
    ):
        assert fallback_table(owner) in (adapter.__doc__ or "")
        for row in CATALOG:
            if owner in row.owners and row.kind != "class":
                assert row.fallback_result in (adapter.__doc__ or ""), row.capability
    assert Capability.KV_EVENTS.spec.fallback_result in (Capability.KV_EVENTS.__doc__ or "")


def test_no_file_spells_a_package_index_address() -> None:
    """The index is reached through the installers' configuration (tools/index.py),
    so a company mirror configured for pip works; no tracked file writes an index address, but
    CHANGELOG.md's link references, which a reader follows to a release's page (no installer
    reads them)."""
    import subprocess

    root = PACKAGE.parent
    address = re.compile(
        r"https?://([a-z0-9-]+\.)*(" + "py" + r"pi\.(org|io)|" + "python" + r"hosted\.org)"
    )
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=root, capture_output=True, text=True, check=True
    ).stdout.split()
    found = []
    for name in tracked:
        if name == "CHANGELOG.md":
            continue
        path = root / name
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        found += [f"{name}:{m.group(0)}" for m in address.finditer(text)]
    assert found == []
