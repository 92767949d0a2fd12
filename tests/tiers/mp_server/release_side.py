"""What the scripts that run under a release's venv share (``compat_client.py``,
``lookup_client.py``, ``worker_probe.py``; each run with ``PYTHONPATH`` set to the repository
root): the release's own MP classes and token codec, found where
:mod:`lmcache_compat.upstream.locations` says they live (the one place module paths are written),
and
the keyword arguments its own adapters are built with (:func:`lmcache_compat.mp.mp_init_kwargs`,
the mapping ``MPSchedulerAdapter.create`` uses; only construction goes through it, every call
after is the release's own)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from lmcache_compat import MPConfig
from lmcache_compat.mp import mp_init_kwargs
from lmcache_compat.upstream import locations as loc
from lmcache_compat.upstream.resolve import find


def scheduler_class() -> type:
    cls: type = find(loc.MP_SCHEDULER)
    return cls


def worker_class() -> type:
    cls: type = find(loc.MP_WORKER)
    return cls


def load_store_op_class() -> type:
    cls: type = find(loc.LOAD_STORE_OP)
    return cls


def parallel_strategy_class() -> type | None:
    """The release's ``ParallelStrategy`` beside its adapters (0.4.4 on), else ``None``."""
    module = sys.modules[scheduler_class().__module__]
    found = vars(module).get(loc.PARALLEL_STRATEGY.name)
    return found if isinstance(found, type) else None


def pack_token_ids() -> Callable[[list[int]], bytes]:
    """The release's own token codec (0.5.7rc2 on)."""
    pack: Callable[[list[int]], bytes] = find(loc.PACK_TOKEN_IDS)
    return pack


def own_init_kwargs(
    cls: type, url: str, context: Any, *, block_size: int, mq_timeout: float
) -> dict[str, Any]:
    """Keyword arguments for the release's own ``cls`` (scheduler or worker adapter), one server
    at ``url``, world size 1, model ``"m"``."""
    config = MPConfig([url], "m", block_size, mq_timeout=mq_timeout)
    return mp_init_kwargs(cls, config, context, parallel_strategy_cls=parallel_strategy_class())
