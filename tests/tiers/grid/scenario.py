"""The seed scenario of one vLLM x LMCache pair, for both connectors, in one forked child.

Run by :mod:`tests.tiers.grid.driver` inside the child of one LMCache release (vLLM and torch
already
imported by the parent; the release's ``--target`` dir first on ``sys.path``). For each
connector -- ``vllm``: vLLM's in-tree ``LMCacheConnectorV1``; ``compat``:
``lmcache_compat.vllm.LMCacheCompatConnector`` -- and each ``kv_load_failure_policy`` the
installed vLLM has (``recompute`` and ``fail`` from 0.13.0; before it one run with vLLM's
behaviour), it records one :class:`~lmcache_compat.upstream.grid.Cell` per aspect of
:data:`lmcache_compat.upstream.grid.ASPECTS`.

What is REAL:

* vLLM's ``Scheduler``, KV cache manager, ``KVConnectorFactory`` (which builds each connector:
  the scheduler role inside ``Scheduler.__init__``, the worker role through
  ``ensure_kv_transfer_initialized``, the call a GPU worker makes, after a gloo
  ``init_distributed_environment``), ``update_from_output`` with its failed-load handling
  (``kv_load_failure_policy``) and KV-event publishing, ``Scheduler.shutdown`` and
  ``ensure_kv_transfer_shutdown``;
* vLLM's own worker-side connector step (``KVConnectorModelRunnerMixin._get_kv_connector_output``
  inside ``set_forward_context``): it binds the metadata, calls ``start_load_kv``, waits for the
  save and fills ``KVConnectorOutput`` (``invalid_block_ids`` from the connector's
  ``get_block_ids_with_load_errors()`` from vLLM 0.11.2, ``kv_cache_events`` from its
  ``get_kv_connector_kv_cache_events()`` from 0.13.0);
* the release's ``LMCacheConnectorV1Impl`` behind both connectors (found with
  ``lmcache_compat.upstream.resolve``, wherever the release put it), its lookup client, its
  ``start_load_kv`` / ``wait_for_save`` / ``record_failed_blocks`` /
  ``get_block_ids_with_load_errors`` / ``get_kv_events`` / ``shutdown``, and its
  ``CacheStoreEvent`` class.

What is INJECTED (nothing else):

* the lookup server's reply (``harness.inject_lmcache_lookup_hits``): LMCache "holds" the first
  48 of the 64 prompt tokens of request ``hit`` (none of ``miss``);
* the worker's ``LMCacheEngine``: none exists on CPU (LMCache >= 0.4 constructs its worker
  role in "degraded mode" with no engine), so :class:`StandInEngine` is put where the impl
  reads it (``LMCacheManager._lmcache_engine``, or the impl's ``lmcache_engine`` attribute
  before the manager era). Its ``retrieve`` returns the 48 tokens with the second 16-token
  chunk missing (as if evicted between lookup and load), so LMCache's real ``start_load_kv``
  sees a short load and its real ``record_failed_blocks`` maps it, through the slot mapping
  vLLM's scheduler built, to the failed block; its ``store`` records one event per stored
  16-token chunk, built with the release's own ``CacheStoreEvent`` class;
* where the release's worker role does not construct on this CPU-only machine (LMCache before
  0.4: ``ZeroDivisionError`` from the GPU count, or "Unsupported device platform"), the
  worker-side calls are made on the scheduler-role connector (the connectors and the adapter
  decide them from the impl's class, the same for both roles): the failed block is recorded by
  the release's own ``record_failed_blocks`` (0.3.9.post1 on) on the slot mapping the
  scheduler implies, plus the ``_invalid_block_ids.update`` that follows it in
  ``start_load_kv``; the events come from the release's ``get_kv_events`` over a
  :class:`StandInEngine` set on the impl for that one call; the ``KVConnectorOutput`` is built
  from those answers by hand;
* the model's sampled tokens (``harness.make_model_runner_output``: a constant token) and the
  attention layers' KV caches (zero tensors, registered in
  ``compilation_config.static_forward_context`` as a GPU model runner's attention layers do);
* observation points: the scheduler's ``kv_event_publisher`` is a recorder, and the release's
  ``LMCacheConnectorV1Impl.shutdown`` is wrapped to count the instances it is called on (the
  wrapped method runs).

For a release without ``register_kv_caches`` (before 0.3.12), whose worker role needs a GPU
here, ``step`` also covers the worker's first ``start_load_kv`` (:func:`kv_cache_handover`:
``register_kv_caches`` then ``start_load_kv`` inside vLLM's ``set_forward_context``, on the
scheduler-role connector, with a :class:`StandInEngine` receiving what the release passes on):
where vLLM's ``ForwardContext`` has no ``virtual_engine`` (0.21.0 on) and nothing handed the
release its KV caches, that call raises every step, and ``step`` is ``broken``.

``builds`` is ``ok`` when vLLM's factory builds the scheduler role (the detail says whether the
worker role constructs: a GPU requirement of the release is a property of this machine); when
the connector cannot be built at all it is ``broken`` and it is the only aspect recorded (the
others were not measured: ``lmcache_compat.upstream.grid`` reads an absent aspect as that, and
``doctor`` then never offers that release as the upgrade that fixes another aspect).

``load_failures`` is ``n/a`` where vLLM has no ``invalid_block_ids`` path (< 0.11.2: the
worker step never asks) or the release has no ``get_block_ids_with_load_errors`` (the connector
answers ``set()``); ``recompute`` / ``fail`` are ``n/a`` where no failed block can be reported,
and ``fail`` where vLLM has no ``kv_load_failure_policy`` (0.11.2 ... 0.12.x always recompute).
``events`` is ``n/a`` before vLLM 0.13.0 (no connector event path) or for a release without
``get_kv_events`` when the connector yields no events; ``broken`` where the connector raises.
``shutdown`` is ``degraded`` where the connector never forwards it (vLLM's own), ``n/a`` for a
release without ``shutdown``.

Every detail is one deterministic line: no timings, paths, addresses or block ids.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import inspect
import json
import pickle
import re
import types
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from tests.tiers.real.scheduler import harness as h
from tests.tiers.real.scheduler.compat_driver import (
    EXTRA,
    FAILED_CHUNK,
    MAX_STEPS,
    OURS,
    OURS_MODULE,
    PROMPT_TOKENS,
    STORED_TOKENS,
    VLLMS,
    record_short_retrieve,
)

#: connector key -> (kv_connector, kv_connector_module_path)
CONNECTORS: dict[str, tuple[str, str | None]] = {
    "vllm": (VLLMS, None),
    "compat": (OURS, OURS_MODULE),
}
LAYERS = [f"model.layers.{i}.self_attn.attn" for i in range(2)]
NUM_BLOCKS = 64
#: (K/V, blocks, block size, kv heads, head size) of the tiny model's KV cache per layer
KV_SHAPE = (2, NUM_BLOCKS, h.BLOCK_SIZE, 2, 16)
EXTERNAL_BLOCKS = STORED_TOKENS // h.BLOCK_SIZE
#: Chunks the worker stores in the first step: the 16 tokens of ``hit`` past LMCache's 48 and
#: all 64 of ``miss``.
STORED_CHUNKS = (PROMPT_TOKENS - STORED_TOKENS + PROMPT_TOKENS) // h.BLOCK_SIZE
#: Error texts of LMCache worker roles that need a GPU (a property of this machine).
NEEDS_GPU = ("ZeroDivisionError", "Unsupported device platform", "CUDA", "cuda", "NVIDIA")
IMPL_METHODS = (
    "get_block_ids_with_load_errors",
    "record_failed_blocks",
    "get_kv_events",
    "shutdown",
    "register_kv_caches",
)

Cells = dict[str, dict[str, str]]


def cell(status: str, detail: str) -> dict[str, str]:
    return {"status": status, "detail": detail}


def error_line(exc: BaseException) -> str:
    """``Type: first line of the message``, with paths and addresses removed."""
    text = str(exc).splitlines()[0] if str(exc) else ""
    text = re.sub(r" at 0x[0-9a-fA-F]+", "", text)
    text = re.sub(r" \((/|[A-Za-z]:\\)[^)]*\)$", "", text)
    text = re.sub(r"(/[^\s'\"]+)+/", "", text)  # directories of any path left in the text
    return f"{type(exc).__name__}: {text}".strip().rstrip(":")


# --- the installed vLLM ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class VllmSide:
    """What the installed vLLM offers a KV connector, read from the real package."""

    version: str
    has_policy: bool
    default_policy: str | None
    invalid_block_ids: bool
    connector_events: bool
    forward_context_virtual_engine: bool

    @property
    def policies(self) -> tuple[str | None, ...]:
        return ("recompute", "fail") if self.has_policy else (None,)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def vllm_side() -> VllmSide:
    from importlib.metadata import version

    from vllm.config import KVTransferConfig
    from vllm.forward_context import ForwardContext
    from vllm.v1.outputs import KVConnectorOutput

    output_fields = {f.name for f in dataclasses.fields(KVConnectorOutput)}
    params = inspect.signature(KVTransferConfig).parameters
    has_policy = "kv_load_failure_policy" in params
    default = params["kv_load_failure_policy"].default if has_policy else None
    context_fields = {f.name for f in dataclasses.fields(ForwardContext)}
    return VllmSide(
        version=version("vllm"),
        has_policy=has_policy,
        default_policy=None if default is inspect.Parameter.empty else default,
        invalid_block_ids="invalid_block_ids" in output_fields,
        connector_events="kv_cache_events" in output_fields,
        forward_context_virtual_engine="virtual_engine" in context_fields,
    )


# --- the LMCache release --------------------------------------------------------------------------


@dataclasses.dataclass
class Release:
    version: str
    impl_cls: type
    has: dict[str, bool]
    #: impl instances whose ``shutdown`` ran (observation point, see the module doc)
    shut_down: list[Any] = dataclasses.field(default_factory=list)

    @property
    def impl_module(self) -> str:
        return self.impl_cls.__module__

    def reached(self, impl: Any) -> bool:
        return any(x is impl for x in self.shut_down)


def load_release(version: str) -> Release:
    """The release's impl class (via ``lmcache_compat.upstream.resolve``), its methods, and the
    shutdown observation point."""
    from lmcache_compat.upstream import locations as loc
    from lmcache_compat.upstream.resolve import find

    cls: type = find(loc.CONNECTOR_IMPL)
    has = {name: callable(getattr(cls, name, None)) for name in IMPL_METHODS}
    release = Release(version, cls, has)
    if has["shutdown"]:
        original = cls.shutdown  # type: ignore[attr-defined]

        @functools.wraps(original)
        def shutdown(self: Any, *args: Any, **kwargs: Any) -> Any:
            release.shut_down.append(self)
            return original(self, *args, **kwargs)

        cls.shutdown = shutdown  # type: ignore[attr-defined]
    return release


def _event_class() -> type | None:
    from lmcache_compat.errors import LMCacheCompatError
    from lmcache_compat.upstream import locations as loc
    from lmcache_compat.upstream.resolve import find

    try:
        found: type = find(loc.CACHE_STORE_EVENT)
    except (LMCacheCompatError, ImportError):
        return None
    return found


class StandInEngine:
    """INJECTED stand-in for LMCache's worker-side ``LMCacheEngine`` (none exists on CPU).

    ``retrieve`` reports the requested tokens as loaded except chunk ``fail_chunk`` of request
    ``fail_request`` (once); ``store`` records one event per stored chunk with the release's
    ``CacheStoreEvent`` (only the fields that class declares; int hashes where it declares
    ``list[int]``, else bytes); ``get_kv_events`` hands them over and forgets them, like
    ``LMCacheEngine.get_kv_events``; ``post_init`` records the KV caches it is given.
    """

    def __init__(self, chunk: int = h.BLOCK_SIZE) -> None:
        self.chunk = chunk
        self.fail_request: str | None = None
        self.fail_chunk = FAILED_CHUNK
        self.retrieves: list[dict[str, Any]] = []
        self.kv_events: list[Any] = []
        self.post_init_kvcaches: list[Any] | None = None
        self._event_cls = _event_class()
        fields = (
            {f.name: str(f.type) for f in dataclasses.fields(self._event_cls)}
            if self._event_cls is not None and dataclasses.is_dataclass(self._event_cls)
            else {}
        )
        self._fields = fields
        self._int_hashes = "int" in fields.get("block_hashes", "")

    def post_init(self, *args: Any, **kwargs: Any) -> None:
        if "kvcaches" in kwargs:
            self.post_init_kvcaches = list(kwargs["kvcaches"])

    def retrieve(self, tokens: Any, mask: Any = None, **kwargs: Any) -> Any:
        import torch

        n = len(tokens)
        ret = torch.ones(n, dtype=torch.bool) if mask is None else mask.clone().to(torch.bool)
        req_id = kwargs.get("req_id")
        if req_id is not None and req_id == self.fail_request:
            lo, hi = self.fail_chunk * self.chunk, min((self.fail_chunk + 1) * self.chunk, n)
            ret[lo:hi] = False
            self.fail_request = None
        self.retrieves.append({"req_id": req_id, "tokens": n, "returned": int(ret.sum().item())})
        return ret

    def lookup_unpin(self, *args: Any, **kwargs: Any) -> None:
        return None

    def make_event(self, piece: list[int], prev: Any) -> Any:
        digest = hashlib.blake2b(
            (b"" if prev is None else repr(prev).encode()) + json.dumps(piece).encode(),
            digest_size=8,
        ).digest()
        block_hash: Any = int.from_bytes(digest, "big") if self._int_hashes else digest
        values = {
            "block_hashes": [block_hash],
            "parent_block_hash": prev,
            "token_ids": piece,
            "block_size": len(piece),
            "lora_id": None,
            "medium": "cpu",
            "lora_name": None,
        }
        assert self._event_cls is not None
        return self._event_cls(**{k: v for k, v in values.items() if k in self._fields})

    def store(self, tokens: Any, mask: Any = None, **kwargs: Any) -> None:
        token_list = [int(t) for t in tokens]
        keep = [bool(m) for m in mask] if mask is not None else [True] * len(token_list)
        prev: Any = None
        for start in range(0, len(token_list), self.chunk):
            piece = token_list[start : start + self.chunk]
            event = self.make_event(piece, prev)
            if all(keep[start : start + len(piece)]):
                self.kv_events.append(event)
            prev = event.block_hashes[0]

    def preload_first_step_events(self) -> None:
        """The events the worker stores in the first step (see :data:`STORED_CHUNKS`)."""
        for request_id, skip in (("hit", STORED_TOKENS), ("miss", 0)):
            tokens = h.prompt_tokens(request_id, PROMPT_TOKENS)
            mask = [i >= skip for i in range(len(tokens))]
            self.store(tokens, mask)

    def get_kv_events(self) -> list[Any]:
        events, self.kv_events = self.kv_events, []
        return events


def inject_engine(impl: Any, engine: StandInEngine) -> str:
    """Put ``engine`` where ``impl`` reads its ``LMCacheEngine``; returns where."""
    manager = getattr(impl, "_manager", None)
    if manager is not None and hasattr(manager, "_lmcache_engine"):
        manager._lmcache_engine = engine
        return "LMCacheManager._lmcache_engine"
    impl.lmcache_engine = engine
    return "lmcache_engine"


@contextmanager
def engine_for_one_call(impl: Any, engine: StandInEngine) -> Iterator[None]:
    """The stand-in engine on a scheduler-role impl for one worker-side call only."""
    manager = getattr(impl, "_manager", None)
    holder, name = (
        (manager, "_lmcache_engine")
        if manager is not None and hasattr(manager, "_lmcache_engine")
        else (impl, "lmcache_engine")
    )
    before = getattr(holder, name, None)
    setattr(holder, name, engine)
    try:
        yield
    finally:
        setattr(holder, name, before)


# --- vLLM's worker process ------------------------------------------------------------------------

#: Every scheduler and worker connector built in this child stays referenced until the child
#: exits (``os._exit``): LMCache's lookup clients own zmq contexts whose ``__del__`` blocks in
#: ``term()`` while a socket is open, which garbage collection would otherwise trigger at a
#: random later point (a real deployment has one scheduler per process, never collected).
_KEEP_ALIVE: list[Any] = []


def kv_caches() -> dict[str, Any]:
    import torch

    return {name: torch.zeros(KV_SHAPE, dtype=torch.float16) for name in LAYERS}


def register_attention_layers(config: Any, caches: dict[str, Any]) -> None:
    """What a GPU model runner's attention layers do: each registers itself in
    ``compilation_config.static_forward_context`` with its KV cache (one per virtual engine)."""
    context = config.compilation_config.static_forward_context
    for name, tensor in caches.items():
        context[name] = types.SimpleNamespace(kv_cache=[tensor], layer_name=name)


def worker_step(config: Any, scheduler_output: Any) -> Any:
    """vLLM's own worker-side connector step for ``scheduler_output`` (no model runs); the
    metadata crosses a process boundary in vLLM, so it is pickled here too."""
    from vllm.forward_context import set_forward_context
    from vllm.v1.worker.kv_connector_model_runner_mixin import KVConnectorModelRunnerMixin

    scheduler_output.kv_connector_metadata = pickle.loads(
        pickle.dumps(scheduler_output.kv_connector_metadata)
    )
    attn_metadata = dict.fromkeys(LAYERS, object())  # any non-None metadata: a forward ran
    with (
        set_forward_context(attn_metadata, config),
        KVConnectorModelRunnerMixin._get_kv_connector_output(scheduler_output) as kv_output,
    ):
        pass  # the model's forward pass would run here
    return kv_output


class Publisher:
    """Stands in for the scheduler's ``kv_event_publisher``: records every published batch."""

    def __init__(self) -> None:
        self.batches: list[Any] = []

    def publish(self, batch: Any) -> None:
        self.batches.append(batch)

    def shutdown(self) -> None:
        return None

    def events(self) -> list[Any]:
        return [event for batch in self.batches for event in batch.events]


