"""sglang 0.5.2 ... 0.5.12 have no plugin mechanism: their own ``LMCRadixCache`` imports
``LMCacheLayerwiseConnector``, ``LoadMetadata`` and ``StoreMetadata`` from LMCache's
``sglang_adapter`` and calls them with the keywords of their release, which only LMCache 0.3.9
... 0.4.5 take (0.4.6 made ``config_file`` required; sglang 0.5.2 ... 0.5.5 hand over their
``GroupCoordinator`` as ``tp_group``).

:func:`install` puts drop-ins in that module, before sglang imports it: the connector is
:class:`~lmcache_compat.sglang.adapters.SGLangLayerwiseAdapter` built from sglang's keywords
over the installed release (``config_file`` from ``LMCACHE_CONFIG_FILE`` where the release
requires one, the torch group whatever sglang hands over), the metadata are built by
:class:`~lmcache_compat.sglang.metadata.MetadataBuilder`. Every sglang process must run it (its
scheduler is a spawned process): from a ``sitecustomize.py`` on the server's ``PYTHONPATH``
(docs/sglang.md). It imports LMCache's module, hence torch.
"""

from __future__ import annotations

import importlib
from typing import Any

from lmcache_compat.sglang.adapters import SGLangLayerwiseAdapter
from lmcache_compat.sglang.metadata import MetadataBuilder
from lmcache_compat.sglang.upstream import find_sglang
from lmcache_compat.upstream import locations as loc
from lmcache_compat.upstream.resolve import where

__all__ = ["MARK", "install"]

#: Set on LMCache's module once the drop-ins are in (a second install is a no-op).
MARK = "_lmcache_compat_drop_ins"


def install() -> None:
    """Replace LMCache's ``LMCacheLayerwiseConnector`` / ``LoadMetadata`` / ``StoreMetadata``
    with drop-ins over the lmcache-compat adapter (idempotent). A release without the
    in-process connector raises one line naming the releases that have it."""
    connector_cls = find_sglang(loc.SGLANG_LAYERWISE)  # one line if the release lacks it
    module = importlib.import_module(where(loc.SGLANG_LAYERWISE).module)
    if getattr(module, MARK, False):
        return
    builder = MetadataBuilder(
        find_sglang(loc.SGLANG_LOAD_METADATA), find_sglang(loc.SGLANG_STORE_METADATA)
    )

    class LMCacheLayerwiseConnector:
        """Drop-in for sglang <= 0.5.12: ``LMCacheLayerwiseConnector(sgl_config=, tp_size=,
        rank=, k_pool=, v_pool=, tp_group=)`` builds the lmcache-compat adapter."""

        def __new__(cls, **kwargs: Any) -> Any:
            adapter = SGLangLayerwiseAdapter.create(connector_cls=connector_cls, **kwargs)
            adapter._metadata = builder
            return adapter

    def load_metadata(
        token_ids: Any, slot_mapping: Any, offset: int, prefix_pad: int = 0, request_id: str = ""
    ) -> Any:
        return builder.load(token_ids, slot_mapping, offset, prefix_pad, request_id)

    def store_metadata(
        last_node: Any, token_ids: Any, kv_indices: Any, offset: int, request_id: str = ""
    ) -> Any:
        return builder.store(last_node, token_ids, kv_indices, offset, request_id)

    setattr(module, loc.SGLANG_LAYERWISE.name, LMCacheLayerwiseConnector)
    setattr(module, loc.SGLANG_LOAD_METADATA.name, load_metadata)
    setattr(module, loc.SGLANG_STORE_METADATA.name, store_metadata)
    setattr(module, MARK, True)
