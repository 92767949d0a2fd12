"""What each mutation must give, one keyword row per change kind: the policy the tier checks
(``test_mutation.py`` reads these rows and nothing else).

``lost``: the capabilities the change takes away (``scan``, ``doctor`` and the adapter must all
agree; every other capability stays as the real release has it). ``undecided``: the class whose
capabilities can no longer be decided (two candidates: ``scan`` reports it ambiguous, ``doctor``
reports its capabilities unknown and keeps every other). ``changes``: exactly the kinds ``diff``
reports (``CAPABILITY_*`` included); ``breaking``: its verdict. ``resolve`` / ``adapter``:
``"found"`` / ``"adapts"``, or ``"refused"`` (one line naming the change).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from lmcache_compat.core.catalog import Capability
from lmcache_compat.upstream import locations as loc
from lmcache_compat.upstream.diff import ChangeKind as K


@dataclass(frozen=True, slots=True, kw_only=True)
class Expected:
    kind: str
    changes: frozenset[K] = frozenset()
    breaking: bool = False
    lost: frozenset[Capability] = frozenset()
    undecided: str | None = None
    resolve: Literal["found", "refused"] = "found"
    adapter: Literal["adapts", "refused"] = "adapts"


def _set(*kinds: K) -> frozenset[K]:
    return frozenset(kinds)


C = Capability
EXPECTED: tuple[Expected, ...] = (
    Expected(kind="moved, star re-export left", changes=_set(K.CLASS_MOVED_REEXPORTED)),
    Expected(kind="moved, explicit re-export left", changes=_set(K.CLASS_MOVED_REEXPORTED)),
    # honest: code importing the old module path fails; lmcache-compat finds it by name
    Expected(kind="moved, no re-export", changes=_set(K.CLASS_MOVED), breaking=True),
    Expected(
        kind="in-process connector moved, star re-export left",
        changes=_set(K.CLASS_MOVED_REEXPORTED),
    ),
    Expected(kind="renamed, deprecated alias kept"),
    Expected(kind="methods moved to a mixin in another file"),
    # not a removal: positional callers break (diff says so), keyword callers and we do not
    Expected(
        kind="arguments after request_id keyword-only",
        changes=_set(K.PARAMETER_KIND_CHANGED),
        breaking=True,
    ),
    Expected(
        kind="worker: submit arguments keyword-only",
        changes=_set(K.PARAMETER_KIND_CHANGED),
        breaking=True,
    ),
    Expected(kind="optional parameter added", changes=_set(K.PARAMETER_ADDED)),
    Expected(
        kind="annotation widened (bytes | memoryview)", changes=_set(K.PARAMETER_TYPE_WIDENED)
    ),
    Expected(
        kind="annotation narrowed (X | None -> X)",
        changes=_set(K.PARAMETER_TYPE_CHANGED),
        breaking=True,
    ),
    Expected(kind="Optional[...] spelled"),
    Expected(kind="engine: Optional/Union spelled with |"),
    Expected(
        kind="engine: lookup arguments keyword-only",
        changes=_set(K.PARAMETER_KIND_CHANGED),
        breaking=True,
    ),
    Expected(kind="from __future__ import annotations"),
    Expected(kind="quoted annotation"),
    Expected(kind="method added", changes=_set(K.METHOD_ADDED)),
    Expected(kind="parameter became optional", changes=_set(K.PARAMETER_BECAME_OPTIONAL)),
    Expected(kind="return type changed", changes=_set(K.RETURN_CHANGED), breaking=True),
    Expected(kind="now returns a value", changes=_set(K.RETURN_ADDED)),
    Expected(
        kind="parameter renamed",
        changes=_set(K.PARAMETER_RENAMED, K.CAPABILITY_REMOVED),
        breaking=True,
        lost=frozenset({C.MP_LOOKUP_START}),
    ),
    # we pass these by keyword: the reorder cannot misroute our calls
    Expected(kind="parameters reordered", changes=_set(K.PARAMETER_MOVED), breaking=True),
    Expected(
        kind="parameter removed",
        changes=_set(K.PARAMETER_REMOVED, K.CAPABILITY_REMOVED),
        breaking=True,
        lost=frozenset({C.MP_RESERVE_LAST_TOKEN}),
    ),
    Expected(
        kind="required parameter added",
        changes=_set(K.PARAMETER_ADDED_REQUIRED),
        breaking=True,
        adapter="refused",
    ),
    Expected(
        kind="optional capability method removed",
        changes=_set(K.METHOD_REMOVED, K.CAPABILITY_REMOVED),
        breaking=True,
        lost=frozenset({C.KV_EVENTS}),
    ),
    Expected(
        kind="two candidates, known path gone",
        changes=_set(K.CLASS_AMBIGUOUS),
        breaking=True,
        undecided=loc.MP_SCHEDULER.name,
        resolve="refused",
        adapter="refused",
    ),
)
