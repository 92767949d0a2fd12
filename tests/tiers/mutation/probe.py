"""Run beside real vLLM: for each mutated release tree, import it first on ``sys.path`` under a
fresh set of ``lmcache`` modules, find the changed class with ``resolve.where``/``find`` and
build our adapter over a real instance of it (made without running its ``__init__``: the
adapters probe the class, they never call the engine while binding).

    python -m tests.tiers.mutation.probe JOBS.json  ->  one JSON object on the last stdout line

``JOBS.json``: ``[{"kind": ..., "root": ..., "place": <Place name>}, ...]``. Each result:
``{"resolve": "found <module>.<name>" | "refused: <line>", "adapter": "adapts" |
"refused: <line>", "capabilities": [...]}``.
"""

from __future__ import annotations

import importlib
import inspect
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lmcache_compat import ConnectorAdapter, EngineAdapter, MPSchedulerAdapter, MPWorkerAdapter
from lmcache_compat.core.adapter import BoundAdapter
from lmcache_compat.core.catalog import Capability
from lmcache_compat.core.roles import ENGINE, MP_SCHEDULER, MP_WORKER
from lmcache_compat.core.signatures import facts_of
from lmcache_compat.core.tokens import TokenParameter, token_parameter
from lmcache_compat.upstream import locations as loc
from lmcache_compat.upstream.resolve import clear_find_cache, find, where

ADAPTERS: dict[str, Callable[[object], BoundAdapter]] = {
    a.role.name: a for a in (ConnectorAdapter, MPSchedulerAdapter, MPWorkerAdapter, EngineAdapter)
}
PLACES = {p.name: p for p in loc.PLACES if p.package == loc.LMCACHE}


def one_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines() or [""]
    return f"{type(exc).__name__}: {lines[0]}"  # the line naming the change (a HINT follows)


def fresh(root: str) -> None:
    """Forget every imported ``lmcache`` module and put ``root`` first on ``sys.path``."""
    for name in [n for n in sys.modules if n == loc.LMCACHE or n.startswith(loc.LMCACHE + ".")]:
        del sys.modules[name]
    sys.path[:] = [root, *(p for p in sys.path if p not in ROOTS)]
    importlib.invalidate_caches()
    clear_find_cache()
    forget_metrics()


def forget_metrics() -> None:
    """LMCache's modules register Prometheus metrics at import: a second import of the same
    module would raise "Duplicated timeseries", so the default registry starts empty again."""
    try:  # a dependency of LMCache, not of ours
        registry = importlib.import_module("prometheus_client").REGISTRY
    except ImportError:
        return
    for collector in list(registry._collector_to_names):
        registry.unregister(collector)


def probe(job: dict[str, str]) -> dict[str, Any]:
    fresh(job["root"])
    place = PLACES[job["place"]]
    out: dict[str, Any] = {"kind": job["kind"]}
    try:
        for dotted in place.modules:  # imported first, as code importing by the old path does
            if Path(job["root"], loc.module_file(dotted)).is_file():
                importlib.import_module(dotted)
        found = where(place)
        cls = find(place)
    except Exception as exc:  # the one line is the result
        out["resolve"] = out["adapter"] = f"refused: {one_line(exc)}"
        return out
    origin = Path(sys.modules[cls.__module__].__file__ or "")
    if not origin.is_relative_to(job["root"]):
        out["resolve"] = f"refused: imported {origin}, not the mutated tree"
        return out
    out["resolve"] = f"found {found.module}.{found.name}"
    engine = cls.__new__(cls)
    recorders = {m: Recorder() for m, _, _ in CALLS.get(place.name, ())}
    for method, recorder in recorders.items():  # the instance's own attribute shadows the
        setattr(engine, method, recorder)  # class's method: the adapter binds the recorder
    try:
        adapter = ADAPTERS[place.name](engine)
    except Exception as exc:  # the one line is the result
        out["adapter"] = f"refused: {one_line(exc)}"
        return out
    out["adapter"] = calls_bind(adapter, cls, place.name, recorders)
    out["capabilities"] = sorted(c.value for c in adapter.capabilities)
    return out


