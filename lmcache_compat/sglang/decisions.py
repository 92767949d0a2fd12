"""What the lmcache-compat radix-cache backend builds for an (sglang, LMCache) pair, decided from
facts only: no sglang, LMCache or torch is imported.

:func:`plan` is the one rule. The plugin runs it at start-up (and refuses in one line where it
cannot serve the pair), ``doctor`` runs it to name the fix, and ``scripts/build_sglang_grid.py``
runs it for every measured pair (the grid's plugin column).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from packaging.version import Version

from lmcache_compat.core.catalog import Capability
from lmcache_compat.sglang.known.issues import CPU_IN_PROCESS_FROM
from lmcache_compat.sglang.known.reader import SglangFacts
from lmcache_compat.sglang.variants import Variant, variant_for
from lmcache_compat.upstream import locations as loc
from lmcache_compat.versions import parse_version

__all__ = ["MODES", "Mode", "Plan", "plan"]

#: ``auto``: MP where the release has the MP connector and sglang was given an LMCache config
#: file (sglang's own MP mode needs one), else in-process.
Mode = Literal["auto", "in-process", "mp"]
MODES: tuple[Mode, ...] = ("auto", "in-process", "mp")
_MODE_CAPABILITY = {"in-process": Capability.SGLANG_IN_PROCESS, "mp": Capability.SGLANG_MP}


@dataclass(frozen=True, slots=True)
class Plan:
    """What the backend builds, or why it refuses."""

    sglang: str | None
    lmcache: str | None
    serves: bool
    #: ``in-process``, ``mp`` or ``unified-mp``.
    mode: str | None = None
    variant: Variant | None = None
    #: Why it refuses (one line with the working range); ``""`` when it serves.
    reason: str = ""
    #: Said at start-up when it serves (what lmcache-compat's tests did not verify).
    note: str = ""

    def line(self) -> str:
        if not self.serves:
            return (
                f"lmcache-compat cannot serve sglang {self.sglang} + LMCache {self.lmcache}: "
                f"{self.reason}"
            )
        assert self.variant is not None
        text = (
            f"lmcache-compat serves sglang {self.sglang} + LMCache {self.lmcache}: "
            f"{self.mode} mode, backend variant {self.variant.name}"
        )
        return f"{text} ({self.note})" if self.note else text


def _range(capability: Capability) -> str:
    """``LMCache >= 0.3.6, < 0.5.7rc2``: the releases that have ``capability``."""
    spec = capability.spec
    return f"LMCache >= {spec.since}" + (f", < {spec.removed}" if spec.removed else "")


def plan(
    sglang: SglangFacts,
    lmcache: str | None,
    capabilities: Mapping[str, bool],
    *,
    mode: Mode = "auto",
    config_file: bool = False,
) -> Plan:
    """What the backend builds for the sglang whose facts are ``sglang`` over the LMCache
    release ``lmcache`` with ``capabilities`` (a matrix row's or a scan's)."""
    version = sglang["sglang"]

    def refuse(reason: str) -> Plan:
        return Plan(version, lmcache, False, reason=reason)

    if not sglang["registry"]:
        return refuse(
            f"sglang {version} has no radix-cache registry ({loc.SGLANG_REGISTER_BACKEND.name}), "
            "so no plugin can give it a cache; use sglang's own integration "
            "with the LMCache range doctor names, or the lmcache-compat drop-ins "
            "(lmcache_compat.sglang.legacy)"
        )
    classes = tuple(i["cache_class"] for i in sglang["integration"])
    variant = variant_for(classes, sglang["internals"], loc.SGLANG_LMC_UNIFIED_CACHE.name)
    if variant is None:
        facts = ", ".join(f"{k}={v}" for k, v in sorted(sglang["internals"].items()))
        from lmcache_compat.installation import install_hint  # lazy: only a refusal needs it

        return refuse(
            f"its internals ({facts}) match no variant of the lmcache-compat backend "
            f"(HINT: {install_hint(upgrade=True)})"
        )
    has = {cap: bool(capabilities.get(cap.value)) for cap in Capability}
    if variant.kind == "unified":
        if not has[Capability.SGLANG_UNIFIED_MP]:
            return refuse(
                f"sglang {version}'s unified radix cache needs "
                f"{loc.SGLANG_UNIFIED.name}, which this LMCache lacks (use "
                f"{_range(Capability.SGLANG_UNIFIED_MP)}); lmcache-compat builds no unified "
                "cache over the older protocols"
            )
        chosen = "unified-mp"
    else:
        chosen, reason = _radix_mode(version, has, mode, config_file)
        if reason:
            return refuse(reason)
    return Plan(
        version, lmcache, True, chosen, variant, note=_unverified(variant, chosen, lmcache, version)
    )


def _radix_mode(
    version: str | None, has: Mapping[Capability, bool], mode: Mode, config_file: bool
) -> tuple[str, str]:
    """``(mode, "")``: the radix cache's connector mode (``auto``: MP when this LMCache has it
    and a configuration file is named, else the first it has); ``("", reason)``: none fits."""
    available = [m for m, cap in _MODE_CAPABILITY.items() if has[cap]]
    if not available:
        return "", (
            f"this LMCache has neither SGLang connector sglang {version}'s radix cache can use "
            f"(in-process: {_range(Capability.SGLANG_IN_PROCESS)}; MP: "
            f"{_range(Capability.SGLANG_MP)})"
        )
    chosen: str = mode
    if mode == "auto":
        chosen = "mp" if "mp" in available and config_file else available[0]
    if chosen not in available:
        return "", (
            f"{chosen} mode needs {_range(_MODE_CAPABILITY[chosen])} (this LMCache offers "
            f"{' and '.join(available)})"
        )
    return chosen, ""


def _public(version: str) -> Version:
    """An installed release's public version, under the reader contract (budgeted)."""
    return parse_version(parse_version(version).public)


def _unverified(variant: Variant, mode: str, lmcache: str | None, sglang: str | None) -> str:
    """``""`` for a pair lmcache-compat's sglang tier round-trips, else what it did not."""
    if lmcache is not None and variant.verifies(mode, lmcache):
        if (
            sglang is not None
            and variant.tested_on is not None
            and _public(sglang) != _public(variant.tested_on)
        ):
            return (
                f"verified on sglang {variant.tested_on}, whose internals this sglang shares "
                "(this release itself is not run by lmcache-compat's tests)"
            )
        return ""
    why = ""
    if mode == "in-process" and (
        lmcache is None or _public(lmcache) < _public(CPU_IN_PROCESS_FROM)
    ):
        why = f": the in-process connector of LMCache before {CPU_IN_PROCESS_FROM} needs CUDA"
    elif variant.tested_on is None:
        why = f": no sglang release of variant {variant.name} is installed by the tests"
    else:
        why = f": they run variant {variant.name}'s {mode} mode over other LMCache releases"
    return f"not verified by lmcache-compat's tests{why}"
