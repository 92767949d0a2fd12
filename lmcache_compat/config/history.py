"""Where each configuration key lived across the releases, and how keys moved.

A move happens between two consecutive releases A and B: a key of A that B does not have goes
to a new name, or nowhere. Each move names its source:

* the alias table of B (``_CONFIG_ALIASES``), from the shipped data: LMCache's own statement of
  the new name, whether or not its loader applies it. An alias whose type differs from the old
  key's (``lmcache_worker_port`` -> ``lmcache_worker_ports``) is not a safe mapping;
* :data:`DIFF_MOVES`: renames no table states, read from the diff of the two releases (the
  release is not written: it is the first one in which the old key is gone);
* otherwise the diff itself: removed, no replacement.

:func:`forward` and :func:`backward` follow a key from one release to another through these
moves (the migration and the check's fixes both use them).
"""

from __future__ import annotations

import difflib
import functools
import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from lmcache_compat.config.resolver import base_type
from lmcache_compat.config.schema import ReleaseSchema, Schemas, load_schemas
from lmcache_compat.upstream import locations as loc

__all__ = [
    "DIFF_MOVES",
    "Chain",
    "KeyMove",
    "apply_transform",
    "backward",
    "forward",
    "moves_between",
    "story",
    "was_key_before",
]

Transform = Literal["same", "wrap", "ids"]


@dataclass(frozen=True, slots=True)
class KeyMove:
    """Where a key of one release went in the next (``new`` ``None``: nowhere)."""

    old: str
    new: str | None
    transform: Transform = "same"
    #: Where the move is shown (a table of the release, or the diff and what it reads).
    evidence: str = ""
    #: For a key with no safe mapping: what to set instead, by hand.
    hint: str | None = None
    #: The release in which the old key is gone (filled in when the move is computed).
    release: str = ""


_PD = (
    "P/D disaggregation moved to enable_pd with pd_role, pd_buffer_size, pd_buffer_device, "
    "pd_peer_host, pd_peer_init_port, pd_peer_alloc_port (and pd_proxy_host, pd_proxy_port): "
    "the single receiver host and port have no one-to-one mapping, set them by hand"
)
_P2P = (
    "P2P sharing moved to enable_p2p with p2p_host, p2p_init_ports, p2p_lookup_ports and "
    "transfer_channel, and the controller's controller_pull_url / controller_reply_url"
)

#: Moves no LMCache table states, each read from the diff of two consecutive releases (and
#: the code that reads both keys). A row here wins over the alias table.
DIFF_MOVES: tuple[KeyMove, ...] = (
    KeyMove(
        "blend_recompute_ratio",
        "blend_recompute_ratios",
        "wrap",
        evidence="v1/compute/blend/blender.py of the release that adds blend_recompute_ratios "
        "reads recomp_ratios[0]: the one ratio becomes a one-element list",
    ),
    KeyMove(
        "cufile_buffer_size",
        "gds_buffer_size",
        evidence="v1/cache_engine.py sizes the CuFile allocator from either key the same way "
        "(MiB), and the GDS backend's docstring names the new key",
    ),
    KeyMove(
        "mla_lookup_server_worker_id",
        "lookup_server_worker_ids",
        "ids",
        evidence="v1/lookup_client/factory.py: a negative id meant every worker, an empty list "
        "now does; otherwise the one id becomes a one-element list",
    ),
    KeyMove(
        "lmcache_worker_port",
        None,
        hint="lmcache_worker_ports lists one port per worker (the old key was a base port "
        "plus the worker id): set lmcache_worker_ports: [P, P+1, ...], one per worker",
    ),
    KeyMove("enable_nixl", None, hint=_PD),
    KeyMove("nixl_receiver_host", None, hint=_PD),
    KeyMove("nixl_receiver_port", None, hint=_PD),
    KeyMove("lookup_url", None, hint=_P2P),
    KeyMove("distributed_url", None, hint=_P2P),
)
_DIFF_MOVES = {m.old: m for m in DIFF_MOVES}


def _compatible(a: str | None, b: str | None) -> bool:
    return base_type(a)[0] == base_type(b)[0]


@functools.lru_cache(maxsize=512)
def moves_between(a: ReleaseSchema, b: ReleaseSchema) -> Mapping[str, KeyMove]:
    """For each key of ``a`` (the older) that ``b`` does not have: its move."""
    out: dict[str, KeyMove] = {}
    for old in a.keys:
        if old in b.keys:
            continue
        curated = _DIFF_MOVES.get(old)
        if curated is not None and (curated.new is None or curated.new in b.keys):
            evidence = curated.evidence or f"the diff of {a.version} and {b.version}"
            out[old] = KeyMove(
                old, curated.new, curated.transform, evidence, curated.hint, b.version
            )
            continue
        new = b.aliases.get(old)
        if new is not None and new in b.keys:
            applied = old in b.deprecated and b.loader.alias_rule != "none"
            table = f"LMCache {b.version}'s alias table (_CONFIG_ALIASES)" + (
                "" if applied else "; its loader does not apply it"
            )
            if _compatible(a.keys[old].type, b.keys[new].type):
                out[old] = KeyMove(old, new, "same", table, None, b.version)
            else:
                hint = (
                    f"{table} names {new}, but its type is {b.keys[new].type} where {old} was "
                    f"{a.keys[old].type}: no safe conversion"
                )
                out[old] = KeyMove(old, None, "same", table, hint, b.version)
            continue
        evidence = f"the diff of {a.version} and {b.version}"
        out[old] = KeyMove(old, None, "same", evidence, None, b.version)
    return out


