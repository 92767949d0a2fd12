"""The measured vLLM x LMCache grid: what each pair does, as the real tiers recorded it.

``lmcache_compat/upstream/data/vllm_grid.json`` is written by ``scripts/record_vllm_grid.py`` from
the
``grid-vllm*`` tox tiers (real vLLM, real LMCache releases, one child process per pair) and
checked against a fresh measurement by every run of those tiers. For each measured vLLM it
holds:

* ``imports``: for every LMCache release, whether each module defining a scanned class imports
  beside that vLLM (``"ok"`` or the error's first line);
* ``pairs``: for the LMCache releases the seed scenario runs over, one :class:`ConnectorRun` per
  connector (``vllm``: vLLM's in-tree ``LMCacheConnectorV1``; ``compat``:
  ``LMCacheCompatConnector``) with a :class:`Cell` per aspect (:data:`ASPECTS`);
* ``mp``: for every multi-process (MP) release whose adapter imports there, one
  :class:`ConnectorRun` per MP connector (``vllm-mp``: what vLLM runs as ``LMCacheMPConnector``,
  its in-tree class or LMCache's own where it hands over; ``compat-mp``:
  ``LMCacheCompatMPConnector``) with a :class:`Cell` per aspect of :data:`MP_ASPECTS` (built and
  bound, no server);
* ``unit_tests``: vLLM's own ``test_lmcache_connector.py`` (where the sdist ships it) run with
  each connector class.

``doctor`` reads it: a measured pair's verdict is the measurement (``verified``); a vLLM between
measured releases leans on the nearest measured one before it (behaviour changes at releases,
so the measured release before it is what it has), and says so.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from packaging.version import Version

from lmcache_compat.errors import DataFileError
from lmcache_compat.upstream.shipped import read_data_json
from lmcache_compat.versions import parse_version

if TYPE_CHECKING:
    from packaging.version import Version

__all__ = [
    "ASPECTS",
    "CONNECTOR_KEYS",
    "MP_ASPECTS",
    "MP_CONNECTOR_KEYS",
    "Cell",
    "ConnectorRun",
    "Grid",
    "PairResult",
    "VllmTier",
    "load_grid",
]

DATA_FILE = "vllm_grid.json"
Status = Literal["ok", "n/a", "degraded", "broken"]
#: What the seed scenario records per connector, in order.
ASPECTS = ("builds", "step", "load_failures", "recompute", "fail", "events", "shutdown")
#: The connectors measured: vLLM's in-tree one and ours.
CONNECTOR_KEYS = ("vllm", "compat")
#: What the MP scenario records per MP connector: the scheduler role built by vLLM's
#: ``Scheduler``, the worker role built by vLLM's factory (no server: a release whose adapter
#: connects while it is built records ``n/a`` there).
MP_ASPECTS = ("builds", "worker")
#: The MP connectors measured: what vLLM runs as ``LMCacheMPConnector``, and ours.
MP_CONNECTOR_KEYS = ("vllm-mp", "compat-mp")
_RANK: dict[str, int] = {"ok": 0, "n/a": 0, "degraded": 1, "broken": 2}
#: The module whose import decides whether vLLM's connector can use a release.
ADAPTER_MODULE = "vllm_v1_adapter"


@dataclass(frozen=True)
class Cell:
    """One measured aspect: ``ok``, ``n/a`` (the release or this vLLM has nothing to do here:
    a fallback, not a failure), ``degraded`` (works, loses something) or ``broken``."""

    status: Status
    detail: str = ""

    @classmethod
    def from_json(cls, data: Any) -> Cell:
        if isinstance(data, str):
            return cls("ok" if data == "ok" else "broken", "" if data == "ok" else data)
        status = data["status"]
        if status not in _RANK:
            raise ValueError(f"unknown status {status!r}")
        return cls(status, data.get("detail", ""))

    def to_json(self) -> dict[str, str]:
        return {"status": self.status, "detail": self.detail}

    def text(self) -> str:
        return self.status if not self.detail else f"{self.status}: {self.detail}"


@dataclass(frozen=True)
class ConnectorRun:
    """Every aspect of one connector over one pair."""

    cells: Mapping[str, Cell]

    @classmethod
    def from_json(cls, data: Mapping[str, Any], aspects: tuple[str, ...] = ASPECTS) -> ConnectorRun:
        return cls({aspect: Cell.from_json(data[aspect]) for aspect in aspects if aspect in data})

    def to_json(self) -> dict[str, Any]:
        return {aspect: cell.to_json() for aspect, cell in self.cells.items()}

    @property
    def worst(self) -> Status:
        if not self.cells:
            return "n/a"
        return max(self.cells.values(), key=lambda c: _RANK[c.status]).status

    def problems(self) -> list[tuple[str, Cell]]:
        return [(a, c) for a, c in self.cells.items() if c.status in ("degraded", "broken")]


@dataclass(frozen=True)
class PairResult:
    lmcache: str
    connectors: Mapping[str, ConnectorRun]


@dataclass(frozen=True)
class VllmTier:
    """Everything measured beside one vLLM release."""

    vllm: str
    torch: str
    imports: Mapping[str, Mapping[str, str]]
    pairs: Mapping[str, PairResult]
    unit_tests: Mapping[str, Any] | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)
    #: MP release -> both MP connectors' runs (:data:`MP_CONNECTOR_KEYS`)
    mp: Mapping[str, PairResult] = field(default_factory=dict)

    def adapter_import(self, lmcache: str) -> str | None:
        """``"ok"``, the error line, or ``None`` when that release was not measured here."""
        modules = _by_version(self.imports, lmcache)
        return None if modules is None else modules.get(ADAPTER_MODULE)

    def pair(self, lmcache: str) -> PairResult | None:
        return _by_version(self.pairs, lmcache)

    def mp_pair(self, lmcache: str) -> PairResult | None:
        """Both MP connectors over this MP release, where measured."""
        return _by_version(self.mp, lmcache)


_T = TypeVar("_T")


def _public(version: str) -> Version:
    """The PEP 440 public version (``0.3.10.0.post2`` equals ``0.3.10.post2``; a local part
    such as ``+cpu`` is the same release)."""

    return Version(parse_version(version).public)


def _by_version(table: Mapping[str, _T], version: str) -> _T | None:
    """The entry of ``table`` (keyed by release strings) whose key is ``version`` as a PEP 440
    version, never as a string."""
    wanted = _public(version)
    return next((value for key, value in table.items() if _public(key) == wanted), None)


class Grid:
    """The measured tiers, oldest vLLM first."""

    def __init__(self, tiers: Iterable[VllmTier], meta: Mapping[str, Any] | None = None) -> None:

        self.tiers = sorted(tiers, key=lambda t: Version(t.vllm))
        self.meta = dict(meta or {})

    @property
    def versions(self) -> list[str]:
        return [t.vllm for t in self.tiers]

    def tier(self, vllm: str) -> VllmTier | None:
        """The exact measured tier of ``vllm``, if any."""
        for t in self.tiers:
            if _public(t.vllm) == _public(vllm):
                return t
        return None

    def leans_on(self, vllm: str) -> VllmTier | None:
        """The measured tier a vLLM release is judged by: itself if measured, else the nearest
        measured release before it (``None`` below the oldest measured one)."""

        wanted = Version(parse_version(vllm).public)  # the reader contract: a budgeted parse
        best = None
        for t in self.tiers:
            if Version(t.vllm) <= wanted:
                best = t
        return best

    def ok_span(self, tier: VllmTier, connector: str, aspect: str) -> tuple[str, str | None] | None:
        """The upgrade target for ``aspect`` of ``connector`` on ``tier``: ``(first, stop)``,
        where ``first`` is the oldest measured LMCache release from which the aspect is ``ok``
        (or ``n/a``) on every later release the connector builds with, and ``stop`` the oldest
        later release it does not build with (``None``: none). ``None`` when the newest
        release that builds is not ok."""

        def cell(version: str, name: str) -> Cell | None:
            run = tier.pairs[version].connectors.get(connector)
            return run.cells.get(name) if run is not None else None

        def builds(version: str) -> bool:
            built = cell(version, "builds")
            return built is None or built.status != "broken"

        versions = sorted(tier.pairs, key=Version)
        first = None
        candidates = versions if aspect == "builds" else [v for v in versions if builds(v)]
        for version in reversed(candidates):
            status = cell(version, aspect)
            if status is None or status.status not in ("ok", "n/a"):
                break
            first = version
        if first is None:
            return None
        stop = next((v for v in versions if Version(v) > Version(first) and not builds(v)), None)
        return first, stop


def tier_from_json(vllm: str, data: Mapping[str, Any]) -> VllmTier:
    pairs = {
        release: PairResult(
            release,
            {key: ConnectorRun.from_json(run) for key, run in pair["connectors"].items()},
        )
        for release, pair in data.get("pairs", {}).items()
    }
    mp = {
        release: PairResult(
            release,
            {
                key: ConnectorRun.from_json(run, MP_ASPECTS)
                for key, run in pair["connectors"].items()
            },
        )
        for release, pair in data.get("mp", {}).items()
    }
    return VllmTier(
        vllm,
        data.get("torch", ""),
        data.get("imports", {}),
        pairs,
        data.get("unit_tests"),
        tuple(data.get("notes", ())),
        mp,
    )


def grid_from_json(data: Mapping[str, Any]) -> Grid:
    return Grid(
        (tier_from_json(v, t) for v, t in data["vllm"].items()),
        {k: v for k, v in data.items() if k != "vllm"},
    )


@functools.lru_cache(maxsize=1)
def load_grid() -> Grid:
    """The shipped grid (read once per process)."""

    data = read_data_json(DATA_FILE, "vLLM grid")
    try:
        return grid_from_json(data)
    except (ValueError, KeyError, TypeError) as exc:
        raise DataFileError(f"shipped vLLM grid is malformed: {exc}") from None