ROOTS: set[str] = set()


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    def __call__(self, *args: Any, **kwargs: Any) -> bool:
        self.calls.append((args, kwargs))
        return True


IDS = [1, 2, 70_000]

#: The calls made through each adapter (our API's arguments), each checked to bind to the
#: mutated class's own signature with the caller's values where the release names them:
#: role -> (method, the call, {the release's parameter: the value it must receive}).
CALLS: dict[str, tuple[tuple[str, Callable[[Any], object], dict[str, object]], ...]] = {
    MP_SCHEDULER.name: (
        (
            Capability.MP_LOOKUP_BY_TOKEN_IDS.spec.method,
            lambda a: a.lookup("r", IDS, cache_salt="s", request_configs={"k": 1}),
            {"request_id": "r", "cache_salt": "s", "request_configs": {"k": 1}},
        ),
        (
            Capability.MP_FREE_LOOKUP_LOCKS.spec.method,
            lambda a: a.free_lookup_locks(IDS, 0, 3, "r", cache_salt="s"),
            {"request_id": "r", "cache_salt": "s", "start": 0, "end": 3},
        ),
    ),
    MP_WORKER.name: (
        (
            "submit_store_request",
            lambda a: a.submit_store_request("r", "op", "ev", cache_salt="s"),
            {"request_id": "r", "op": "op", "event": "ev", "cache_salt": "s"},
        ),
        (
            "batched_submit_store_requests",
            lambda a: a.batched_submit_store_requests(["r"], ["op"], "ev", cache_salts=["s"]),
            {"request_ids": ["r"], "ops": ["op"], "event": "ev", "cache_salts": ["s"]},
        ),
    ),
    ENGINE.name: (
        (
            Capability.ENGINE_LOOKUP_ID.spec.method,
            lambda a: a.lookup(IDS, lookup_id="r", request_configs={"k": 1}),
            {"tokens": IDS, "lookup_id": "r", "request_configs": {"k": 1}},
        ),
    ),
}


def _packed(cls: type) -> bytes | None:
    """The release's own packing of :data:`IDS`, where the class takes packed token ids."""
    facts = facts_of(getattr(cls, Capability.MP_LOOKUP_BY_TOKEN_IDS.spec.method))
    found = token_parameter(facts)
    if not (isinstance(found, TokenParameter) and found.encoding == "packed"):
        return None
    packed: bytes = find(loc.PACK_TOKEN_IDS)(IDS)
    return packed


def calls_bind(adapter: BoundAdapter, cls: type, role: str, recorders: dict[str, Recorder]) -> str:
    """``adapts`` when every call the adapter makes binds to ``cls``'s own signature, else
    ``refused: <line>`` (the adapter's own refusal, or the TypeError the call would raise)."""
    packed = _packed(cls) if role == MP_SCHEDULER.name else None
    for method, call, values in CALLS.get(role, ()):
        try:
            call(adapter)
        except Exception as exc:  # the one line is the result
            return f"refused: {method}: {one_line(exc)}"
        if not recorders[method].calls:
            return f"not checked: the adapter's {method} did not reach the engine's method"
        for args, kwargs in recorders[method].calls:
            try:
                bound = inspect.signature(getattr(cls, method)).bind(None, *args, **kwargs)
            except TypeError as exc:
                return f"call does not bind: {method}: {one_line(exc)}"
            if packed is not None and packed not in bound.arguments.values():
                return f"misrouted: {method} was not handed the release's own packed ids"
            for name, value in values.items():
                if name in bound.arguments and bound.arguments[name] != value:
                    return f"misrouted: {method}({name}={bound.arguments[name]!r})"
    return "adapts"


def main(jobs_file: str) -> int:
    jobs = json.loads(Path(jobs_file).read_text())
    ROOTS.update(j["root"] for j in jobs)
    results = [probe(job) for job in jobs]
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