# --- one connector --------------------------------------------------------------------------------


@dataclasses.dataclass
class Worker:
    """The worker role of one connector: built, or why not."""

    config: Any
    connector: Any = None
    impl: Any = None
    engine: StandInEngine | None = None
    injection: str | None = None
    error: str | None = None

    @property
    def built(self) -> bool:
        return self.connector is not None


def build_worker(key: str, tmp: Path) -> Worker:
    from vllm.config import set_current_vllm_config
    from vllm.distributed.kv_transfer import ensure_kv_transfer_initialized, get_kv_transfer_group

    name, module = CONNECTORS[key]
    config = h.make_vllm_config(tmp / key / "worker", name, module, extra_config=EXTRA)
    config.cache_config.kv_cache_layout = "NHD"
    caches = kv_caches()
    register_attention_layers(config, caches)
    worker = Worker(config)
    h.init_worker_process(config, tmp)
    kv_cache_config = h.make_kv_cache_config(config, num_blocks=NUM_BLOCKS)
    try:
        with set_current_vllm_config(config):
            ensure_kv_transfer_initialized(
                **h.accepted_kwargs(
                    ensure_kv_transfer_initialized,
                    {"vllm_config": config, "kv_cache_config": kv_cache_config},
                )
            )
    except Exception as exc:
        worker.error = error_line(exc)
        return worker
    connector = get_kv_transfer_group()
    _KEEP_ALIVE.append(connector)
    worker.connector = connector
    worker.impl = connector._lmcache_engine
    connector.register_kv_caches(caches)
    # INJECTED after the caches were registered (LMCache's post_init skips a manager whose
    # engine failed to build)
    worker.engine = StandInEngine()
    worker.injection = inject_engine(worker.impl, worker.engine)
    return worker


