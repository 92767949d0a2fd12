"""The radix-cache factory sglang's registry calls for ``--radix-cache-backend lmcache-compat``.

:func:`build` runs when sglang builds its tree cache, at start-up. It reads the installed
sglang and LMCache from their files (nothing new is imported to decide), asks
:func:`~lmcache_compat.sglang.decisions.plan` what to build, and either builds it or refuses in one
line naming the LMCache releases that work (:class:`BackendRefused`), never deep in a request:

* sglang 0.5.13 ... 0.5.20 (radix variants): :class:`~lmcache_compat.sglang.radix` over the
  in-process or MP adapter, as the installed LMCache allows; ``LMCACHE_COMPAT_SGLANG_MODE``
  (``auto`` / ``in-process`` / ``mp``) chooses, ``auto`` meaning MP where the release has it
  and sglang was given ``--lmcache-config-file`` (as sglang's own MP mode needs), else
  in-process;
* sglang 0.5.21 on (unified variant): sglang's own ``LMCacheUnifiedRadixCache``, its connector
  bound through :class:`~lmcache_compat.sglang.adapters.SGLangUnifiedAdapter`, built with the
  ``LMCACHE_CONFIG_FILE`` fallback; a release without the unified connector is refused.

The build context's fields are read by name (they change between sglang releases).
"""

from __future__ import annotations

import functools
import inspect
import logging
import os
from typing import Any

from lmcache_compat.errors import LMCacheCompatError
from lmcache_compat.sglang.decisions import MODES, Mode, Plan, plan
from lmcache_compat.sglang.known.reader import SglangFacts, read_sglang
from lmcache_compat.sglang.upstream import config_path
from lmcache_compat.upstream import locations as loc
from lmcache_compat.upstream.resolve import find

__all__ = ["MODE_ENV", "BackendRefused", "build", "installed_plan"]

logger = logging.getLogger(__name__)

#: Chooses the mode on sglang 0.5.13 ... 0.5.20 (``auto``, ``in-process`` or ``mp``).
MODE_ENV = "LMCACHE_COMPAT_SGLANG_MODE"
_MISSING = object()


class BackendRefused(LMCacheCompatError, RuntimeError):
    """The lmcache-compat backend cannot serve the installed (sglang, LMCache) pair: the
    message is one line with the reason and the LMCache releases that work."""


@functools.cache
def _installed_sglang() -> SglangFacts:
    return read_sglang()


def _mode() -> Mode:
    value = os.environ.get(MODE_ENV, "auto").strip() or "auto"
    if value not in MODES:
        raise BackendRefused(f"{MODE_ENV}={value!r} is not one of {', '.join(MODES)}")
    return value


def installed_plan(config_file: str | None) -> Plan:
    """The plan for the installed pair, read from the installed files of both."""
    # lazy: the scanner is needed only when a cache is built
    from lmcache_compat.upstream.scanner import scan
    from lmcache_compat.versions import version_or_none

    lmcache = version_or_none(loc.LMCACHE)
    capabilities = scan().capabilities if lmcache is not None else {}
    return plan(
        _installed_sglang(),
        lmcache,
        capabilities,
        mode=_mode(),
        config_file=bool(config_path(config_file)),
    )


def _field(ctx: Any, name: str, default: Any = _MISSING) -> Any:
    value = getattr(ctx, name, default)
    if value is _MISSING:
        from lmcache_compat.installation import install_hint  # lazy: only a refusal needs it

        raise BackendRefused(
            f"sglang's {type(ctx).__name__} has no field {name!r}, which the lmcache-compat "
            f"backend reads (HINT: {install_hint(upgrade=True)})"
        )
    return value


def build(ctx: Any) -> Any:
    """The factory registered as ``lmcache-compat``: the cache for this process, or one line
    saying why the installed pair cannot be served."""
    server_args = _field(ctx, "server_args")
    config_file = getattr(server_args, "lmcache_config_file", None)
    found = installed_plan(config_file)
    if not found.serves:
        raise BackendRefused(found.line())
    # the line says what lmcache-compat's tests did not run; a pair they did not verify warns
    (logger.warning if found.note.startswith("not verified") else logger.info)("%s", found.line())
    assert found.variant is not None
    if found.variant.kind == "unified":
        return _unified(ctx, config_file)
    # lazy: the cache class subclasses the running sglang's RadixCache
    from lmcache_compat.sglang.radix import RadixSettings, radix_cache_class

    settings = RadixSettings(
        mode=str(found.mode),
        variant=found.variant,
        model_config=_field(ctx, "model_config"),
        tp_size=_field(ctx, "tp_size"),
        rank=_field(ctx, "tp_rank"),
        tp_group=_field(ctx, "tp_group", None),
        config_file=config_file,
        speculative_eagle_topk=getattr(server_args, "speculative_eagle_topk", None),
    )
    return radix_cache_class()(_field(ctx, "params"), settings)


def tree_components(ctx: Any) -> tuple[Any, ...]:
    """The unified tree's components, as sglang's own factory picks them for LMCache: FULL
    unless the model is pure sliding-window, SWA for hybrid SWA, MAMBA for hybrid SSM."""
    component = find(loc.SGLANG_COMPONENT_TYPE)
    swa = bool(getattr(ctx, "is_hybrid_swa", False))
    pure_swa = swa and getattr(ctx, "full_tokens_per_layer", None) == 0
    out = [] if pure_swa else [component.FULL]
    if swa:
        out.append(component.SWA)
    if getattr(ctx, "is_hybrid_ssm", False):
        out.append(component.MAMBA)
    return tuple(out)


@functools.cache
def _unified_class() -> type:
    # lazy: the adapter module is light, sglang's cache module imports LMCache's
    from lmcache_compat.sglang.adapters import SGLangUnifiedAdapter

    base = find(loc.SGLANG_LMC_UNIFIED_CACHE)

    class CompatUnifiedRadixCache(base):  # type: ignore[misc,valid-type]
        """sglang's ``LMCacheUnifiedRadixCache``, its connector bound through
        lmcache-compat (:class:`SGLangUnifiedAdapter`)."""

        #: The keywords the base's constructor takes (sglang's own, read once).
        accepted = frozenset(inspect.signature(base).parameters)

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            connector: Any = vars(self)["lmcache_connector"]
            self.lmcache_connector = SGLangUnifiedAdapter(connector)

    return CompatUnifiedRadixCache


def _unified(ctx: Any, config_file: str | None) -> Any:
    cls = _unified_class()
    params = _field(ctx, "params")
    params.tree_components = tree_components(ctx)
    worker = _field(ctx, "tp_worker")
    offered = {
        "model_config": _field(ctx, "model_config"),
        "tp_size": _field(ctx, "tp_size"),
        "tp_rank": _field(ctx, "tp_rank"),
        "lmcache_config_file": config_path(config_file) or None,
        "forward_stream": getattr(getattr(worker, "model_runner", None), "forward_stream", None),
    }
    accepted: frozenset[str] = cls.accepted  # type: ignore[attr-defined]
    return cls(params, **{k: v for k, v in offered.items() if k in accepted})
