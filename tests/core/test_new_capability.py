"""Adding a real optional connector method takes a catalog row and a fallback, and one command.

The method is not made up: it is a public method of the newest release's connector class, read
from the stored surfaces of the shipped matrix, that no catalog row names and the role does not
bind as a core method (the test fails when none is left: then pick another class). Its ``since``
is the first release of the unbroken run that carries it, by the catalog's rule over the stored
surfaces. On a copy of the repository the test adds an enum member and a row to
``core/catalog.py`` and a fallback to ``core/fallbacks.py``, runs ``scripts/update_docs.py``
once, then the unit tier (without this test), and asserts it is green and which files changed:
exactly those two by hand, and what ``update_docs.py`` regenerated. No release is re-scanned:
the matrix derives the new capability from the surfaces it stores.

Its own tox env (``tox -e new-capability``, in ``ci``); the unit env leaves it out (marker
``newcapability``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lmcache_compat.core.catalog import CATALOG
from lmcache_compat.core.roles import CONNECTOR
from lmcache_compat.core.surface import satisfies
from lmcache_compat.upstream.derived import StoredClasses
from lmcache_compat.upstream.matrix import load_matrix

pytestmark = pytest.mark.newcapability

ROOT = Path(__file__).resolve().parents[2]
#: Not copied: version control, environments, caches and build output.
IGNORED = (
    ".git",
    ".tox",
    ".venv*",
    ".hypothesis",
    "__pycache__",
    "*.egg-info",
    "build",
    "dist",
    ".*_cache",
)
#: The unit tier's selection (tox.ini's [testenv] command), without this test.
UNIT = "not release and not real and not fuzz and not packaging and not newcapability"

MEMBER_ANCHOR = '    REGISTER_KV_CACHES = "register_kv_caches"\n'
ROW_ANCHOR = "    # --- multi-process adapters"


def _unnamed_method() -> tuple[str, tuple[str, ...]]:
    """A public method of the newest release's connector class that no catalog row names and
    the role does not bind as core, with its required positional parameters."""
    newest = load_matrix().newest
    named = {row.method for row in CATALOG if CONNECTOR in row.owners}
    core = {name for name, _ in CONNECTOR.core}
    for name, tokens in sorted(newest.surfaces.get(CONNECTOR.name, {}).items()):
        if name.startswith("_") or name in named or name in core:
            continue
        required = []
        for token in tokens:
            if token in ("/", "*") or token.startswith("*") or "=" in token:
                break
            required.append(token)
        return name, tuple(required)
    raise AssertionError(
        f"every public method of {CONNECTOR.name} in LMCache {newest.version} has a catalog "
        "row: pick another class for this test"
    )


def _since(method: str, params: tuple[str, ...]) -> str:
    """The first release of the unbroken run up to the newest that carries ``method`` (called
    with ``params``), by the catalog's rule over the stored surfaces."""
    template = next(r for r in CATALOG if r.owner is CONNECTOR and r.passes_through)
    spec = dataclasses.replace(template, method=method, params=params)
    first = None
    for row in reversed(load_matrix().rows):
        classes = StoredClasses(row.surfaces, row.details, row.properties)
        if CONNECTOR.name not in classes or not satisfies(
            spec, classes[CONNECTOR.name].get(method)
        ):
            break
        first = row.version
    assert first is not None, method
    return first


def _digests(root: Path) -> dict[str, str]:
    """Every file under ``root`` (the copy's layout) -> its sha256."""
    out = {}
    for folder, dirs, files in os.walk(root):
        # not version control, caches or what tests leave (.hypothesis): no file of the tree
        dirs[:] = [d for d in dirs if d != "__pycache__" and not d.startswith(".")]
        for name in files:
            path = Path(folder, name)
            out[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def _changed(before: dict[str, str], after: dict[str, str]) -> list[str]:
    return sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))


def _run(argv: list[str], cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "COV_"))}
    env |= {"PYTHONPATH": str(cwd), "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def test_a_real_method_is_one_row_and_a_fallback(tmp_path: Path) -> None:
    method, params = _unnamed_method()
    since = _since(method, params)
    copy = tmp_path / "repo"
    shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns(*IGNORED))
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", "-C", str(copy)]
    for argv in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "copy", "--no-verify"]):
        subprocess.run([*git, *argv], check=True, capture_output=True)  # a tree tests list
    original = _digests(copy)

    member = method.upper()
    fallback = f"no_{method}"
    catalog = copy / "lmcache_compat" / "core" / "catalog.py"
    text = catalog.read_text(encoding="utf-8")
    assert MEMBER_ANCHOR in text and ROW_ANCHOR in text
    row = (
        "    CapabilitySpec(\n"
        f"        capability=Capability.{member},\n"
        "        owner=CONNECTOR,\n"
        f"        method={method!r},\n"
        f"        params={params!r},\n"
        f"        since={since!r},\n"
        f"        fallback=fb.{fallback},\n"
        '        fallback_result="None (nothing to report)",\n'
        f'        impact="no {method.replace("_", " ")} from the connector",\n'
        "        warn_absent=False,\n"
        "    ),\n"
    )
    text = text.replace(MEMBER_ANCHOR, MEMBER_ANCHOR + f'    {member} = "{method}"\n', 1)
    catalog.write_text(text.replace(ROW_ANCHOR, row + ROW_ANCHOR, 1), encoding="utf-8")
    fallbacks = catalog.with_name("fallbacks.py")
    args = "".join(f", {p}: object" for p in params)
    fallbacks.write_text(
        fallbacks.read_text(encoding="utf-8")
        + f'\n\ndef {fallback}(self: object{args}) -> None:\n    """Fallback of ``{method}``."""\n',
        encoding="utf-8",
    )
    by_hand = _digests(copy)
    assert _changed(original, by_hand) == [
        "lmcache_compat/core/catalog.py",
        "lmcache_compat/core/fallbacks.py",
    ]

    docs = _run([sys.executable, "scripts/update_docs.py"], copy, 120)
    assert docs.returncode == 0, docs.stderr[-3000:]
    generated = _changed(by_hand, _digests(copy))
    assert generated, "update_docs.py regenerated nothing for a new capability"
    # the docs, and doctor's golden texts (their capability table)
    assert all(p.endswith(".md") or p.startswith("tests/report/goldens/") for p in generated), (
        generated
    )
    assert _run([sys.executable, "scripts/update_docs.py", "--check"], copy, 120).returncode == 0

    unit = _run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--tb=line", "-m", UNIT],
        copy,
        600,
    )
    assert unit.returncode == 0, unit.stdout[-4000:] + unit.stderr[-2000:]
    assert " passed" in unit.stdout.splitlines()[-1]
    after = _digests(copy)
    assert _changed(original, after) == sorted(
        ["lmcache_compat/core/catalog.py", "lmcache_compat/core/fallbacks.py", *generated]
    )
    print(f"\nnew capability {method}{params} since {since}: generated {', '.join(generated)}")
