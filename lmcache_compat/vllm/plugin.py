"""The ``vllm.general_plugins`` entry point, kept apart from the connector so that loading the
plugin (which vLLM does in every process) imports nothing but vLLM's connector factory; the
connector module itself is imported only when vLLM builds the connector."""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["CONNECTOR_MODULE", "CONNECTOR_NAME", "MP_CONNECTOR_NAME", "register"]

#: The name vLLM's ``kv_connector`` setting uses for this connector.
CONNECTOR_NAME = "LMCacheCompatConnector"
#: The multi-process (MP) connector's name (a drop-in for vLLM's ``LMCacheMPConnector``).
MP_CONNECTOR_NAME = "LMCacheCompatMPConnector"
#: Every connector this plugin registers, each under its class name in :data:`CONNECTOR_MODULE`.
NAMES = (CONNECTOR_NAME, MP_CONNECTOR_NAME)
#: Where the connector class lives (``kv_connector_module_path``).
CONNECTOR_MODULE = "lmcache_compat.vllm"


def register() -> None:
    """Register :data:`CONNECTOR_NAME` and :data:`MP_CONNECTOR_NAME` with vLLM's
    ``KVConnectorFactory`` lazily.

    Idempotent: vLLM loads general plugins once per process, in several processes, and a
    second call (or a connector already registered under this name) is not an error.
    """
    # lazy: loading the plugin imports no vLLM until it registers
    from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory

    def registered(name: str) -> bool:
        registry = getattr(KVConnectorFactory, "_registry", None)
        return isinstance(registry, Mapping) and name in registry

    for name in NAMES:
        if registered(name):
            continue
        try:
            KVConnectorFactory.register_connector(name, CONNECTOR_MODULE, name)
        except ValueError:  # "already registered" (a concurrent or earlier registration)
            if not registered(name):
                raise
