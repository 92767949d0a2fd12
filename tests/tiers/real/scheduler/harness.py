"""Drive a real vLLM v1 ``Scheduler`` with a KV connector on a CPU-only machine.

Built for the "KV load failure" path: schedule requests whose prefix the connector reports as
held externally, then feed back a ``ModelRunnerOutput`` whose
``kv_connector_output.invalid_block_ids`` names some of the blocks that were to be loaded, the way
a worker reports ``connector.get_block_ids_with_load_errors()``. Nothing here runs a model or a
worker: the scheduler, the KV cache manager and the scheduler-role connector are real, the
worker's output is built by hand.

Works with vLLM 0.11.0 ... 0.33.0 (the ``grid-vllm*`` tiers). Keyword arguments are filtered
through ``inspect.signature`` because the config and scheduler constructors change between
releases; the few other differences have small shims here (:func:`vllm_sha256`: ``sha256``
lives in ``vllm.utils`` up to 0.11.0; ``Request`` requires ``eos_token_id`` up to 0.11.0;
``ModelRunnerOutput.sampled_token_ids`` holds numpy arrays in 0.11.1 ... 0.12.x). Every vLLM
import is inside a function: this module imports without vLLM installed.

Setup cost (2-core machine): importing vLLM and LMCache takes 4-7 s; the first ``ModelConfig``
in a fresh ``VLLM_CACHE_ROOT`` inspects the model class in a subprocess (6-11 s; the result is
cached under ``VLLM_CACHE_ROOT/modelinfos``, so later configs in the process take milliseconds);
a scheduler with its connector, a step, and ``update_from_output`` take milliseconds. Set the
cache-related environment (``tools.lmcache_targets.quiet_env``) before importing vLLM.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import logging
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tools import vllm_config

if TYPE_CHECKING:
    from vllm.config import VllmConfig
    from vllm.v1.core.sched.output import SchedulerOutput
    from vllm.v1.core.sched.scheduler import Scheduler
    from vllm.v1.engine import EngineCoreOutputs
    from vllm.v1.kv_cache_interface import KVCacheConfig
    from vllm.v1.outputs import ModelRunnerOutput
    from vllm.v1.request import Request

EOS_TOKEN_ID = 2  # the fixture's eos_token_id
#: The config of the tiny model (``tools/vllm_config.py``, shared with the benchmarks), read by
#: the tiers as this module's names.
FIXTURE_DIR = vllm_config.FIXTURE_DIR
BLOCK_SIZE = vllm_config.BLOCK_SIZE
accepted_kwargs = vllm_config.accepted_kwargs
prepare_model_dir = vllm_config.prepare_model_dir
model_num_layers = vllm_config.model_num_layers
tiny_model_config = vllm_config.tiny_model_config
make_vllm_config = vllm_config.make_vllm_config
#: Where vLLM's scheduler logs "Recovered from KV load failure" / "Failing N request(s) ...".
SCHEDULER_LOGGER = "vllm.v1.core.sched.scheduler"


def make_kv_cache_config(vllm_config: VllmConfig, num_blocks: int) -> KVCacheConfig:
    """One full-attention KV cache group over every layer of the model, no tensors."""
    import torch
    from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec

    model_config = vllm_config.model_config
    layers = model_config.get_num_layers(vllm_config.parallel_config)
    spec = FullAttentionSpec(
        **accepted_kwargs(
            FullAttentionSpec,
            {
                "block_size": vllm_config.cache_config.block_size,
                "num_kv_heads": model_config.get_num_kv_heads(vllm_config.parallel_config),
                "head_size": model_config.get_head_size(),
                "dtype": torch.float16,
            },
        )
    )
    names = [f"model.layers.{i}.self_attn.attn" for i in range(layers)]
    return KVCacheConfig(
        num_blocks=num_blocks,
        kv_cache_tensors=[],
        kv_cache_groups=[KVCacheGroupSpec(names, spec)],
    )


def make_scheduler(vllm_config: VllmConfig, num_blocks: int = 256) -> Scheduler:
    """A real ``Scheduler``; with a ``kv_transfer_config`` it builds the scheduler-role connector
    through vLLM's ``KVConnectorFactory`` (so the connector's own ``__init__`` runs here)."""
    from vllm.v1.core.sched.scheduler import Scheduler
    from vllm.v1.structured_output import StructuredOutputManager

    kv_cache_config = make_kv_cache_config(vllm_config, num_blocks)
    vllm_config.cache_config.num_gpu_blocks = num_blocks
    block_size = vllm_config.cache_config.block_size
    return Scheduler(
        **accepted_kwargs(
            Scheduler,
            {
                "vllm_config": vllm_config,
                "kv_cache_config": kv_cache_config,
                "structured_output_manager": StructuredOutputManager(vllm_config),
                "block_size": block_size,
                "hash_block_size": block_size,
                "log_stats": True,
            },
        )
    )


def vllm_sha256() -> Callable[[Any], bytes]:
    """vLLM's ``sha256`` block-hash function: ``vllm.utils.hashing`` (0.11.1 on) or
    ``vllm.utils`` (0.11.0)."""
    for name in ("vllm.utils.hashing", "vllm.utils"):
        try:
            module: Any = importlib.import_module(name)
        except ImportError:
            continue
        fn = getattr(module, "sha256", None)
        if callable(fn):
            hasher: Callable[[Any], bytes] = fn
            return hasher
    raise ImportError("no sha256 in vllm.utils.hashing or vllm.utils")


@functools.cache
def _ensure_none_hash() -> None:
    """vLLM's block hasher needs ``init_none_hash`` once per process."""
    from vllm.v1.core.kv_cache_utils import init_none_hash

    init_none_hash(vllm_sha256())


