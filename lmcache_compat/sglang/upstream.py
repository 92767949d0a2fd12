"""Finding LMCache's SGLang code at run time, and what every adapter hands it: the classes
(where the locations module says, or wherever a release moved them), import errors with their
real cause, the LMCache configuration honouring ``LMCACHE_CONFIG_FILE`` on every release, and
the torch process group whatever sglang hands over."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

from lmcache_compat.core.catalog import Capability
from lmcache_compat.core.signatures import facts_of
from lmcache_compat.errors import LMCacheCompatError, UpstreamNotFoundError
from lmcache_compat.upstream import locations as loc
from lmcache_compat.upstream.resolve import find, where
from lmcache_compat.versions import version_or_none

__all__ = [
    "CONFIG_ENV",
    "SGLangImportError",
    "config_file_env",
    "config_path",
    "find_sglang",
    "load_config",
    "torch_group",
]

#: The environment variable LMCache's configuration is read from (every release's docs).
CONFIG_ENV = "LMCACHE_CONFIG_FILE"
#: Which capability each place stands for (the range an error names).
_CAPABILITY = {
    loc.SGLANG_LAYERWISE.name: Capability.SGLANG_IN_PROCESS,
    loc.SGLANG_LOAD_METADATA.name: Capability.SGLANG_IN_PROCESS,
    loc.SGLANG_STORE_METADATA.name: Capability.SGLANG_IN_PROCESS,
    loc.SGLANG_GET_CONFIG.name: Capability.SGLANG_IN_PROCESS,
    loc.SGLANG_MP.name: Capability.SGLANG_MP,
    loc.SGLANG_UNIFIED.name: Capability.SGLANG_UNIFIED_MP,
}


class SGLangImportError(LMCacheCompatError, ImportError):
    """LMCache's SGLang module could not be imported: the message names the module, the
    installed LMCache and the real cause (sglang itself reports every such failure as "LMCache
    is not installed"); the original error is chained."""


def find_sglang(place: loc.Place) -> Any:
    """``place`` in the installed LMCache, imported; one-line errors: a release without it
    names the releases that have it, an import that fails names its real cause."""
    version = version_or_none(loc.LMCACHE) or "unknown"
    try:
        dotted = where(place).module
    except UpstreamNotFoundError as exc:
        capability = _CAPABILITY.get(place.name)
        if capability is None:
            raise
        spec = capability.spec
        has = f"LMCache >= {spec.since}" + (f", < {spec.removed}" if spec.removed else "")
        raise UpstreamNotFoundError(
            f"LMCache {version} has no {place.name} (it is in {has}); "
            f"HINT: pip install 'lmcache{spec.releases}'"
        ) from exc
    try:
        return find(place)
    except UpstreamNotFoundError:
        raise
    except ImportError as exc:
        top = (exc.name or "").split(".")[0]
        missing = ""
        if isinstance(exc, ModuleNotFoundError) and top and top != loc.LMCACHE:
            missing = f" (HINT: pip install {top})"  # a dependency LMCache imports is missing
        elif top == loc.LMCACHE:
            missing = " (a compiled part of LMCache failed to load: see the error)"
        raise SGLangImportError(
            f"cannot import {dotted} (LMCache {version}, for {place.name}): "
            f"{type(exc).__name__}: {exc}{missing}"
        ) from exc


@contextlib.contextmanager
def config_file_env(path: str) -> Iterator[None]:
    """``LMCACHE_CONFIG_FILE=path`` while the block runs (how a release that reads only the
    environment is handed a file); restored after. Construction time only (not thread-safe)."""
    before = os.environ.get(CONFIG_ENV)
    os.environ[CONFIG_ENV] = path
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(CONFIG_ENV, None)
        else:
            os.environ[CONFIG_ENV] = before


def config_path(config_file: str | None) -> str:
    """The file to load: the one given, else ``LMCACHE_CONFIG_FILE``, else ``""`` (built-in
    defaults)."""
    return config_file or os.environ.get(CONFIG_ENV, "")


def load_config(config_file: str | None = None) -> Any:
    """The LMCache configuration, honouring ``LMCACHE_CONFIG_FILE`` on every release.

    Releases up to 0.4.5 have ``lmcache_get_config()``, which reads only the environment: a
    given file is handed over as ``LMCACHE_CONFIG_FILE`` for the call. From 0.4.6 it is
    ``lmcache_get_config(config_file="")``, where an empty path means built-in defaults and
    the environment is ignored (although its docstring says otherwise): the environment's file
    is passed as the path. Decided from the function's signature, not from a version."""
    get_config = find_sglang(loc.SGLANG_GET_CONFIG)
    path = config_path(config_file)
    facts = facts_of(get_config, drop_first=False)
    if facts.params:
        return get_config(path)
    if not path:
        return get_config()
    with config_file_env(path):
        return get_config()


def torch_group(group: Any) -> Any:
    """The torch process group behind what sglang hands over: its ``GroupCoordinator``'s
    ``device_group`` (sglang 0.5.2 ... 0.5.5 pass the coordinator itself), or the group as it
    is (``None`` stays ``None``)."""
    if group is None:
        return None
    inner = getattr(group, "device_group", None)
    return group if inner is None else inner
