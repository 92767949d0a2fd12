"""Where the repository's own files are (one place for the tests, tiers, scripts and
benchmarks that need them)."""

from __future__ import annotations

from pathlib import Path

#: The repository root.
ROOT = Path(__file__).resolve().parents[1]
#: The real tiers (tox envs that install real LMCache, vLLM, torch).
TIERS = ROOT / "tests" / "tiers"
#: The pins each vLLM grid tier installs (``scripts/build_vllm_constraints.py`` writes them).
VLLM_CONSTRAINTS = TIERS / "real" / "constraints"


def vllm_constraints(version: str) -> Path:
    """The constraints file of one vLLM release's CPU environment."""
    return VLLM_CONSTRAINTS / f"vllm-{version}-cpu.txt"
