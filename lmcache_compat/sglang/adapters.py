"""Uniform adapters over LMCache's SGLang connectors: one per protocol, over every release that
has it, bound once at construction (:func:`lmcache_compat.core.binding.bind`).

* :class:`SGLangLayerwiseAdapter` over ``LMCacheLayerwiseConnector`` (in-process, layer by
  layer; 0.3.6 ... 0.5.6): ``chunk_size``, ``start_load_kv``, ``load_kv_layerwise``,
  ``store_kv``, ``reset``, ``close``, ``get_kv_events``.
* :class:`SGLangMPAdapter` over ``LMCacheMPConnector`` (multi-process; 0.4.6 ... 0.5.6):
  ``chunk_size``, ``lookup_kv``, ``release_pending``, ``retrieve_kv``, ``store_kv``,
  ``store_kv_async``, ``end_session``, ``reset``, ``close``, ``is_healthy()``.
* :class:`SGLangUnifiedAdapter` over ``UnifiedLMCacheMPConnector`` (0.5.6 on): the twenty-one
  methods sglang's unified radix cache calls (:data:`~lmcache_compat.core.roles.SGLANG_UNIFIED`);
  attributes it reads (``chunk_size``, ``operation_timeout``) are the connector's own.

Each ``create(...)`` takes the arguments sglang passes and builds the release's connector:
``tp_group`` is always handed over as the torch process group (sglang 0.5.2 ... 0.5.5 pass
their ``GroupCoordinator``), and dropped where the release has none (0.3.6 ... 0.3.7);
``config_file`` is passed where the release takes it (0.4.6 on) and handed over as
``LMCACHE_CONFIG_FILE`` where it reads only the environment; an empty ``config_file`` means
``LMCACHE_CONFIG_FILE`` on every release. Decided from the release's signatures, never from
its version. Engine errors propagate unchanged.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterable
from typing import Any

from lmcache_compat.core.adapter import BoundAdapter
from lmcache_compat.core.binding import property_getter
from lmcache_compat.core.catalog import Capability, fallback_table
from lmcache_compat.core.roles import SGLANG_LAYERWISE, SGLANG_MP, SGLANG_UNIFIED
from lmcache_compat.core.signatures import MethodFacts, init_facts
from lmcache_compat.sglang.metadata import MetadataBuilder
from lmcache_compat.sglang.upstream import (
    config_file_env,
    config_path,
    find_sglang,
    load_config,
    torch_group,
)
from lmcache_compat.upstream import locations as loc

__all__ = [
    "CompletedFuture",
    "SGLangLayerwiseAdapter",
    "SGLangMPAdapter",
    "SGLangUnifiedAdapter",
    "init_kwargs",
]

Require = Iterable[Capability | str] | Capability | str


def _keyword(capability: Capability) -> str:
    keyword = capability.spec.keyword
    assert keyword is not None
    return keyword


def init_kwargs(
    facts: MethodFacts,
    given: dict[str, Any],
    *,
    tp_group: Any = None,
    config_file: str | None = None,
    optional: dict[str, Any] | None = None,
) -> tuple[dict[str, Any], str | None]:
    """The keywords a connector's ``__init__`` (``facts``) is built with, and the file to hand
    over as ``LMCACHE_CONFIG_FILE`` instead (``None``: none). ``given`` are passed as they are;
    ``tp_group`` as the torch group where the release takes it; ``config_file`` where it does
    (else emulated through the environment); ``optional`` only where it takes them."""
    kwargs = dict(given)
    tp_keyword, config_keyword = (
        _keyword(Capability.SGLANG_TP_GROUP),
        _keyword(Capability.SGLANG_CONFIG_FILE),
    )
    if facts.accepts_keyword(tp_keyword):
        kwargs[tp_keyword] = torch_group(tp_group)
    path = config_path(config_file)
    emulate = None
    if facts.accepts_keyword(config_keyword):
        kwargs[config_keyword] = path
    elif path:
        emulate = path
    for name, value in (optional or {}).items():
        if value is not None and facts.accepts_keyword(name):
            kwargs[name] = value
    return kwargs, emulate


class _WithMetadata(BoundAdapter):
    """An SGLang adapter that builds the release's metadata objects (``metadata``)."""

    _metadata: MetadataBuilder | None

    @property
    def metadata(self) -> MetadataBuilder:
        """The release's metadata builder (found beside the connector on first use)."""
        if self._metadata is None:
            self._metadata = MetadataBuilder()
        return self._metadata