def prompt_tokens(request_id: str, num_tokens: int, vocab_size: int = 1000) -> list[int]:
    """Deterministic prompt tokens, distinct per request id (no accidental prefix sharing) and
    never the EOS token."""
    seed = zlib.crc32(request_id.encode())
    return [3 + (seed + 7919 * i) % (vocab_size - 3) for i in range(num_tokens)]


def make_request(
    request_id: str,
    num_tokens: int,
    block_size: int = BLOCK_SIZE,
    *,
    max_tokens: int = 4,
    prompt_token_ids: Sequence[int] | None = None,
) -> Request:
    """A text-only ``Request`` with prefix-cache block hashing (sha256, like vLLM's defaults)."""
    from vllm import SamplingParams
    from vllm.v1.core.kv_cache_utils import get_request_block_hasher
    from vllm.v1.request import Request

    _ensure_none_hash()
    sampling_params = SamplingParams(max_tokens=max_tokens)
    sampling_params.update_from_generation_config({}, EOS_TOKEN_ID)
    tokens = (
        list(prompt_token_ids)
        if prompt_token_ids is not None
        else prompt_tokens(request_id, num_tokens)
    )
    return Request(
        **accepted_kwargs(
            Request,
            {
                "request_id": request_id,
                "prompt_token_ids": tokens,
                "sampling_params": sampling_params,
                "pooling_params": None,
                "mm_features": None,
                "block_hasher": get_request_block_hasher(block_size, vllm_sha256()),
                # required up to vLLM 0.11.0 (later read from the sampling params)
                "eos_token_id": EOS_TOKEN_ID,
            },
        )
    )


def request_block_ids(scheduler: Scheduler, request_id: str) -> list[int]:
    """The KV block ids the scheduler holds for a request (single KV cache group)."""
    (block_ids,) = scheduler.kv_cache_manager.get_block_ids(request_id)
    return list(block_ids)


def scheduled_request_ids(scheduler_output: SchedulerOutput) -> list[str]:
    """Ids of the requests that got tokens in this step, in the scheduler's order."""
    return list(scheduler_output.num_scheduled_tokens)


