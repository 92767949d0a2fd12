"""A stand-in for vLLM 0.33.0's ``CachedRequestData`` (the fields the MP connector reads).
Written for these tests: no vLLM code."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class CachedRequestData:
    req_ids: list[str] = field(default_factory=list)
    resumed_req_ids: set[str] = field(default_factory=set)
    new_block_ids: list[Any] = field(default_factory=list)
