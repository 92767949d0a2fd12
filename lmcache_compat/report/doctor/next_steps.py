"""What ``doctor`` says to do next, from the shipped grids: with only LMCache installed, the
newest vLLM (and sglang) each connector works with over it; with only vLLM, the LMCache releases
to pick; with neither, a measured pair; with both, the fix of the worst issue. Each step has the
line to copy (:func:`lmcache_compat.installation.pip_line`). "Works" is doctor's own verdict
for that pair (:func:`~lmcache_compat.upstream.known_issues.verdict`): no broken issue for the
connector."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, TypedDict

from packaging.version import Version

from lmcache_compat.installation import pip_line
from lmcache_compat.report.doctor.schema import CONNECTORS
from lmcache_compat.upstream.known_issues import Issue, verdict

if TYPE_CHECKING:
    from typing import NotRequired

__all__ = ["NextStepJSON", "next_steps"]

#: The connectors a step is given for, in order: vLLM's own, then lmcache-compat's.
_KEYS = ("vllm", "compat")


class NextStepJSON(TypedDict):
    """One thing to do next: what it is, and the command line to copy (if any)."""

    step: str
    command: NotRequired[str]


def _works(issues: Sequence[Issue], key: str) -> bool:
    return not any(i.severity == "broken" and i.connector in (key, "any") for i in issues)


def _lmcache_releases() -> list[str]:
    from lmcache_compat.upstream.matrix import load_matrix  # lazy: only these steps read it

    return [r.version for r in load_matrix().rows]


def _for_lmcache(lmcache: str, vllm_dist: str) -> list[NextStepJSON]:
    """Only LMCache installed: the newest measured vLLM each connector works with over it."""
    from lmcache_compat.upstream.grid import load_grid  # lazy: only these steps read it

    tiers = [t.vllm for t in load_grid().tiers]
    out: list[NextStepJSON] = []
    for key in _KEYS:
        good = [v for v in tiers if _works(verdict(v, lmcache).issues, key)]
        name = CONNECTORS[key]
        if not good:
            out.append({"step": f"{name}: no measured vLLM works with LMCache {lmcache}"})
            continue
        out.append(
            {
                "step": f"{name}: the newest measured vLLM it works with over LMCache "
                f"{lmcache} is {good[-1]}",
                "command": pip_line(f"{vllm_dist}=={good[-1]}"),
            }
        )
    return out


def _for_sglang(lmcache: str) -> list[NextStepJSON]:
    from lmcache_compat.sglang.known.grid import load_sglang_grid  # lazy: only this step

    grid = load_sglang_grid()
    pairs = ((r, grid.pair(r, lmcache)) for r in grid.versions)
    working = [r for r, pair in pairs if pair is not None and pair["status"] == "works"]
    if not working:
        return [{"step": f"sglang's own integration: no sglang release works with {lmcache}"}]
    return [
        {
            "step": f"sglang's own integration: the newest sglang it works with over LMCache "
            f"{lmcache} is {working[-1]}",
            "command": pip_line(f"sglang=={working[-1]}"),
        }
    ]


def _span(releases: Sequence[str], good: set[str]) -> tuple[str, str | None] | None:
    """The newest run of working final releases: its first release and the release after it
    (``None``: it reaches the newest)."""
    finals = [v for v in releases if not Version(v).is_prerelease]
    last = next((i for i in range(len(finals) - 1, -1, -1) if finals[i] in good), None)
    if last is None:
        return None
    first = last
    while first > 0 and finals[first - 1] in good:
        first -= 1
    after = releases[releases.index(finals[last]) + 1 :]
    return finals[first], (after[0] if after else None)


def _for_vllm(vllm: str, no_deps: bool) -> list[NextStepJSON]:
    """Only vLLM installed: the LMCache releases each connector works with over it, among those
    the grid measured on it (or the measured vLLM before it); every shipped release where none
    was."""
    from lmcache_compat.upstream.grid import load_grid  # lazy: only these steps read it

    tier = load_grid().leans_on(vllm)
    if tier is not None and tier.pairs:
        releases = sorted(tier.pairs, key=Version)
    else:
        releases = _lmcache_releases()
    verdicts = {lm: verdict(vllm, lm).issues for lm in releases}
    out: list[NextStepJSON] = []
    for key in _KEYS:
        name = CONNECTORS[key]
        span = _span(releases, {lm for lm, issues in verdicts.items() if _works(issues, key)})
        if span is None:
            out.append({"step": f"{name}: no shipped LMCache release works with vLLM {vllm}"})
            continue
        first, stop = span
        spec = f"lmcache>={first}" + (f",<{stop}" if stop else "")
        shown = f"{first} and later" if stop is None else f"{first} up to (not including) {stop}"
        out.append(
            {
                "step": f"{name}: LMCache {shown} works with vLLM {vllm}",
                "command": pip_line(spec, no_deps=no_deps),
            }
        )
    if no_deps:
        out.append(
            {
                "step": "--no-deps: this vLLM is a CPU build; LMCache's own requirements would "
                "replace its torch (install what else LMCache imports as that build pins it)"
            }
        )
    return out


def _for_nothing() -> list[NextStepJSON]:
    """Neither installed: the newest measured vLLM and the newest LMCache vLLM's own connector
    works with there."""
    from lmcache_compat.upstream.grid import load_grid  # lazy: only these steps read it

    tier = load_grid().tiers[-1]
    newest = tier.vllm
    measured = sorted(tier.pairs, key=Version) or _lmcache_releases()
    finals = [v for v in measured if not Version(v).is_prerelease]
    good = [lm for lm in finals if _works(verdict(newest, lm).issues, "vllm")]
    if not good:
        return [{"step": "lmcache-compat grid shows which pairs were measured"}]
    return [
        {
            "step": f"a measured pair with no broken issue: vLLM {newest} and LMCache {good[-1]} "
            "(lmcache-compat grid shows every measured pair)",
            "command": pip_line(f"vllm=={newest}", f"lmcache=={good[-1]}"),
        }
    ]


def next_steps(
    lmcache: str | None,
    vllm: str | None,
    sglang: str | None,
    *,
    vllm_distribution: str | None,
    issues: Sequence[Issue],
) -> list[NextStepJSON]:
    """What to do next, given what is installed (versions as doctor read them; ``None``: not
    installed or its version unknown)."""
    if lmcache is not None and vllm is None and sglang is None:
        return [*_for_lmcache(lmcache, "vllm"), *_for_sglang(lmcache)]
    if lmcache is not None and vllm is None:
        return _for_lmcache(lmcache, "vllm")
    if lmcache is None and vllm is not None:
        cpu = vllm_distribution is not None and vllm_distribution.lower() != "vllm"
        return _for_vllm(vllm, no_deps=cpu)
    if lmcache is None and vllm is None and sglang is None:
        return _for_nothing()
    return _for_pair(issues)


def _for_pair(issues: Sequence[Issue]) -> list[NextStepJSON]:
    """Both installed: for the first connector with a broken issue, the LMCache upgrade that
    fixes all of its broken issues (the highest floor of their fixes), and the lmcache-compat
    connector where every one of them offers it."""
    broken = [i for i in issues if i.severity == "broken" and i.connector != "vllm-native"]
    if not broken:
        return []
    key = broken[0].connector
    mine = [i for i in broken if i.connector == key]
    name = CONNECTORS[key]
    out: list[NextStepJSON] = []
    upgrades = [f for i in mine for f in i.fixes if f.kind == "upgrade-lmcache"]
    every = all(any(f.kind == "upgrade-lmcache" for f in i.fixes) for i in mine)
    if every and all(f.version is not None for f in upgrades):
        best = max(upgrades, key=lambda f: f.version or Version("0"))
        below = f",<{best.below}" if best.below is not None else ""
        out.append(
            {"step": f"{name}: {best}", "command": pip_line(f"lmcache>={best.version}{below}")}
        )
    if all(any(f.kind == "use-compat" for f in i.fixes) for i in mine):
        out.append({"step": f"or keep this LMCache: {CONNECTORS['compat']} works with it"})
    return out