class SGLangLayerwiseAdapter(_WithMetadata):
    """Adapter over an in-process ``LMCacheLayerwiseConnector`` of any release (0.3.6 ...
    0.5.6). Build one with :meth:`create` from sglang's arguments, or wrap one you built.

    ``metadata`` (:class:`~lmcache_compat.sglang.metadata.MetadataBuilder`) builds the
    release's ``LoadMetadata`` / ``StoreMetadata``, keeping ``prefix_pad`` / ``request_id``
    where the release has them."""

    role = SGLANG_LAYERWISE

    chunk_size: Callable[[], int]
    start_load_kv: Callable[[Any], int]
    load_kv_layerwise: Callable[[int], None]
    store_kv: Callable[[Any], None]
    reset: Callable[[], None]
    close: Callable[[], None]
    get_kv_events: Callable[[], list[Any]]

    def __init__(
        self,
        connector: object,
        *,
        metadata: MetadataBuilder | None = None,
        require: Require = (),
        strict: bool = False,
    ) -> None:
        self._bind(connector, require, strict)
        self._metadata = metadata

    @classmethod
    def create(
        cls,
        *,
        sgl_config: Any,
        tp_size: int,
        rank: int,
        k_pool: Any,
        v_pool: Any,
        tp_group: Any = None,
        config_file: str | None = None,
        connector_cls: type | None = None,
        require: Require = (),
        strict: bool = False,
    ) -> SGLangLayerwiseAdapter:
        """Build the installed release's connector from sglang's arguments (any release)."""
        connector_cls = connector_cls or find_sglang(loc.SGLANG_LAYERWISE)
        kwargs, emulate = init_kwargs(
            init_facts(connector_cls),
            {
                "sgl_config": sgl_config,
                "tp_size": tp_size,
                "rank": rank,
                "k_pool": k_pool,
                "v_pool": v_pool,
            },
            tp_group=tp_group,
            config_file=config_file,
        )
        with config_file_env(emulate) if emulate else contextlib.nullcontext():
            connector = connector_cls(**kwargs)
        return cls(connector, require=require, strict=strict)


class CompletedFuture:
    """What an emulated ``store_kv_async`` returns: already done (the store ran at once)."""

    __slots__ = ("value",)

    def __init__(self, value: bool) -> None:
        self.value = value

    def query(self) -> bool:
        return True

    def result(self, timeout: float | None = None) -> bool:
        return self.value

    def wait(self, timeout: float | None = None) -> bool:
        return True