def shutdown_worker(worker: Worker, release: Release) -> bool:
    """``ensure_kv_transfer_shutdown()`` (vLLM's path); whether it reached LMCache. LMCache's
    services are then stopped directly where the connector did not forward it (cleanup)."""
    from vllm.distributed.kv_transfer import ensure_kv_transfer_shutdown

    if not worker.built:
        return False
    ensure_kv_transfer_shutdown()
    reached = release.reached(worker.impl)
    if release.has["shutdown"] and not reached:
        _cleanup(worker.impl)
    return reached


def _cleanup(impl: Any) -> None:
    with suppress(Exception):
        impl.shutdown()


@dataclasses.dataclass
class PolicyRun:
    """One scheduler (one policy) of one connector: its cells, except recompute/fail which
    only the run of the matching policy decides."""

    cells: Cells
    outcome: str | None = None  # "recompute" / "fail": what the scheduler did with the failure


def _expected_schedule() -> dict[str, int]:
    return {"hit": PROMPT_TOKENS - STORED_TOKENS, "miss": PROMPT_TOKENS}


def run_policy(
    key: str,
    policy: str | None,
    *,
    release: Release,
    side: VllmSide,
    worker: Worker,
    tmp: Path,
) -> PolicyRun:
    """One scheduler of connector ``key`` with ``policy``: build, step with the injected
    lookup hits, the worker side of step 1 (load failure, events), back to the scheduler, the
    remaining steps, and ``Scheduler.shutdown()`` (always, whatever stopped the run)."""
    name, module = CONNECTORS[key]
    config = h.make_vllm_config(
        tmp / key / (policy or "default"),
        name,
        module,
        kv_load_failure_policy=policy,
        extra_config=EXTRA,
    )
    try:
        scheduler = h.make_scheduler(config, num_blocks=NUM_BLOCKS)
    except Exception as exc:
        return PolicyRun({"builds": cell("broken", error_line(exc))})
    _KEEP_ALIVE.append(scheduler)
    impl = scheduler.connector._lmcache_engine
    run = PolicyRun({"builds": _builds_cell(worker)})
    try:
        _drive(run, scheduler, release, side, worker)
    except Exception as exc:  # an unexpected failure: recorded on the aspect it stopped
        pending = next((a for a in _ORDER if a not in run.cells), "shutdown")
        run.cells[pending] = cell("broken", f"the run raised {error_line(exc)}")
    finally:
        run.cells["shutdown"] = _shutdown_cell(key, release, scheduler, impl)
    return run


