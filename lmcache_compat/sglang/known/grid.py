"""The shipped sglang x LMCache grid: what every sglang release calls in LMCache, and what that
does with every LMCache release, read from the real wheels.

``lmcache_compat/upstream/data/sglang_grid.json`` is written by ``scripts/build_sglang_grid.py``
(a maintainer command) and re-checked by the ``sglang-grid`` tox env against a fresh reading of
the newest sglang wheel and one older one. It holds:

* ``releases``: per sglang release, its wheel and sha256, the key of its run, its plugin
  loader's entry-point group, whether it has the radix-cache registry (and the build context's
  fields), the internals the lmcache-compat backend relies on and the variant that serves it;
* ``runs``: consecutive releases with identical LMCache import lines and call shapes (equal
  keys): their facts once, and per LMCache release of the shipped matrix the binding
  (:class:`~lmcache_compat.sglang.known.bind.PairJSON`: per mode, works or the exact
  reason).

``doctor`` judges an installed pair by binding the installed files the same way; for a release
of the grid the two agree (a test proves it for every pair).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from packaging.version import Version

from lmcache_compat.errors import DataFileError, NotInMatrixError
from lmcache_compat.sglang.known.bind import PairJSON
from lmcache_compat.sglang.known.reader import IntegrationJSON, SglangFacts
from lmcache_compat.upstream.shipped import read_data_json
from lmcache_compat.versions import parse_version

__all__ = ["DATA_FILE", "Run", "SglangGrid", "SglangRelease", "load_sglang_grid"]

DATA_FILE = "sglang_grid.json"


@dataclass(frozen=True, slots=True)
class SglangRelease:
    sglang: str
    wheel: str
    sha256: str
    key: str
    plugin_group: str | None
    registry: bool
    context_fields: tuple[str, ...]
    internals: Mapping[str, bool]
    variant: str | None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SglangRelease:
        return cls(
            data["sglang"],
            data["wheel"],
            data["sha256"],
            data["key"],
            data["plugin_group"],
            bool(data["registry"]),
            tuple(data["context_fields"]),
            dict(data["internals"]),
            data["variant"],
        )


@dataclass(frozen=True, slots=True)
class Run:
    """Consecutive sglang releases whose LMCache import lines and call shapes are identical."""

    first: str
    last: str
    key: str
    releases: tuple[str, ...]
    integration: tuple[IntegrationJSON, ...]
    #: LMCache release -> sglang's own integration over it.
    pairs: Mapping[str, PairJSON]

    @property
    def label(self) -> str:
        return self.first if self.first == self.last else f"{self.first} ... {self.last}"

    def working(self) -> list[str]:
        """The LMCache releases sglang's own integration works with (its default mode)."""
        return [v for v, p in self.pairs.items() if p["status"] == "works"]


def _public(version: str) -> Version:
    return Version(parse_version(version).public)


class SglangGrid:
    def __init__(
        self, releases: Sequence[SglangRelease], runs: Sequence[Run], lmcache: Sequence[str]
    ) -> None:
        self.releases = sorted(releases, key=lambda r: Version(r.sglang))
        self.runs = list(runs)
        self.lmcache = list(lmcache)
        self._run_of = {r: run for run in self.runs for r in run.releases}

    @property
    def versions(self) -> list[str]:
        return [r.sglang for r in self.releases]

    def release(self, sglang: str) -> SglangRelease:
        """The entry of ``sglang`` (any PEP 440 spelling); :class:`NotInMatrixError` else."""
        wanted = _public(str(parse_version(sglang)))
        for r in self.releases:
            if _public(r.sglang) == wanted:
                return r
        raise NotInMatrixError(
            f"sglang {sglang} is not in the shipped sglang grid "
            f"({self.versions[0]} ... {self.versions[-1]})"
        )

    def run_of(self, sglang: str) -> Run:
        return self._run_of[self.release(sglang).sglang]

    def facts(self, sglang: str) -> SglangFacts:
        """The release's facts, as :func:`~lmcache_compat.sglang.known.reader.read_sglang`
        read them from its wheel."""
        rel = self.release(sglang)
        return {
            "sglang": rel.sglang,
            "integration": list(self.run_of(sglang).integration),
            "plugin_group": rel.plugin_group,
            "registry": rel.registry,
            "context_fields": list(rel.context_fields),
            "internals": dict(rel.internals),
        }

    def pair(self, sglang: str, lmcache: str) -> PairJSON | None:
        """sglang's own integration over ``lmcache`` (``None``: a release the grid did not
        bind)."""
        run = self.run_of(sglang)
        wanted = _public(lmcache)
        return next((p for v, p in run.pairs.items() if _public(v) == wanted), None)


def grid_from_json(data: Mapping[str, Any]) -> SglangGrid:
    runs = [
        Run(
            r["first"],
            r["last"],
            r["key"],
            tuple(r["releases"]),
            tuple(r["integration"]),
            dict(r["pairs"]),
        )
        for r in data["runs"]
    ]
    releases = [SglangRelease.from_json(r) for r in data["releases"]]
    return SglangGrid(releases, runs, data["lmcache"])


@functools.lru_cache(maxsize=1)
def load_sglang_grid() -> SglangGrid:
    """The shipped grid (read once per process)."""
    data = read_data_json(DATA_FILE, "sglang grid")
    try:
        return grid_from_json(data)
    except (ValueError, KeyError, TypeError) as exc:
        raise DataFileError(f"shipped sglang grid is malformed: {exc}") from None