@dataclass(frozen=True, slots=True)
class Chain:
    """A key followed from one release to another."""

    start: str
    #: The name in the last release reached (``None``: it stopped).
    final: str | None
    moves: tuple[KeyMove, ...] = ()
    #: Why it stopped: the move that has no new name, or the release that added the key.
    stop: KeyMove | None = None
    added_in: str | None = None
    transforms: tuple[Transform, ...] = field(default=())


def forward(name: str, rows: list[ReleaseSchema]) -> Chain:
    """``name`` (a key of ``rows[0]``) followed through ``rows`` (oldest first)."""
    current, moves = name, list[KeyMove]()
    for a, b in itertools.pairwise(rows):
        if current in b.keys:
            continue
        move = moves_between(a, b).get(current)
        if move is None or move.new is None:
            return Chain(name, None, tuple(moves), move)
        moves.append(move)
        current = move.new
    return Chain(name, current, tuple(moves), transforms=tuple(m.transform for m in moves))


#: What undoes a transform, for a downgrade (``None``: cannot).
_REVERSE: Mapping[Transform, Transform | None] = {"same": "same", "wrap": None, "ids": None}


def backward(name: str, rows: list[ReleaseSchema]) -> Chain:
    """``name`` (a key of ``rows[0]``) followed back through ``rows`` (newest first). Only a
    move whose value is unchanged is undone."""
    current, moves = name, list[KeyMove]()
    for b, a in itertools.pairwise(rows):
        if current in a.keys:
            continue
        back = next(
            (m for m in moves_between(a, b).values() if m.new == current),
            None,
        )
        if back is None or _REVERSE[back.transform] is None:
            return Chain(name, None, tuple(moves), back, added_in=b.version)
        moves.append(back)
        current = back.old
    return Chain(name, current, tuple(moves))


def apply_transform(transform: Transform, value: Any) -> Any:
    if transform == "wrap":
        return value if isinstance(value, list) else [value]
    if transform == "ids":
        if isinstance(value, list):
            return value
        return [] if isinstance(value, int) and value < 0 else [value]
    return value


def _releases_with(schemas: Schemas, name: str) -> list[ReleaseSchema]:
    return [r for r in schemas.rows if name in r.keys]


def was_key_before(name: str, target: ReleaseSchema) -> bool:
    """Whether ``name`` was a key of a release before ``target`` (a removed key, not a typo)."""
    return any(
        name in r.keys and r.parsed_version < target.parsed_version for r in load_schemas().rows
    )


def story(name: str, target: ReleaseSchema, schemas: Schemas | None = None) -> str:
    """What to do with ``name``, which ``target`` does not read: its new name (and the move's
    source), "removed in X, no replacement", the release that added it, or what it is."""
    schemas = schemas or load_schemas()
    having = _releases_with(schemas, name)
    if not having:
        if any(name in r.legacy_keys for r in schemas.rows):
            legacy = loc.LEGACY_CONFIG_CLASS
            return (
                f"remove it: a key of the legacy configuration ({legacy.modules[0]}."
                f"{legacy.name}), which LMCache reads only when told to, not of the v1 one"
            )
        close = difflib.get_close_matches(name, list(target.keys), n=1, cutoff=0.75)
        hint = f"; did you mean {close[0]}?" if close else ""
        return f"remove it: not a key of any LMCache release{hint}"
    first = having[0]
    if target.parsed_version < first.parsed_version:
        return f"first a key in LMCache {first.version}: upgrade to it, or remove the line"
    older = [r for r in having if r.parsed_version < target.parsed_version]
    start = older[-1] if older else having[-1]
    chain = forward(name, schemas.between(start, target))
    if chain.final is not None and chain.final in target.keys and chain.final != name:
        via = chain.moves[-1]
        shape = _SHAPES.get(via.transform, "")
        return f"use {chain.final}{shape} (renamed in {via.release}: {via.evidence})"
    stop = chain.stop
    if stop is None:
        return f"remove it: not a key of LMCache {target.version}"
    if stop.hint:
        return f"removed in {stop.release}, no one-to-one replacement: {stop.hint}"
    return f"removed in {stop.release}, no replacement"


_SHAPES: Mapping[str, str] = {
    "wrap": " as a one-element list",
    "ids": " as a list ([] for a negative id)",
}
