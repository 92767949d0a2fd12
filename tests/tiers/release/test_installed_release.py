"""The ``releases`` tier: one real LMCache release per tox env (``pip install --no-deps``).

tox sets ``LMCACHE_COMPAT_RELEASE`` to the env's name (``release-X``) and
``LMCACHE_COMPAT_ENV_TMP`` to its temp dir, where ``prepare.py`` fetched the sdist of a release
that cannot be installed here (0.3.0). Nothing here imports LMCache
(``test_config_loaders.py`` runs the real config loader in a subprocess).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from lmcache_compat import installed_lmcache_version
from lmcache_compat.config.check import OWN_PREFIX
from lmcache_compat.testing import fake_class
from lmcache_compat.upstream.matrix import load_matrix
from lmcache_compat.upstream.scanner import scan
from lmcache_compat.versions import parse_version
from tests.support.behaviour import check_row_behaviour
from tools.generated_fakes import live_facts

pytestmark = pytest.mark.release

RELEASE = os.environ.get("LMCACHE_COMPAT_RELEASE", "").removeprefix("release-")


def _artifact() -> str:
    """The fetched sdist of a release that is not installed (0.3.0), else ``""``."""
    if not RELEASE:
        return ""
    artifact = load_matrix().row(RELEASE).artifact
    if not artifact.endswith(".tar.gz"):
        return ""
    return str(Path(os.environ["LMCACHE_COMPAT_ENV_TMP"]) / artifact)


ARTIFACT = _artifact()


@pytest.fixture(scope="module")
def row():  # type: ignore[no-untyped-def]
    assert RELEASE, "run through tox: LMCACHE_COMPAT_RELEASE names the release under test"
    return load_matrix().row(RELEASE)


def _target() -> str | None:
    return ARTIFACT or None


def test_scan_equals_the_shipped_row(row) -> None:  # type: ignore[no-untyped-def]
    data = scan(_target(), known_rows=False).to_json()  # the files read, never the row
    expected = row.scan_json()
    keys = (
        "lmcache_version",
        "capabilities",
        "surfaces",
        "properties",
        "details",
        "missing_classes",
        "modules",
        "found_by",
        "external_bases",
        "functions",
    )
    for key in keys:
        assert data[key] == expected[key], key
    assert data.get("reexported_at", {}) == expected.get("reexported_at", {})


def test_installed_version_is_right(row) -> None:  # type: ignore[no-untyped-def]
    if ARTIFACT:
        # 0.3.0 ships only an sdist whose build needs CUDA: nothing is installed, and the
        # version comes from the sdist's PKG-INFO instead.
        assert installed_lmcache_version() is None
        assert Path(ARTIFACT).name == row.artifact
        assert scan(ARTIFACT).version == RELEASE
    else:
        assert installed_lmcache_version() == parse_version(RELEASE)


def test_adapters_over_fakes_of_this_row_behave_per_catalog(row) -> None:  # type: ignore[no-untyped-def]
    check_row_behaviour(row)


def test_scanning_imported_nothing() -> None:
    code = (
        f"import sys; from lmcache_compat.upstream.scanner import scan; scan({_target()!r}); "
        "bad = [m for m in sys.modules if m.split('.')[0] in ('lmcache', 'torch', 'vllm')]; "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_doctor_reports_this_release(row) -> None:  # type: ignore[no-untyped-def]
    r = subprocess.run(
        [sys.executable, "-m", "lmcache_compat", "doctor", "--json"], capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr
    import json

    report = json.loads(r.stdout)
    assert report["lmcache"] == (None if ARTIFACT else RELEASE)
    # the active configuration is checked against this release: tox sets only this library's
    # own LMCACHE_COMPAT_* variables, which are not LMCache's and so are no finding; any other
    # LMCACHE_* variable passed in is read by no release
    assert report["config"]["checked"] is (not ARTIFACT), report["config"]
    if not ARTIFACT:
        assert report["config"]["release"] == RELEASE
        found = {(f["key"], f["kind"], f["effect"]) for f in report["config"]["findings"]}
        assert any(k.startswith(OWN_PREFIX) for k in os.environ)
        others = {
            k for k in os.environ if k.startswith("LMCACHE_") and not k.startswith(OWN_PREFIX)
        }
        assert found == {(k, "ignored", "dropped") for k in others}, found
    if not ARTIFACT:  # what doctor expects from the version is what the release has
        expected = {c["capability"]: c["expected"] == "yes" for c in report["capabilities"]}
        assert expected == dict(row.capabilities)


#: The modules that define a second, unrelated LMCacheEngine (the v0 engine) beside the known
#: path, in the releases where a search by name alone cannot choose (0.3.0 ... 0.3.10.post2).
V0_ENGINE = "lmcache.cache_engine"


def test_a_scan_that_knows_no_path_finds_every_class_by_name(row) -> None:  # type: ignore[no-untyped-def]
    """Day one: with every known module path replaced by one no release has, the scan finds
    each class by name and reports the same capabilities and modules as the shipped row, or,
    where two modules define a matching class (the v0 engine beside the v1 one), refuses and
    names both."""
    import dataclasses

    from lmcache_compat.errors import AmbiguousLocationError
    from lmcache_compat.scan.targets import open_source
    from lmcache_compat.upstream import locations as loc
    from lmcache_compat.upstream.scanner import scan_tree

    blind = tuple(
        dataclasses.replace(p, modules=(f"{p.package}.nowhere",)) for p in loc.LMCACHE_SCANNED
    )
    with open_source(_target()) as tree:
        try:
            result = scan_tree(tree, blind)
        except AmbiguousLocationError as exc:
            assert V0_ENGINE in str(exc) and row.modules["LMCacheEngine"] in str(exc)
            assert V0_ENGINE.replace(".", "/") + ".py" in set(tree.python_files()), (
                "only the v0 engine module makes a search ambiguous"
            )
            return
    # the scan reports a class several modules define as ambiguous (none chosen): only the
    # v0 engine beside the v1 one may do that, and everything else must equal the row
    for cls, candidates in result.ambiguous.items():
        assert set(candidates) == {V0_ENGINE, row.modules[cls]}, (cls, candidates)
    undecided = result.undecided  # the ambiguous classes' capabilities: reported, not guessed
    for capability, present in row.capabilities.items():
        if capability in undecided:
            assert "ambiguous" in undecided[capability], capability
            continue
        assert result.capabilities[capability] == present, capability
    assert result.modules == {k: v for k, v in row.modules.items() if k not in result.ambiguous}
    assert set(result.found_by.values()) == {"search"}


def test_the_connector_finds_its_engine_class_where_the_release_put_it(row) -> None:  # type: ignore[no-untyped-def]
    """What ``LMCacheCompatConnector`` and ``doctor`` do at run time, without importing LMCache:
    the installed files say where ``LMCacheConnectorV1Impl`` lives."""
    if ARTIFACT:  # 0.3.0 cannot be installed here: the error says so, in one line
        from lmcache_compat.errors import UpstreamNotFoundError
        from lmcache_compat.upstream import locations as loc
        from lmcache_compat.upstream.resolve import clear_find_cache, where

        clear_find_cache()
        with pytest.raises(UpstreamNotFoundError, match="lmcache is not installed"):
            where(loc.CONNECTOR_IMPL)
        return
    code = (
        "import sys; from lmcache_compat.upstream import locations as loc; "
        "from lmcache_compat.upstream.resolve import where; print(where(loc.CONNECTOR_IMPL)[0]); "
        "bad = [m for m in sys.modules if m.split('.')[0] in ('lmcache', 'torch', 'vllm')]; "
        "sys.exit(1 if bad else 0)"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == row.modules["LMCacheConnectorV1Impl"]


def test_fakes_have_the_real_signatures(row) -> None:  # type: ignore[no-untyped-def]
    """lmcache_compat.testing's fakes of this release: each member's ``inspect.signature``
    equals the real release's, read by the scanner from the installed files (or the fetched
    sdist) without importing LMCache."""
    scanned = scan(_target(), known_rows=False)
    assert scanned.classes, "nothing scanned"
    for name, facts in scanned.classes.items():
        assert live_facts(fake_class(row.version, name)) == facts, name


def test_the_installed_files_are_the_artifact_s(row) -> None:  # type: ignore[no-untyped-def]
    """The installed release hashes to the digest its row records (taken from the artifact by
    scripts/build_release_matrix.py), so doctor and scan() answer from the row, and the answer
    is what reading the files gives."""
    from lmcache_compat.scan.targets import open_source
    from lmcache_compat.upstream.known import shipped_row_of_tree, tree_sha256
    from lmcache_compat.upstream.shipped import release_row

    with open_source(_target()) as tree:
        assert tree_sha256(tree) == release_row(row.version)["tree_sha256"]
    if _target() is None:  # the installed release (0.3.0 is an sdist, not installed)
        with open_source(None) as tree:
            assert shipped_row_of_tree(tree) == release_row(row.version)
        assert scan().to_json() == scan(known_rows=False).to_json()
