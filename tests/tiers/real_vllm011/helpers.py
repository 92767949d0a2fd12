"""vLLM 0.11.0 specifics of the driver (``tests/tiers/real/scheduler/harness.py`` itself now works
from vLLM 0.11.0 on: its ``make_request`` takes ``sha256`` from whichever module has it and
passes ``eos_token_id``, which 0.11.0's ``Request`` requires; both are re-exported here).

* ``harness.make_model_runner_output`` filters ``KVConnectorOutput``'s keyword arguments by
  signature, so on 0.11.0 (no ``invalid_block_ids`` field) failed block ids would vanish
  without a trace. :func:`connector_output_accepts` says whether a field exists, so the driver
  records the drop instead of hiding it.

Every vLLM import is inside a function: this module imports without vLLM installed.
"""

from __future__ import annotations

import dataclasses
import inspect

from tests.tiers.real.scheduler import harness as h

__all__ = [
    "connector_output_accepts",
    "connector_output_fields",
    "make_request",
    "source_mentions",
    "vllm_sha256",
]

make_request = h.make_request
vllm_sha256 = h.vllm_sha256


def connector_output_fields() -> tuple[str, ...]:
    """The fields of the running vLLM's ``KVConnectorOutput`` dataclass."""
    from vllm.v1.outputs import KVConnectorOutput

    return tuple(f.name for f in dataclasses.fields(KVConnectorOutput))


def connector_output_accepts(name: str) -> bool:
    return name in connector_output_fields()


def source_mentions(obj: object, text: str) -> bool:
    """Whether the source of a vLLM module, class or function contains ``text``."""
    return text in inspect.getsource(obj)  # type: ignore[arg-type]