def make_model_runner_output(
    scheduler: Scheduler,
    scheduler_output: SchedulerOutput,
    invalid_block_ids: Iterable[int] | None = None,
    *,
    sampled_token_id: int = 5,
    finished_sending: set[str] | None = None,
    finished_recving: set[str] | None = None,
) -> ModelRunnerOutput:
    """What the worker would return for ``scheduler_output``.

    Every scheduled request whose prompt is complete after this step samples
    ``sampled_token_id``; a partial (chunked) prefill samples nothing, as on a real worker.
    ``kv_connector_output`` carries ``invalid_block_ids`` the way
    ``KVConnectorModelRunnerMixin._get_kv_connector_output`` fills it from
    ``connector.get_block_ids_with_load_errors()``.
    """
    from vllm.v1.outputs import KVConnectorOutput, ModelRunnerOutput

    req_ids = scheduled_request_ids(scheduler_output)
    sampled: list[Any] = []
    for req_id in req_ids:
        request = scheduler.requests[req_id]
        done_prefill = request.num_computed_tokens >= request.num_tokens
        sampled.append([sampled_token_id] if done_prefill else [])
    if _sampled_as_arrays():
        np: Any = importlib.import_module("numpy")  # vLLM's dependency (untyped here)
        sampled = [np.array(ids, dtype=np.int64) for ids in sampled]
    connector_output = KVConnectorOutput(
        **accepted_kwargs(
            KVConnectorOutput,
            {
                "finished_sending": finished_sending,
                "finished_recving": finished_recving,
                "invalid_block_ids": set(invalid_block_ids or ()),
            },
        )
    )
    return ModelRunnerOutput(
        **accepted_kwargs(
            ModelRunnerOutput,
            {
                "req_ids": req_ids,
                "req_id_to_index": {r: i for i, r in enumerate(req_ids)},
                "sampled_token_ids": sampled,
                "logprobs": None,
                "prompt_logprobs_dict": {},
                "pooler_output": None,
                "kv_connector_output": connector_output,
            },
        )
    )


@functools.cache
def _sampled_as_arrays() -> bool:
    """vLLM 0.11.1 ... 0.12.x declare ``ModelRunnerOutput.sampled_token_ids`` as
    ``list[np.ndarray]`` (``update_from_output`` calls ``.tolist()`` on each); before and after,
    ``list[list[int]]``."""
    from vllm.v1.outputs import ModelRunnerOutput

    types = {f.name: str(f.type) for f in dataclasses.fields(ModelRunnerOutput)}
    return "ndarray" in types.get("sampled_token_ids", "")


def feed_output(
    scheduler: Scheduler,
    scheduler_output: SchedulerOutput,
    invalid_block_ids: Iterable[int] | None = None,
    **kwargs: Any,
) -> dict[int, EngineCoreOutputs]:
    """Build the worker output for ``scheduler_output`` and hand it to
    ``scheduler.update_from_output``; returns the engine-core outputs by client index."""
    output = make_model_runner_output(scheduler, scheduler_output, invalid_block_ids, **kwargs)
    result: dict[int, EngineCoreOutputs] = scheduler.update_from_output(scheduler_output, output)
    return result


def finish_reasons(outputs: Mapping[int, EngineCoreOutputs]) -> dict[str, str | None]:
    """``request id -> finish reason`` (str of the enum, ``None`` while running)."""
    reasons: dict[str, str | None] = {}
    for engine_outputs in outputs.values():
        for out in engine_outputs.outputs:
            reason = out.finish_reason
            reasons[out.request_id] = None if reason is None else str(reason)
    return reasons


def lmcache_impl(scheduler: Scheduler) -> Any:
    """The real ``LMCacheConnectorV1Impl`` behind vLLM's in-tree ``LMCacheConnectorV1``."""
    impl = getattr(scheduler.connector, "_lmcache_engine", None)
    if impl is None:
        raise RuntimeError(f"not an LMCacheConnectorV1 scheduler: {scheduler.connector!r}")
    return impl


def _stored_prefix(stored_tokens: int, chunk_lengths: Sequence[int]) -> int:
    """Tokens a store holding the first ``stored_tokens`` tokens reports for a lookup split
    into chunks of ``chunk_lengths``: whole chunks only, like LMCache's lookup server."""
    covered = 0
    for length in chunk_lengths:
        if covered + int(length) > stored_tokens:
            break
        covered += int(length)
    return covered


