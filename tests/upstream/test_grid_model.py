"""The grid model (lmcache_compat/upstream/grid.py) on small synthetic tiers."""

from __future__ import annotations

from lmcache_compat.report.tables import connector_problems, grid_markdown
from lmcache_compat.upstream.grid import (
    Cell,
    ConnectorRun,
    Grid,
    PairResult,
    VllmTier,
)


def _tier(cells: dict[str, dict[str, str]], vllm: str = "0.20.0") -> VllmTier:
    pairs = {
        release: PairResult(
            release,
            {
                "vllm": ConnectorRun(
                    {a: Cell.from_json({"status": s}) for a, s in aspects.items()}
                ),
                "compat": ConnectorRun({}),
            },
        )
        for release, aspects in cells.items()
    }
    imports = {r: {"vllm_v1_adapter": "ok"} for r in cells} | {"0.3.1": {"vllm_v1_adapter": "E"}}
    return VllmTier(vllm, "2.13.0+cpu", imports, pairs)


def test_ok_span_stops_before_a_release_the_connector_does_not_build_with() -> None:
    tier = _tier(
        {
            "0.3.9": {"builds": "ok", "events": "broken"},
            "0.3.12": {"builds": "ok", "events": "ok"},
            "0.5.6": {"builds": "ok", "events": "n/a"},
            "0.5.7rc2": {"builds": "broken"},
        }
    )
    grid = Grid([tier])
    assert grid.ok_span(tier, "vllm", "events") == ("0.3.12", "0.5.7rc2")
    assert grid.ok_span(tier, "vllm", "builds") is None  # the newest release does not build


def test_ok_span_without_a_stop_and_without_a_fix() -> None:
    tier = _tier({"0.3.9": {"step": "broken"}, "0.4.7": {"step": "ok"}, "0.5.6": {"step": "ok"}})
    grid = Grid([tier])
    assert grid.ok_span(tier, "vllm", "step") == ("0.4.7", None)
    broken_last = _tier({"0.4.7": {"step": "ok"}, "0.5.6": {"step": "degraded"}})
    assert Grid([broken_last]).ok_span(broken_last, "vllm", "step") is None


def test_leans_on_the_nearest_measured_release_before() -> None:
    grid = Grid([_tier({}, "0.13.0"), _tier({}, "0.11.0"), _tier({}, "0.21.0")])
    assert grid.versions == ["0.11.0", "0.13.0", "0.21.0"]
    assert grid.leans_on("0.20.2rc1").vllm == "0.13.0"  # type: ignore[union-attr]
    assert grid.leans_on("0.21.0").vllm == "0.21.0"  # type: ignore[union-attr]
    assert grid.leans_on("0.10.9") is None


def test_problems_render_as_spans_of_measured_releases() -> None:
    tier = _tier(
        {
            "0.3.9": {"events": "broken", "shutdown": "degraded"},
            "0.3.10": {"events": "broken", "shutdown": "degraded"},
            "0.3.12": {"events": "ok", "shutdown": "ok"},
            "0.4.7": {"events": "ok", "shutdown": "degraded"},
        }
    )
    assert connector_problems(tier, "vllm") == [
        "events broken: 0.3.9 ... 0.3.10",
        "shutdown degraded: 0.3.9 ... 0.3.10, 0.4.7",
    ]
    assert connector_problems(tier, "compat") == []
    table = grid_markdown(Grid([tier]))
    assert "| 0.20.0 | 0.3.9 ... 0.4.7 (4 of 5) |" in table
    assert "no problem measured" in table


def _respellings(version: str) -> list[str]:
    """PEP 440-equal spellings of a release: ``0.3.10.0.post2``, ``v0.3.10.POST2``, ``+local``."""
    from packaging.version import Version

    v = Version(version)
    release = ".".join(map(str, v.release))
    rest = str(v)[len(release) :]
    return [
        f"{release}.0{rest}",
        f"v{release}{rest.upper()}",
        f"{version}+cpu" if "+" not in version else version,
        f" {version} ",
    ]


def test_every_measured_verdict_is_the_same_however_the_versions_are_spelled() -> None:
    """doctor's verdict of a measured pair depends on the versions, not on their spelling
    (``0.3.10.0.post2`` is PEP 440-equal to ``0.3.10.post2``)."""
    from lmcache_compat.upstream.grid import load_grid
    from lmcache_compat.upstream.known_issues import verdict

    grid = load_grid()
    for tier in grid.tiers:
        for release in tier.pairs:
            expected = verdict(tier.vllm, release)
            assert expected.verdict != "unknown"
            for lm in _respellings(release):
                for vllm in (tier.vllm, *_respellings(tier.vllm)[:2]):
                    got = verdict(vllm, lm)
                    assert (got.verdict, len(got.issues)) == (
                        expected.verdict,
                        len(expected.issues),
                    ), (vllm, lm)
