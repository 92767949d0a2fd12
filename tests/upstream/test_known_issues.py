from __future__ import annotations

import json
from pathlib import Path

import pytest

from lmcache_compat.report.cli import main
from lmcache_compat.upstream.known_issues import KNOWN_ISSUES, verdict
from lmcache_compat.upstream.matrix import load_matrix
from tests.support.archives import ADAPTER_0_3_10_POST2, V1, make_tree


@pytest.mark.parametrize(
    ("vllm", "lmcache", "expected", "keys"),
    [
        # pairs the shipped grid measured: judged by the measurement ("measured-<aspect>")
        ("0.32.0", "0.5.6", "degraded", {"measured-shutdown"}),
        ("0.32.0", "0.3.9", "broken", {"measured-events", "measured-step"}),
        ("0.32.0", "0.3.7", "broken", {"adapter-import"}),
        # no pair is "ok" for vLLM's own in-process connector from 0.3.6 on: its process does not
        # end cleanly (measured by the serving tier, tests/tiers/serve)
        ("0.12.0", "0.3.9.post1", "degraded", {"offload-server-close-race"}),
        # n/a in the grid (a fallback ran): the row says what the fallback loses
        ("0.11.2", "0.3.9", "degraded", {"no-load-error-reporting"}),
        ("0.9.2", "0.3.0", "broken", {"unguarded-get-finished"}),
        ("0.15.1", "0.5.0", "broken", {"mp-server-url-misbinding"}),
        ("0.20.2", "0.4.7", "broken", {"mp-use-mla-removed"}),
        # measured: vLLM 0.14.1's connector converts events with getattr(e, "lora_name",
        # None), so the reference note's "event-lora-name" breakage does not exist (grid-vllm0.14.1)
        ("0.14.1", "0.3.12", "degraded", {"measured-shutdown"}),
        ("0.32.0", "0.5.6+g1a2b3c", "degraded", {"measured-shutdown"}),
        # not measured (a dev build): the rows
        ("0.32.0", "0.3.12.dev40", "degraded", {"shutdown-not-forwarded"}),
        ("0.11.0", "0.5.6", "degraded", {"vllm-no-load-failure-path"}),
    ],
)
def test_verdicts(vllm: str, lmcache: str, expected: str, keys: set[str]) -> None:
    v = verdict(vllm, lmcache)
    assert v.verdict == expected
    got = {i.key for i in v.issues}
    assert keys <= got
    if expected == "ok":
        assert got == set()


def test_unknown_pairs() -> None:
    assert verdict(None, "0.5.6").verdict == "unknown"
    assert verdict("banana", "0.5.6").verdict == "unknown"


def test_scanned_rows_agree_with_the_matrix() -> None:
    """Rows marked 'scanned' must follow from the shipped matrix."""
    m = load_matrix()
    by_key = {row.key: row for row in KNOWN_ISSUES}
    assert [r.version for r in m.rows if not r.has("get_finished")] == ["0.3.0"]
    last_without_events = [r.version for r in m.rows if not r.has("kv_events")][-1]
    assert by_key["unguarded-get-kv-events"].lmcache_specifiers == (f"<{m.since('kv_events')}",)
    assert [r.version for r in m.rows if not r.has("kv_events")][-1] == last_without_events
    last_without_errors = [r.version for r in m.rows if not r.has("load_error_reporting")][-1]
    assert by_key["no-load-error-reporting"].lmcache_specifiers == (
        f"<{m.since('load_error_reporting')}",
    )
    assert "upgrade LMCache to >= 0.3.9.post1" in by_key["no-load-error-reporting"].found().fix
    assert last_without_errors == "0.3.9"


def test_import_verdicts_come_from_the_measured_grid() -> None:
    from lmcache_compat.upstream.grid import load_grid

    grid = load_grid()
    checked = 0
    for tier in grid.tiers:
        for release in tier.imports:
            outcome = tier.adapter_import(release)
            issues = verdict(tier.vllm, release).issues
            found = [i for i in issues if i.key == "adapter-import"]
            if outcome == "ok" or outcome is None:
                assert found == [], (tier.vllm, release)
            else:
                assert found and outcome in found[0].problem, (tier.vllm, release)
                assert found[0].source == f"verified (measured on vLLM {tier.vllm})"
                checked += 1
    assert checked >= 7  # LMCache 0.3.1 ... 0.3.7 beside vLLM 0.32.0 at least


def test_an_unmeasured_vllm_leans_on_the_nearest_measured_one_before_it() -> None:
    from lmcache_compat.upstream.grid import load_grid

    grid = load_grid()
    newest = grid.tiers[-1].vllm
    later = newest + ".post99"
    v = verdict(later, "0.3.5")
    assert any(f"leans on vLLM {newest}" in n for n in v.notes)
    assert {i.key for i in v.issues} >= {"adapter-import"}
    older = verdict("0.1.0", "0.3.5")
    assert not any("leans on" in n for n in older.notes)


def test_doctor_scans_an_installed_release(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    site = tmp_path / "site"
    make_tree(site, {V1: ADAPTER_0_3_10_POST2})
    dist = site / "lmcache-0.3.10.post2.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: lmcache\nVersion: 0.3.10.post2\n")
    monkeypatch.syspath_prepend(str(site))
    from lmcache_compat.distributions import clear_installed

    clear_installed()
    try:
        assert main(["doctor", "--json"]) == 0
        report = json.loads(capsys.readouterr().out)
    finally:
        clear_installed()
    present = {c["capability"]: c["present"] for c in report["capabilities"]}
    assert present["kv_events"] is True and present["register_kv_caches"] is False
    assert "read with ast" in report["capabilities_basis"]
    assert report["engine_sources"][0]["present"] is True