def inject_lmcache_lookup_hits(scheduler: Scheduler, stored: Mapping[str, int]) -> str:
    """Make the scheduler-side LMCache lookup report that LMCache holds the first
    ``stored[request_id]`` tokens of each request (0 for requests not named).

    Real: vLLM's ``LMCacheConnectorV1``, LMCache's ``LMCacheConnectorV1Impl``
    (``get_num_new_matched_tokens``, ``update_state_after_alloc`` with its consistency check,
    ``build_connector_meta``, ``request_finished``) and its ``LMCacheLookupClient`` (chunk
    hashing, result caching). Injected: only the reply of the worker-side lookup server, which
    on a GPU box answers from the worker's LMCache engine and does not exist here (without it
    every lookup waits ``lookup_timeout_ms``, 3 s by default, and reports 0 hits).

    Injection point, narrowest first:
    - ``"transport"`` (LMCache releases whose lookup client has a ``transport``, 0.4.x on):
      ``transport.send_and_recv_all`` answers for every rank with the whole-chunk prefix of the
      hashed chunks it was sent, encoded like the server's reply (4-byte big-endian int);
    - ``"lookup_client"`` (older releases, sockets inside the client): ``lookup_client.lookup``
      returns ``min(stored, len(token_ids))`` and records it where the client caches results.
    Returns the name of the point used. The patch is an instance attribute on this scheduler's
    objects only.
    """
    impl = lmcache_impl(scheduler)
    client = getattr(impl, "lookup_client", None)
    if client is None:
        raise RuntimeError(
            "LMCache scheduler connector has no lookup client (degraded mode): "
            "it reports 0 external tokens whatever is injected"
        )
    wanted = {str(k): int(v) for k, v in stored.items()}
    transport = getattr(client, "transport", None)
    if transport is not None and callable(getattr(transport, "send_and_recv_all", None)):
        world_size = int(getattr(transport, "world_size", 1))

        def send_and_recv_all(msg: list[Any]) -> list[bytes]:
            # Non-blending wire format: [hashes, offsets, lookup_id, request_configs];
            # blending: [token_ids, lookup_id, request_configs].
            lookup_id = str(msg[-2])
            chunks = [int(n) for n in msg[1]] if len(msg) == 4 else [len(msg[0])]
            hit = _stored_prefix(wanted.get(lookup_id, 0), chunks)
            return [hit.to_bytes(4, "big") for _ in range(world_size)]

        transport.send_and_recv_all = send_and_recv_all
        return "transport"

    statuses = getattr(client, "reqs_status", None)

    def stored_for(lookup_id: str, token_ids: Sequence[int]) -> int:
        if lookup_id in wanted:
            return wanted[lookup_id]
        # releases that look up under a fresh uuid (0.3.7 without async loading): the request
        # is recognised by its prompt (harness.prompt_tokens is distinct per request id)
        tokens = [int(t) for t in token_ids]
        for request_id, count in wanted.items():
            if prompt_tokens(request_id, len(tokens)) == tokens:
                return count
        return 0

    def lookup(token_ids: Sequence[int], lookup_id: str, *args: Any, **kwargs: Any) -> int:
        hit = min(stored_for(str(lookup_id), token_ids), len(token_ids))
        if isinstance(statuses, dict):
            statuses[lookup_id] = hit
        return hit

    client.lookup = lookup
    return "lookup_client"


class LogCapture(logging.Handler):
    """Collects formatted messages of one logger while attached.

    vLLM configures its ``vllm`` logger with its own handler and ``propagate=False``, so
    pytest's ``caplog`` (a root handler) does not see "Recovered from KV load failure"; attach
    this handler to the emitting logger instead (handlers on the logger itself always run).
    """

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())

    def matching(self, text: str) -> list[str]:
        return [m for m in self.messages if text in m]


@contextmanager
def capture_logs(logger_name: str = SCHEDULER_LOGGER) -> Iterator[LogCapture]:
    logger = logging.getLogger(logger_name)
    handler = LogCapture()
    old_level = logger.level
    if logger.getEffectiveLevel() > logging.INFO:
        logger.setLevel(logging.INFO)
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)


@contextmanager
def timed(timings: dict[str, float], label: str) -> Iterator[None]:
    """Record the wall time of the block in ``timings[label]`` (seconds, 3 decimals)."""
    start = time.perf_counter()
    try:
        yield
    finally:
        timings[label] = round(time.perf_counter() - start, 3)


_DIST_READY: list[bool] = []


def init_worker_process(config: Any, tmp: Path) -> None:
    """What a (single) GPU worker process sets up before building its connector: vLLM's
    distributed state over gloo, world size 1 (once per process)."""
    from vllm.config import set_current_vllm_config
    from vllm.distributed.parallel_state import (
        init_distributed_environment,
        initialize_model_parallel,
    )

    if _DIST_READY:
        return
    with set_current_vllm_config(config):
        init_distributed_environment(
            world_size=1,
            rank=0,
            distributed_init_method=f"file://{tmp / 'dist-init'}",
            local_rank=0,
            backend="gloo",
        )
        initialize_model_parallel(1, 1)
    _DIST_READY.append(True)