#: The order in which a policy run decides its aspects.
_ORDER = ("builds", "step", "load_failures", "events")


def _drive(
    run: PolicyRun, scheduler: Any, release: Release, side: VllmSide, worker: Worker
) -> None:
    from vllm.v1.outputs import KVConnectorOutput

    cells = run.cells
    connector = scheduler.connector
    impl = connector._lmcache_engine
    publisher = Publisher()
    scheduler.kv_event_publisher = publisher  # INJECTED observation point
    h.inject_lmcache_lookup_hits(scheduler, {"hit": STORED_TOKENS})  # INJECTED lookup reply
    if worker.engine is not None:
        worker.engine.fail_request = "hit"
    hit = h.make_request("hit", PROMPT_TOKENS)
    miss = h.make_request("miss", PROMPT_TOKENS)
    scheduler.add_request(hit)
    scheduler.add_request(miss)
    try:
        first = scheduler.schedule()
    except Exception as exc:
        cells["step"] = cell("broken", f"schedule() raised {error_line(exc)}")
        return
    scheduled = dict(first.num_scheduled_tokens)
    if scheduled != _expected_schedule():
        cells["step"] = cell(
            "broken",
            f"scheduled {json.dumps(scheduled, sort_keys=True)} tokens, expected "
            f"{json.dumps(_expected_schedule(), sort_keys=True)} (48 held by LMCache)",
        )
        return
    cells["step"] = cell(
        "ok",
        "LMCache's lookup reported 48 of hit's 64 prompt tokens; the scheduler scheduled "
        "the other 16 and all 64 of miss",
    )
    external = h.request_block_ids(scheduler, "hit")[:EXTERNAL_BLOCKS]
    failed_block = external[FAILED_CHUNK]

    # --- the worker side of step 1 -----------------------------------------------------------
    invalid: set[int] | None = None
    invalid_error: str | None = None
    events_error: str | None = None
    kv_output: Any = None
    if worker.built:
        how = "vLLM's worker step over the release's start_load_kv and record_failed_blocks"
        try:
            kv_output = worker_step(worker.config, first)
        except Exception as exc:
            invalid_error = events_error = f"the worker step raised {error_line(exc)}"
        else:
            invalid = getattr(kv_output, "invalid_block_ids", None)
    else:
        how = "the release's record_failed_blocks on the scheduler-role impl"
        if release.has["record_failed_blocks"]:
            record_short_retrieve(impl, external)
        values: dict[str, Any] = {}
        if side.invalid_block_ids:
            try:
                invalid = connector.get_block_ids_with_load_errors()
            except Exception as exc:
                invalid_error = error_line(exc)
            values["invalid_block_ids"] = set(invalid or ())
        if side.connector_events:
            engine = StandInEngine()
            if engine._event_cls is not None:
                engine.preload_first_step_events()
            try:
                with engine_for_one_call(impl, engine):
                    values["kv_cache_events"] = connector.get_kv_connector_kv_cache_events()
            except Exception as exc:
                events_error = error_line(exc)
        kv_output = KVConnectorOutput(**h.accepted_kwargs(KVConnectorOutput, values))
    cells["load_failures"] = _load_failures_cell(
        release, side, invalid, invalid_error, failed_block=failed_block, how=how
    )

    # --- back to the scheduler -----------------------------------------------------------------
    output = h.make_model_runner_output(scheduler, first)
    if kv_output is not None:
        output.kv_connector_output = kv_output
    try:
        with h.capture_logs() as logs:
            outputs = scheduler.update_from_output(first, output)
    except Exception as exc:
        error = f"update_from_output raised {error_line(exc)}"
        cells["events"] = cell("broken", events_error or error)
        run.outcome = error
        return
    published = [e for e in publisher.events() if type(e).__name__ == "BlockStored"]
    cells["events"] = _events_cell(release, side, events_error, len(published))
    outcome = _failure_outcome(hit, outputs, logs)
    for _ in range(MAX_STEPS):
        if not scheduler.requests:
            break
        out = scheduler.schedule()
        if worker.built:
            later = h.make_model_runner_output(scheduler, out)
            with suppress(Exception):  # a failing worker step was recorded by step 1
                later.kv_connector_output = worker_step(worker.config, out)
            scheduler.update_from_output(out, later)
        else:
            h.feed_output(scheduler, out)
    if outcome.startswith("rescheduled"):
        outcome = f"{outcome}; then {hit.status.name}"
    run.outcome = outcome


