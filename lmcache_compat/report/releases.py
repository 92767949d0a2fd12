"""``lmcache-compat releases``: the releases a SPEC names, printed as lines, JSON, tox factors or
a GitHub Actions matrix. The query itself is :mod:`lmcache_compat.upstream.release_query`."""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence

from lmcache_compat.report.releases_parser import FORMATS, ROLES, add_parser
from lmcache_compat.upstream.release_query import (
    Distinct,
    DistinctJSON,
    RoleName,
    distinct,
    select,
)

__all__ = [
    "FORMATS",
    "ROLES",
    "Distinct",
    "RoleName",
    "add_parser",
    "distinct",
    "render",
    "select",
]


def render(versions: Sequence[str], fmt: str, found: Sequence[Distinct] = ()) -> str:
    """``versions`` as ``lines``, ``json``, ``tox`` (factors for ``env_list``) or ``github``
    (an Actions ``strategy.matrix``)."""
    if fmt == "tox":
        return "{" + ",".join(versions) + "}"
    if fmt == "github":
        return json.dumps({"lmcache": list(versions)})
    changes: Mapping[str, tuple[str, ...]] = {d.version: d.changes for d in found}
    if fmt == "json":
        rows: list[DistinctJSON] = [
            {"version": v, "changes": list(changes.get(v, ()))} for v in versions
        ]
        return json.dumps({"releases": rows}, indent=2)
    return "\n".join(f"{v}  {'; '.join(changes[v])}" if changes.get(v) else v for v in versions)


def run(args: argparse.Namespace) -> int:
    """``lmcache-compat releases`` (its parser: :mod:`lmcache_compat.report.releases_parser`)."""
    versions = select(args.spec)
    found: list[Distinct] = []
    if args.distinct:
        found = distinct(args.role, versions)
        versions = [d.version for d in found]
    print(render(versions, args.format, found))
    return 0
