"""What ``tests/real/scheduler/harness.py`` needs adapting for vLLM 0.11.0 (that harness is
written against vLLM 0.32.0 and is reused unchanged for everything else).

* ``harness.make_request`` imports ``sha256`` from ``vllm.utils.hashing``, a module that does
  not exist in 0.11.0 (``sha256`` lives in ``vllm.utils`` there), and does not pass
  ``eos_token_id``, a required parameter of 0.11.0's ``Request``. :func:`make_request` takes
  ``sha256`` from whichever module has it and passes ``eos_token_id``.
* ``harness.make_model_runner_output`` filters ``KVConnectorOutput``'s keyword arguments by
  signature, so on 0.11.0 (no ``invalid_block_ids`` field) failed block ids would vanish
  without a trace. :func:`connector_output_accepts` says whether a field exists, so the driver
  records the drop instead of hiding it.

Every vLLM import is inside a function: this module imports without vLLM installed.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import inspect
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from tests.real.scheduler import harness as h

if TYPE_CHECKING:
    from vllm.v1.request import Request


def vllm_sha256() -> Callable[[Any], bytes]:
    """vLLM's ``sha256`` block-hash function: ``vllm.utils.hashing`` (newer) or ``vllm.utils``
    (0.11.0)."""
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
    from vllm.v1.core.kv_cache_utils import init_none_hash

    init_none_hash(vllm_sha256())


def make_request(
    request_id: str,
    num_tokens: int,
    block_size: int = h.BLOCK_SIZE,
    *,
    max_tokens: int = 4,
    prompt_token_ids: Sequence[int] | None = None,
) -> Request:
    """``harness.make_request`` for vLLM 0.11.0 (same prompt tokens, same block hashing)."""
    from vllm import SamplingParams
    from vllm.v1.core.kv_cache_utils import get_request_block_hasher
    from vllm.v1.request import Request

    _ensure_none_hash()
    sampling_params = SamplingParams(max_tokens=max_tokens)
    sampling_params.update_from_generation_config({}, h.EOS_TOKEN_ID)
    tokens = (
        list(prompt_token_ids)
        if prompt_token_ids is not None
        else h.prompt_tokens(request_id, num_tokens)
    )
    return Request(
        **h.accepted_kwargs(
            Request,
            {
                "request_id": request_id,
                "prompt_token_ids": tokens,
                "sampling_params": sampling_params,
                "pooling_params": None,
                "eos_token_id": h.EOS_TOKEN_ID,
                "mm_features": None,
                "block_hasher": get_request_block_hasher(block_size, vllm_sha256()),
            },
        )
    )


def connector_output_fields() -> tuple[str, ...]:
    """The fields of the running vLLM's ``KVConnectorOutput`` dataclass."""
    from vllm.v1.outputs import KVConnectorOutput

    return tuple(f.name for f in dataclasses.fields(KVConnectorOutput))


def connector_output_accepts(name: str) -> bool:
    return name in connector_output_fields()


def source_mentions(obj: object, text: str) -> bool:
    """Whether the source of a vLLM module, class or function contains ``text``."""
    return text in inspect.getsource(obj)  # type: ignore[arg-type]
