"""A stand-in for vLLM 0.33.0's ``KVConnectorFactory`` (registry by name, lazy import)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


class KVConnectorFactory:
    _registry: dict[str, Callable[[], type]] = {}

    @classmethod
    def register_connector(cls, name: str, module_path: str, class_name: str) -> None:
        if name in cls._registry:
            raise ValueError(f"Connector '{name}' is already registered.")

        def loader() -> type:
            return getattr(importlib.import_module(module_path), class_name)  # type: ignore[no-any-return]

        cls._registry[name] = loader

    @classmethod
    def get_connector_class_by_name(cls, connector_name: str) -> type:
        return cls._registry[connector_name]()

    @classmethod
    def create_connector(cls, config: Any, role: Any, kv_cache_config: Any) -> Any:
        name = config.kv_transfer_config.kv_connector
        return cls.get_connector_class_by_name(name)(config, role, kv_cache_config)