def _builds_cell(worker: Worker) -> dict[str, str]:
    if worker.built:
        return cell(
            "ok",
            "vLLM's connector factory built it in the scheduler role and the worker role "
            "(the release's worker impl runs without an LMCache engine on CPU)",
        )
    assert worker.error is not None
    if any(marker in worker.error for marker in NEEDS_GPU):
        return cell(
            "ok",
            "vLLM's connector factory built it in the scheduler role; the release's worker "
            f"role needs a GPU ({worker.error}), so its worker-side calls ran on the "
            "scheduler-role instance",
        )
    return cell("broken", f"the worker role does not build: {worker.error}")


def _load_failures_cell(
    release: Release,
    side: VllmSide,
    invalid: set[int] | None,
    error: str | None,
    *,
    failed_block: int,
    how: str,
) -> dict[str, str]:
    if not side.invalid_block_ids:
        return cell(
            "n/a",
            f"vLLM {side.version} has no KVConnectorOutput.invalid_block_ids: its worker "
            "step never asks the connector for failed loads (from vLLM 0.11.2)",
        )
    if error is not None:
        return cell("broken", error)
    if not release.has["get_block_ids_with_load_errors"]:
        if invalid == set():
            return cell(
                "n/a",
                f"LMCache {release.version} has no get_block_ids_with_load_errors: the "
                "connector reports set() (a failed load goes unnoticed)",
            )
        return cell("broken", f"expected set() without the method, got {invalid!r}")
    if invalid == {failed_block}:
        return cell(
            "ok",
            f"the failed block reached KVConnectorOutput.invalid_block_ids ({how})",
        )
    count = "no" if not invalid else f"{len(invalid)} other"
    return cell("broken", f"{count} block ids reached invalid_block_ids ({how})")


