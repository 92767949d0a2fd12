"""The ``vllm.general_plugins`` entry point, kept apart from the connector so that loading the
plugin (which vLLM does in every process) imports nothing but vLLM's connector factory; the
connector module itself is imported only when vLLM builds the connector."""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["CONNECTOR_MODULE", "CONNECTOR_NAME", "register"]

#: The name vLLM's ``kv_connector`` setting uses for this connector.
CONNECTOR_NAME = "LMCacheCompatConnector"
#: Where the connector class lives (``kv_connector_module_path``).
CONNECTOR_MODULE = "lmcache_compat.vllm"


def register() -> None:
    """Register :data:`CONNECTOR_NAME` with vLLM's ``KVConnectorFactory`` lazily.

    Idempotent: vLLM loads general plugins once per process, in several processes, and a
    second call (or a connector already registered under this name) is not an error.
    """
    # lazy: loading the plugin imports no vLLM until it registers
    from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory

    def registered() -> bool:
        registry = getattr(KVConnectorFactory, "_registry", None)
        return isinstance(registry, Mapping) and CONNECTOR_NAME in registry

    if registered():
        return
    try:
        KVConnectorFactory.register_connector(CONNECTOR_NAME, CONNECTOR_MODULE, CONNECTOR_NAME)
    except ValueError:  # "already registered" (a concurrent or earlier registration)
        if not registered():
            raise
