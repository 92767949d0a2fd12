"""``LMCacheCompatConnector``: a drop-in vLLM v1 KV connector over any LMCache release.

Configure it like vLLM's own ``LMCacheConnectorV1``::

    --kv-transfer-config '{"kv_connector": "LMCacheCompatConnector",
                           "kv_connector_module_path": "lmcache_compat.vllm",
                           "kv_role": "kv_both"}'

or leave out ``kv_connector_module_path``: the ``vllm.general_plugins`` entry point
(:func:`~lmcache_compat.vllm.plugin.register`) registers the name. For LMCache's
multi-process mode, ``"kv_connector": "LMCacheCompatMPConnector"`` replaces vLLM's
``LMCacheMPConnector`` with the same ``kv_connector_extra_config``
(:mod:`~lmcache_compat.vllm.mp_connector`).

The package's parts: :mod:`~lmcache_compat.vllm.decisions` (what to bind and convert, given the
adapter's facts and :class:`~lmcache_compat.vllm.facts.VllmFacts`; imports no vLLM),
:mod:`~lmcache_compat.vllm.facts` (what the running vLLM offers),
:mod:`~lmcache_compat.vllm.connector` (the thin ``KVConnectorBase_V1`` subclass),
:mod:`~lmcache_compat.vllm.events` (KV cache events) and :mod:`~lmcache_compat.vllm.plugin`.

Importing this package imports no vLLM: the connector module loads on first use of its names
(PEP 562), which is how vLLM's factory finds it (``import_module`` then ``getattr``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lmcache_compat._lazy import lazy_names
from lmcache_compat.vllm.plugin import CONNECTOR_NAME, MP_CONNECTOR_NAME, register

if TYPE_CHECKING:
    from lmcache_compat.vllm.connector import LMCacheCompatConnector
    from lmcache_compat.vllm.events import CompatKVEvents
    from lmcache_compat.vllm.facts import VllmFacts
    from lmcache_compat.vllm.mp_connector import LMCacheCompatMPConnector

__all__ = [
    "CONNECTOR_NAME",
    "MP_CONNECTOR_NAME",
    "CompatKVEvents",
    "LMCacheCompatConnector",
    "LMCacheCompatMPConnector",
    "VllmFacts",
    "register",
]

#: Public name -> the module that defines it (imported on first use: it imports vLLM).
_LAZY = {
    "LMCacheCompatConnector": "lmcache_compat.vllm.connector",
    "LMCacheCompatMPConnector": "lmcache_compat.vllm.mp_connector",
    "CompatKVEvents": "lmcache_compat.vllm.events",
    "VllmFacts": "lmcache_compat.vllm.facts",
}


__getattr__, __dir__ = lazy_names("lmcache_compat.vllm", _LAZY, globals(), __all__)