def _events_cell(
    release: Release, side: VllmSide, error: str | None, published: int
) -> dict[str, str]:
    if not side.connector_events:
        return cell(
            "n/a",
            f"vLLM {side.version} has no connector KV-event path (KVConnectorOutput."
            "kv_cache_events, from vLLM 0.13.0)",
        )
    if error is not None:
        return cell("broken", error)
    if not release.has["get_kv_events"]:
        if published == 0:
            return cell(
                "n/a",
                f"LMCache {release.version} has no get_kv_events: no KV events (the "
                "connector's fallback)",
            )
        return cell("broken", f"{published} events published without get_kv_events")
    if published == STORED_CHUNKS:
        return cell(
            "ok",
            f"the {STORED_CHUNKS} stored chunks reached the scheduler's KV event publisher "
            "as BlockStored",
        )
    return cell("broken", f"{published} of {STORED_CHUNKS} BlockStored events were published")


def _failure_outcome(hit: Any, outputs: Any, logs: Any) -> str:
    """What the scheduler did with ``hit`` right after the failure was reported."""
    status = hit.status.name
    if status == "FINISHED_ERROR":
        reasons = h.finish_reasons(outputs)
        failing = bool(logs.matching("due to KV load failure"))
        return f"finished {status} (finish reason {reasons.get('hit')!r}, logged: {failing})"
    recovered = bool(logs.matching("Recovered from KV load failure"))
    return (
        f"rescheduled from token {hit.num_computed_tokens} ({status}, logged: {recovered})"
        if hit.num_computed_tokens == FAILED_CHUNK * h.BLOCK_SIZE
        else f"kept {hit.num_computed_tokens} computed tokens ({status})"
    )


