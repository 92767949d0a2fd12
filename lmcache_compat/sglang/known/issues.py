"""What sglang's calls do that no signature shows, as data: the rows the binding of a pair
(:mod:`lmcache_compat.sglang.known.bind`) adds to what :meth:`inspect.Signature.bind`
finds.

One row today: the ``tp_group`` sglang hands LMCache's connectors. Before 0.5.5.post1 sglang
passes its ``GroupCoordinator`` (the scheduler's ``tp_group``); LMCache (0.3.9 on) uses the
value as a torch process group in ``dist.all_reduce(..., group=tp_group)`` when it agrees on
the hit length across ranks (LMCache#1589). Whether a release's call passes the coordinator is
read from the call's source text (``tp_group`` as handed over, or ``tp_group.device_group``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from packaging.version import Version

from lmcache_compat.core.catalog import Capability
from lmcache_compat.core.roles import SGLANG_LAYERWISE
from lmcache_compat.sglang.known.reader import IntegrationJSON
from lmcache_compat.upstream.matrix import ReleaseRow

__all__ = [
    "CPU_IN_PROCESS_FROM",
    "SINGLE_RANK_SHORTCUT",
    "BehaviourIssue",
    "behaviour_issues",
    "passes_torch_group",
]

#: 0.3.9 added ``tp_group`` to ``LMCacheLayerwiseConnector`` and reduces the hit length over
#: it on every load, one rank or many; 0.3.9.post1 skips the reduction when ``tp_size == 1``
#: (a change no signature shows: this gate is the only place that knows it).
SINGLE_RANK_SHORTCUT = "0.3.9.post1"
#: Source text that hands over a torch process group (sglang's coordinator keeps its torch
#: groups as ``device_group`` / ``cpu_group``; CacheInitParams as ``tp_cache_group``).
_TORCH_GROUP = re.compile(r"\.(device_group|cpu_group)\b|cache_group\b|^None$")


@dataclass(frozen=True, slots=True)
class BehaviourIssue:
    key: str
    text: str
    #: Fails whatever the set-up (``True``) or only under ``condition``.
    always: bool
    condition: str = ""


def passes_torch_group(source: str) -> bool:
    """Whether the source text of a ``tp_group=`` argument hands over a torch process group
    (else: the object sglang's caller passes, its ``GroupCoordinator``)."""
    return bool(_TORCH_GROUP.search(source.strip()))


def behaviour_issues(
    module: IntegrationJSON, cls: str, row: ReleaseRow
) -> Iterator[BehaviourIssue]:
    """The rows that apply to sglang's construction of ``cls`` over ``row``'s release."""
    keyword = Capability.SGLANG_TP_GROUP.spec.keyword
    assert keyword is not None
    init = row.facts(cls).get("__init__")
    if init is None or not init.accepts_keyword(keyword):
        return
    for call in module["calls"]:
        source = call["keywords"].get(keyword) if call["callee"] == cls else None
        if source is None or passes_torch_group(source):
            continue
        always = cls == SGLANG_LAYERWISE.name and Version(row.version) < Version(
            SINGLE_RANK_SHORTCUT
        )
        yield BehaviourIssue(
            key="tp-group-coordinator",
            text=f"sglang passes tp_group={source} (its GroupCoordinator) where LMCache wants a "
            "torch process group: its all_reduce fails on the first load (LMCache#1589)",
            always=always,
            condition="" if always else "with tp_size > 1",
        )


#: The first LMCache release whose in-process SGLang connector runs without CUDA (measured on
#: CPU by the sglang tier: 0.3.7 ... 0.4.4 call ``.cuda()`` in ``store_kv``, 0.4.5 calls
#: ``torch_dev.set_device``, 0.3.6 loads ``libcudart``). Pairs below it are served by the
#: plugin on CUDA but not verified by lmcache-compat's tests (the note says so).
CPU_IN_PROCESS_FROM = "0.4.6"