def test_every_measured_problem_is_in_the_verdict() -> None:
    """doctor's verdict for a measured pair carries each degraded or broken cell of the grid,
    with its severity, and is never better than the worst measured cell."""
    from lmcache_compat.upstream.grid import load_grid

    rank = {"ok": 0, "degraded": 1, "broken": 2}
    checked = 0
    for tier in load_grid().tiers:
        for release, pair in tier.pairs.items():
            v = verdict(tier.vllm, release)
            got = {(i.connector, i.key, i.severity) for i in v.issues}
            worst = "ok"
            for key, run in pair.connectors.items():
                for aspect, cell in run.problems():
                    assert (key, f"measured-{aspect}", cell.status) in got, (tier.vllm, release)
                    worst = max(worst, cell.status, key=rank.__getitem__)
                    checked += 1
            assert rank[v.verdict] >= rank[worst], (tier.vllm, release, v.verdict)
    assert checked > 50


# --- the MP rows: how we know, and what is offered --------------------------------------------

FAILED_RETRIEVE = "mp-failed-retrieve-reported-loaded"


@pytest.mark.parametrize(
    ("lmcache", "source", "words"),
    [
        # measured against real MP servers (a never-stored retrieve reported loaded)
        ("0.4.6", "verified", "measured on this release"),
        ("0.4.7", "verified", "measured on this release"),
        ("0.5.0", "verified", "measured on this release"),
        ("0.5.4", "verified", "measured on this release"),
        # read, not run: no CPU transfer before 0.4.6; 0.5.1 ... 0.5.3 not measured
        ("0.3.13", "reference", "read from this release's source, not run"),
        ("0.4.5", "reference", "read from this release's source, not run"),
        ("0.5.1", "reference", "read from this release's source, not run"),
        ("0.5.3", "reference", "read from this release's source, not run"),
    ],
)
def test_failed_retrieve_row_says_measured_only_where_measured(
    lmcache: str, source: str, words: str
) -> None:
    (found,) = [i for i in verdict("0.32.0", lmcache).issues if i.key == FAILED_RETRIEVE]
    assert found.source == source
    assert words in found.problem
    assert "measured" not in found.problem or source == "verified"


def test_failed_retrieve_rows_cover_0_3_13_to_0_5_4_once() -> None:
    from packaging.version import Version

    from lmcache_compat.upstream.known_issues import applies

    rows = [r for r in KNOWN_ISSUES if r.key == FAILED_RETRIEVE]
    for release in [r.version for r in load_matrix().rows]:
        hits = [r for r in rows if applies(r, Version("0.32.0"), Version(release))]
        inside = Version("0.3.13") <= Version(release) <= Version("0.5.4")
        assert len(hits) == (1 if inside else 0), release


UNBUILT = (
    "use LMCacheCompatMPConnector (bound over this release's adapters; not yet built against "
    "a server beside this vLLM)"
)


def test_mp_fix_where_our_mp_connector_stopped_for_want_of_a_server() -> None:
    """The shipped grid: every compat-mp cell is n/a (needs a running server): the fix says
    only what is known, for the measured break and for the rows alike."""
    for lmcache, key in (("0.3.13", "measured-mp-builds"), ("0.5.4", FAILED_RETRIEVE)):
        found = next(i for i in verdict("0.32.0", lmcache).issues if i.key == key)
        assert [str(f) for f in found.fixes] == [UNBUILT], (lmcache, key)
    misbinding = next(
        i for i in verdict("0.15.1", "0.5.0").issues if i.key == "mp-server-url-misbinding"
    )
    assert [str(f) for f in misbinding.fixes] == ["upgrade vLLM to >= 0.22.1", UNBUILT]


def _grid_with_compat_mp(status: str) -> object:
    """The shipped grid with every compat-mp cell of vLLM 0.32.0 set to ``status``."""
    from dataclasses import replace

    from lmcache_compat.upstream.grid import Cell, ConnectorRun, Grid, PairResult, load_grid

    grid = load_grid()
    tiers = []
    for tier in grid.tiers:
        if tier.vllm == "0.32.0":
            mp = {
                v: PairResult(
                    v,
                    {
                        **p.connectors,
                        "compat-mp": ConnectorRun(
                            {a: Cell(status, "measured") for a in ("builds", "worker")}  # type: ignore[arg-type]
                        ),
                    },
                )
                for v, p in tier.mp.items()
            }
            tiers.append(replace(tier, mp=mp))
        else:
            tiers.append(tier)
    return Grid(tiers, grid.meta)


@pytest.mark.parametrize(
    ("status", "expected"),
    [("ok", ["use LMCacheCompatMPConnector"]), ("n/a", [UNBUILT]), ("broken", [])],
)
def test_mp_fix_follows_our_cell(
    monkeypatch: pytest.MonkeyPatch, status: str, expected: list[str]
) -> None:
    from lmcache_compat.upstream import known_issues

    monkeypatch.setattr(known_issues, "load_grid", lambda: _grid_with_compat_mp(status))
    for lmcache, key in (("0.3.13", "measured-mp-builds"), ("0.5.4", FAILED_RETRIEVE)):
        found = next(i for i in verdict("0.32.0", lmcache).issues if i.key == key)
        assert [str(f) for f in found.fixes] == expected, (status, key)