def _shutdown_cell(key: str, release: Release, scheduler: Any, impl: Any) -> dict[str, str]:
    try:
        scheduler.shutdown()
    except Exception as exc:
        return cell("broken", f"Scheduler.shutdown() raised {error_line(exc)}")
    reached = release.reached(impl)
    if not release.has["shutdown"]:
        return cell("n/a", f"LMCache {release.version} has no shutdown() (nothing to stop)")
    if not reached:
        _cleanup(impl)  # stop LMCache's services before the next scheduler (not measured)
        if key == "vllm":
            return cell(
                "degraded",
                "vLLM's LMCacheConnectorV1 never forwards shutdown() to LMCache",
            )
        return cell("broken", "Scheduler.shutdown() did not reach LMCache's shutdown()")
    return cell("ok", "Scheduler.shutdown() reached LMCache's shutdown()")


# --- the recompute / fail cells -------------------------------------------------------------------


def _policy_cells(
    side: VllmSide, runs: dict[str | None, PolicyRun], load_failures: dict[str, str]
) -> Cells:
    if load_failures["status"] != "ok":
        why = (
            "no failed block is reported (see load_failures)"
            if side.invalid_block_ids
            else f"vLLM {side.version} has no failed-load path"
        )
        return {"recompute": cell("n/a", why), "fail": cell("n/a", why)}
    out: Cells = {}
    recompute_run = runs.get("recompute") or runs.get(None)
    assert recompute_run is not None
    recompute = recompute_run.outcome or ""
    expected = f"rescheduled from token {FAILED_CHUNK * h.BLOCK_SIZE}"
    if recompute.startswith(expected) and recompute.endswith("FINISHED_LENGTH_CAPPED"):
        out["recompute"] = cell(
            "ok",
            "hit was rescheduled from the failed block (16 tokens kept), recomputed and "
            "finished normally",
        )
    else:
        out["recompute"] = cell("broken", f"hit was not rescheduled: {recompute}")
    if not side.has_policy:
        out["fail"] = cell(
            "n/a", f"vLLM {side.version} has no kv_load_failure_policy (it always recomputes)"
        )
        return out
    fail = (runs.get("fail") or PolicyRun({})).outcome or ""
    if fail.startswith("finished FINISHED_ERROR"):
        out["fail"] = cell("ok", "hit was finished with FINISHED_ERROR (finish reason 'error')")
    else:
        out["fail"] = cell("broken", f"hit was not failed: {fail}")
    return out


def _merge(aspect: str, runs: dict[str | None, PolicyRun]) -> dict[str, str] | None:
    """One aspect over the policy runs: the same everywhere, else the worst, with the policy."""
    rank = {"ok": 0, "n/a": 0, "degraded": 1, "broken": 2}
    found = [(p, r.cells[aspect]) for p, r in runs.items() if aspect in r.cells]
    if not found:
        return None
    first = found[0][1]
    if all(c == first for _, c in found):
        return first
    policy, worst = max(found, key=lambda pc: rank[pc[1]["status"]])
    return cell(worst["status"], f"with kv_load_failure_policy={policy}: {worst['detail']}")