class SGLangMPAdapter(_WithMetadata):
    """Adapter over an ``LMCacheMPConnector`` (0.4.6 ... 0.5.6); ``is_healthy()`` reads the
    connector's property per call, ``store_kv_async`` is the connector's own (0.5.3 on) or,
    before, ``store_kv`` at once returning a :class:`CompletedFuture`."""

    role = SGLANG_MP

    chunk_size: Callable[[], int]
    lookup_kv: Callable[[list[int], str], int]
    release_pending: Callable[[str], None]
    retrieve_kv: Callable[[Any], int]
    store_kv: Callable[[Any], None]
    store_kv_async: Callable[[Any], Any]
    end_session: Callable[[str], None]
    reset: Callable[[], None]
    close: Callable[[], None]
    is_healthy: Callable[[], bool]

    def __init__(
        self,
        connector: object,
        *,
        metadata: MetadataBuilder | None = None,
        require: Require = (),
        strict: bool = False,
    ) -> None:
        binding = self._bind(connector, require, strict)
        self._metadata = metadata
        if Capability.SGLANG_MP_STORE_ASYNC in binding.capabilities:
            self.store_kv_async = binding.target.store_kv_async
        else:
            store = self.store_kv

            def store_kv_async(store_metadata: Any) -> CompletedFuture:
                store(store_metadata)
                return CompletedFuture(True)

            self.store_kv_async = store_kv_async
        self.is_healthy = functools.partial(
            property_getter(binding.target_cls, "is_healthy"), binding.target
        )

    @classmethod
    def create(
        cls,
        *,
        sgl_config: Any,
        tp_size: int,
        rank: int,
        page_size: int,
        host: str | None = None,
        port: int | None = None,
        k_pool: Any,
        v_pool: Any,
        tp_group: Any = None,
        config_file: str | None = None,
        mq_timeout: float | None = None,
        heartbeat_interval: float | None = None,
        connector_cls: type | None = None,
        require: Require = (),
        strict: bool = False,
    ) -> SGLangMPAdapter:
        """Build the installed release's MP connector. ``host`` / ``port`` default to the
        LMCache configuration's ``mp_host`` / ``mp_port`` (``config_file``, else
        ``LMCACHE_CONFIG_FILE``), as sglang reads them; ``mq_timeout`` and
        ``heartbeat_interval`` are passed where given (sglang passes neither: the release's
        default request timeout applies)."""
        connector_cls = connector_cls or find_sglang(loc.SGLANG_MP)
        if host is None or port is None:
            config = load_config(config_file)
            host = config.mp_host if host is None else host
            port = config.mp_port if port is None else port
        kwargs, _ = init_kwargs(
            init_facts(connector_cls),
            {
                "sgl_config": sgl_config,
                "tp_size": tp_size,
                "rank": rank,
                "page_size": page_size,
                "host": host,
                "port": port,
                "k_pool": k_pool,
                "v_pool": v_pool,
            },
            tp_group=tp_group,
            optional={"mq_timeout": mq_timeout, "heartbeat_interval": heartbeat_interval},
        )
        return cls(connector_cls(**kwargs), require=require, strict=strict)


class SGLangUnifiedAdapter(BoundAdapter):
    """Adapter over an ``UnifiedLMCacheMPConnector`` (0.5.6 on). Every method sglang's unified
    radix cache calls is the connector's own bound method (called by keyword where a release
    reordered parameters); attributes are read from the connector."""

    role = SGLANG_UNIFIED

    def __init__(self, connector: object, *, require: Require = (), strict: bool = False) -> None:
        self._bind(connector, require, strict)

    def __getattr__(self, name: str) -> Any:
        # only for names not bound above (attributes: chunk_size, operation_timeout, ...)
        if name.startswith("__") or name == "target":
            raise AttributeError(name)
        return getattr(self.target, name)

    @classmethod
    def create(
        cls, *, config_file: str | None = None, connector_cls: type | None = None, **kwargs: Any
    ) -> SGLangUnifiedAdapter:
        """Build the installed release's unified connector with sglang's keywords;
        ``config_file`` empty or ``None`` means ``LMCACHE_CONFIG_FILE`` (else defaults)."""
        connector_cls = connector_cls or find_sglang(loc.SGLANG_UNIFIED)
        group = _keyword(Capability.SGLANG_TP_GROUP)
        kwargs[group] = torch_group(kwargs.get(group))
        connector = connector_cls(config_file=config_path(config_file) or None, **kwargs)
        return cls(connector)


SGLangLayerwiseAdapter.__doc__ = (SGLangLayerwiseAdapter.__doc__ or "") + fallback_table(
    SGLANG_LAYERWISE
)
SGLangMPAdapter.__doc__ = (SGLangMPAdapter.__doc__ or "") + fallback_table(SGLANG_MP)
