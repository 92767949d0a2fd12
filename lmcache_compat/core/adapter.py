"""Bound adapters: :class:`ConnectorAdapter` (over ``LMCacheConnectorV1Impl``) and the base the
multi-process and engine adapters share.

Decide once, call fast: the constructor normalises its options, then
:func:`lmcache_compat.core.binding.bind` probes the engine's class (cached per class) and binds
each adapter method to the engine's own bound method, to a result check around it, or to the
catalog's fallback. A call through the adapter does no ``getattr``, ``callable``, ``try`` or
version check; exceptions raised by the engine propagate unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, ClassVar

from lmcache_compat.core.arguments import Allow
from lmcache_compat.core.binding import (
    Binding,
    Options,
    UnreadableMethodWarning,
    bind,
    install_fallbacks,
)
from lmcache_compat.core.catalog import Capability, fallback_table
from lmcache_compat.core.probes import Capabilities
from lmcache_compat.core.roles import CONNECTOR, Role

__all__ = ["BoundAdapter", "ConnectorAdapter", "UnreadableMethodWarning"]


class BoundAdapter:
    """What every adapter holds once bound: the target, its capabilities for the adapter's
    role, the installed LMCache release, and (as plain attributes) the bound methods."""

    #: The role (LMCache class) this adapter wraps.
    role: ClassVar[Role]

    target: Any
    capabilities: Capabilities
    lmcache_version: str | None
    strict: bool
    #: The arguments the caller allows an adapter to drop where the release lacks them.
    allow: Allow

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        role = cls.__dict__.get("role")
        if role is not None:  # a concrete adapter: the catalog's fallbacks, as plain methods
            install_fallbacks(cls, role)

    def _bind(
        self,
        target: object,
        require: Iterable[Capability | str] | Capability | str,
        strict: bool,
        allow: Iterable[str] | str | bool = (),
        *,
        core: Iterable[str] | None = None,
        raise_absent: Iterable[Capability] = (),
    ) -> Binding:
        """Normalise the constructor's options, let :func:`~lmcache_compat.core.binding.bind`
        decide, and store what it decided (once, at construction)."""
        options = Options.of(require, strict, allow)
        binding = bind(
            target,
            self.role,
            options,
            adapter=type(self).__name__,
            core=core,
            raise_absent=raise_absent,
        )
        self.allow = options.allow
        self.target = binding.target
        self.capabilities = binding.capabilities
        self.lmcache_version = binding.lmcache_version
        self.strict = binding.options.strict
        for name, method in binding.methods.items():  # attribute by attribute: the instance
            setattr(self, name, method)  # keeps CPython's fast inline attribute values
        return binding

    def __repr__(self) -> str:
        present = ", ".join(c.value for c in self.capabilities) or "none"
        return (
            f"<{type(self).__name__} over {self.capabilities.cls_name} "
            f"(LMCache {self.lmcache_version or 'unknown'}; {present})>"
        )

    if TYPE_CHECKING:  # methods a future catalog row adds are bound like the others

        def __getattr__(self, name: str) -> Any: ...


class ConnectorAdapter(BoundAdapter):
    """Uniform adapter over an LMCache ``LMCacheConnectorV1Impl`` of any release (0.3.0 on).

    ``require``: capabilities that must be present, else
    :class:`~lmcache_compat.errors.MissingCapabilityError` here. ``strict``: absent optional
    methods raise :class:`~lmcache_compat.errors.MissingCapabilityError` when called instead of
    returning their documented fallback.

    The seven methods every release has (``start_load_kv``, ``wait_for_layer_load``,
    ``save_kv_layer``, ``wait_for_save``, ``get_num_new_matched_tokens``,
    ``update_state_after_alloc``, ``build_connector_meta``) are the engine's own bound methods.
    An object lacking one of them raises :class:`~lmcache_compat.errors.NotAnEngineError`.
    ``.engine`` is the wrapped engine.
    """

    role = CONNECTOR

    # always present: the engine's own bound methods
    start_load_kv: Callable[..., None]
    wait_for_layer_load: Callable[[str], None]
    save_kv_layer: Callable[..., None]
    wait_for_save: Callable[[], None]
    get_num_new_matched_tokens: Callable[[Any, int], int | None]
    update_state_after_alloc: Callable[[Any, int], None]
    build_connector_meta: Callable[[Any], Any]
    # optional: the engine's method or the catalog's fallback
    get_finished: Callable[[set[str]], tuple[set[str] | None, set[str] | None]]
    request_finished: Callable[[Any, list[int]], tuple[bool, dict[str, Any] | None]]
    get_inference_info: Callable[[], dict[str, Any]]
    get_block_ids_with_load_errors: Callable[[], set[int]]
    shutdown: Callable[[], None]
    get_kv_events: Callable[[], list[Any]]
    register_kv_caches: Callable[[Any], None]

    def __init__(
        self,
        engine: object,
        *,
        require: Iterable[Capability | str] | Capability | str = (),
        strict: bool = False,
    ) -> None:
        self._bind(engine, require, strict)

    @property
    def engine(self) -> Any:
        """The wrapped ``LMCacheConnectorV1Impl``."""
        return self.target


ConnectorAdapter.__doc__ = (ConnectorAdapter.__doc__ or "") + fallback_table(CONNECTOR)