def run_connector(key: str, release: Release, side: VllmSide, tmp: Path) -> dict[str, Any]:
    """Every aspect of one connector over this pair, and what the run saw."""
    from lmcache_compat.upstream.grid import ASPECTS

    worker = build_worker(key, tmp)
    runs = {
        p: run_policy(key, p, release=release, side=side, worker=worker, tmp=tmp)
        for p in side.policies
    }
    worker_reached = shutdown_worker(worker, release)
    cells: Cells = {}
    for aspect in ("builds", "step", "load_failures", "events", "shutdown"):
        merged = _merge(aspect, runs)
        if merged is not None:
            cells[aspect] = merged
    if cells.get("builds", {}).get("status") == "broken":
        # nothing else can be measured: only the builds cell is recorded (an absent aspect is
        # "not measured" in lmcache_compat.upstream.grid, never an upgrade target for doctor)
        return {"cells": {"builds": cells["builds"]}, "facts": {"worker": worker.error}}
    if "load_failures" in cells:
        cells.update(_policy_cells(side, runs, cells["load_failures"]))
    if (
        worker.built
        and release.has["shutdown"]
        and cells.get("shutdown", {}).get("status") == "ok"
        and not worker_reached
    ):
        cells["shutdown"] = cell("broken", "ensure_kv_transfer_shutdown() did not reach LMCache")
    elif worker.built and cells.get("shutdown", {}).get("status") == "ok":
        cells["shutdown"] = cell(
            "ok",
            "Scheduler.shutdown() and ensure_kv_transfer_shutdown() reached LMCache's shutdown()",
        )
    handover = None
    if not release.has["register_kv_caches"] and not worker.built:
        handover = kv_cache_handover(key, release, tmp)
        step = cells.get("step")
        if step is not None and step["status"] == "ok":
            cells["step"] = _handover_step_cell(step, handover)
    for aspect in ASPECTS:  # a run that stopped early: what it did not reach
        cells.setdefault(aspect, cell("n/a", "not reached: an earlier aspect failed"))
    return {
        "cells": {a: cells[a] for a in ASPECTS},
        "facts": {
            "worker": "built" if worker.built else worker.error,
            "injection": worker.injection,
            "outcomes": {str(p): r.outcome for p, r in runs.items()},
            "handover": handover,
        },
    }


def _handover_step_cell(step: dict[str, str], handover: dict[str, Any]) -> dict[str, str]:
    """A release without ``register_kv_caches`` must get its KV caches before the worker's
    first ``start_load_kv``, or that call (every step) fails where vLLM's ``ForwardContext``
    has no ``virtual_engine`` (0.21.0 on): the step aspect includes that call."""
    outcome = handover["start_load_kv"]
    if outcome != "ok":
        return cell(
            "broken",
            f"the worker's start_load_kv raises {outcome} (the release looks its KV caches up "
            "in the forward context: nothing handed them over)",
        )
    if handover["registered"]:
        how = "the KV caches registered through the connector"
    else:
        how = "the KV caches the release found in the forward context"
    return cell("ok", f"{step['detail']}; the worker's start_load_kv runs with {how}")


# --- the KV-cache hand-over for releases without register_kv_caches ------------------------------


def kv_cache_handover(key: str, release: Release, tmp: Path) -> dict[str, Any]:
    """Releases before 0.3.12 find their KV caches through the forward context on the first
    ``start_load_kv``. Their worker role does not construct on CPU, so this drives the
    scheduler-role connector (built by vLLM's factory, with the release's real impl) through
    the worker's calls: ``register_kv_caches`` with the caches the (stand-in) attention layers
    registered, metadata bound from a real scheduler step (no request: nothing to load), then
    ``start_load_kv`` inside vLLM's ``set_forward_context`` with a :class:`StandInEngine` on the
    impl (whose ``post_init`` receives the caches the release passes on)."""
    from vllm.forward_context import get_forward_context, set_forward_context

    name, module = CONNECTORS[key]
    config = h.make_vllm_config(tmp / key / "handover", name, module, extra_config=EXTRA)
    caches = kv_caches()
    register_attention_layers(config, caches)
    scheduler = h.make_scheduler(config, num_blocks=NUM_BLOCKS)
    _KEEP_ALIVE.append(scheduler)
    connector = scheduler.connector
    impl = connector._lmcache_engine
    result: dict[str, Any] = {}
    connector.register_kv_caches(caches)
    held = getattr(impl, "kv_caches", None)
    result["registered"] = isinstance(held, dict) and all(
        held.get(n) is t for n, t in caches.items()
    )
    out = scheduler.schedule()
    connector.bind_connector_metadata(out.kv_connector_metadata)
    engine = StandInEngine()
    try:
        with (
            engine_for_one_call(impl, engine),
            set_forward_context(dict.fromkeys(LAYERS, object()), config),
        ):
            connector.start_load_kv(get_forward_context())
        result["start_load_kv"] = "ok"
    except Exception as exc:
        result["start_load_kv"] = error_line(exc)
    finally:
        connector.clear_connector_metadata()
    given = engine.post_init_kvcaches
    result["engine_got_the_caches"] = given is not None and [id(t) for t in given] == [
        id(t) for t in caches.values()
    ]
    scheduler.shutdown()
    if release.has["shutdown"] and not release.reached(impl):
        _cleanup(impl)  # vLLM's connector never forwards it; LMCache's services must stop
    return result
