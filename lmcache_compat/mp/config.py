"""Building a multi-process adapter from the caller's facts, on any release.

:class:`MPConfig` holds what a caller knows (servers, model, block size, world size and rank,
parallelism, timeouts); :func:`mp_init_call` maps it onto the release's own constructor (read
from its signature, never from a version number), and :func:`build_parallel_strategy` builds
the release's ``ParallelStrategy`` by field name. Arguments a release lacks follow the rows of
:mod:`lmcache_compat.core.arguments` (``ARG.x``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lmcache_compat.core.arguments import ARG, Applied, Downgrades, apply
from lmcache_compat.core.signatures import MethodFacts, init_facts
from lmcache_compat.errors import UnsupportedArgumentError

__all__ = ["MPConfig", "build_parallel_strategy", "mp_init_call"]

#: The constructor keywords releases gained (each row's name is its capability's keyword).
SERVERS = ARG.server_urls.argument  # Capability.MP_MULTI_SERVER (0.5.0)
STRATEGY = ARG.parallel_strategy.argument  # Capability.MP_PARALLEL_STRATEGY (0.4.4)


@dataclass(frozen=True)
class MPConfig:
    """The caller's facts for building a multi-process adapter, whatever the release.

    ``server_urls`` is a URL string or an ordered sequence of them (a string is one URL, never
    a sequence of characters; a set is refused: rank ``r`` talks to the ``r``-th block of
    servers, so the order carries meaning). ``world_size``/``rank`` are vLLM's; the MLA
    adjustment older releases need is done here.

    ``http_urls`` (optional): the servers' HTTP front ends (``http://HOST:PORT``), one per
    server URL, in the same order. When given, ``create()`` asks each server the adapter talks
    to for its LMCache release (:mod:`lmcache_compat.mp.server`) and raises
    :class:`~lmcache_compat.errors.MPVersionMismatchError` if it is not the installed one: the
    MP protocol itself cannot be asked, and a mismatch otherwise shows only as timed-out lookups.
    """

    server_urls: str | Sequence[str]
    model_name: str
    block_size: int
    world_size: int = 1
    rank: int = 0
    tp_size: int = 1
    pp_size: int = 1
    dcp_size: int = 1
    use_mla: bool = False
    mq_timeout: float | None = None
    heartbeat_interval: float | None = None
    extra_config: Mapping[str, Any] | None = None
    enable_kv_events: bool = False
    required_chunk_alignment: int | None = None
    http_urls: str | Sequence[str] | None = None

    def __post_init__(self) -> None:
        urls = _url_tuple("server_urls", self.server_urls)
        object.__setattr__(self, "server_urls", urls)
        if self.http_urls is not None:
            http = _url_tuple("http_urls", self.http_urls)
            if len(http) != len(urls):
                raise ValueError(
                    f"http_urls: {len(http)} URLs for {len(urls)} server_urls; give one HTTP "
                    "front end per server, in the same order"
                )
            bad = [u for u in http if not u.startswith(("http://", "https://"))]
            if bad:
                raise ValueError(
                    f"http_urls: {bad!r} are not http(s):// URLs of the servers' HTTP front ends"
                )
            object.__setattr__(self, "http_urls", http)
        for name in ("block_size", "world_size", "tp_size", "pp_size", "dcp_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name}: expected a positive int, got {value!r}")
        if not isinstance(self.rank, int) or not 0 <= self.rank < self.world_size:
            raise ValueError(
                f"rank: expected 0 <= rank < world_size={self.world_size}, got {self.rank!r}"
            )
        alignment = self.required_chunk_alignment
        if alignment is not None and (
            not isinstance(alignment, int) or isinstance(alignment, bool) or alignment < 1
        ):
            raise ValueError(
                f"required_chunk_alignment: expected a positive int, got {alignment!r}"
            )
        if self.use_mla and self.world_size % self.tp_size:
            raise ValueError(
                f"use_mla: world_size={self.world_size} is not a multiple of tp_size={self.tp_size}"
            )

    @property
    def urls(self) -> tuple[str, ...]:
        return tuple(self.server_urls)

    @property
    def kv_world_size(self) -> int:
        """World size as LMCache keys KV (MLA: TP ranks share KV, as vLLM's connector computes)."""
        return self.world_size // self.tp_size if self.use_mla else self.world_size

    @property
    def kv_rank(self) -> int:
        return self.rank // self.tp_size if self.use_mla else self.rank

    def http_url_for(self, server_url: str) -> str | None:
        """The HTTP front end given for ``server_url`` (``None`` when none was given)."""
        if self.http_urls is None or server_url not in self.urls:
            return None
        return tuple(self.http_urls)[self.urls.index(server_url)]

    def local_server_url(self) -> str:
        """The worker's server: ranks are spread over servers in contiguous blocks, as LMCache
        0.5.x's own connector does."""
        urls = self.urls
        per_server = max(1, self.world_size // len(urls))
        return urls[min(self.rank // per_server, len(urls) - 1)]


def _url_tuple(name: str, urls: object) -> tuple[str, ...]:
    """A URL string or an ordered sequence of them, as a tuple (a string is never split)."""
    if isinstance(urls, (bytes, bytearray)):
        raise TypeError(f"{name}: give str URLs, not bytes")
    if isinstance(urls, (set, frozenset, Mapping)) or not isinstance(urls, (str, Sequence)):
        raise TypeError(
            f"{name}: give a URL string or an ordered sequence (list/tuple) of them, "
            f"not a {type(urls).__name__}: which rank reaches which server depends on the "
            "order"
        )
    out = (urls,) if isinstance(urls, str) else tuple(urls)
    if not out or not all(isinstance(u, str) and u.strip() for u in out):
        raise ValueError(f"{name}: expected one or more non-empty URL strings, got {out!r}")
    return out


# --- construction -----------------------------------------------------------------------------


def build_parallel_strategy(ps_cls: type, config: MPConfig, downgrades: Downgrades) -> Any:
    """A ``ParallelStrategy`` of the release's own field set, built by field name (positional
    order differs between releases)."""
    facts = init_facts(ps_cls)
    names = set(facts.names)
    values: dict[str, Any] = {
        # 0.4.4: KV (MLA-adjusted) and actual world size / worker id, tp and pp
        "use_mla": config.use_mla,
        "kv_world_size": config.kv_world_size,
        "kv_worker_id": config.kv_rank,
        "actual_world_size": config.world_size,
        "actual_worker_id": config.rank,
        # 0.4.7: vLLM's world size / worker id (LMCache derives the KV view itself)
        "vllm_world_size": config.world_size,
        "vllm_worker_id": config.rank,
        "tp_size": config.tp_size,
        # 0.5.0: number of LMCache servers
        "n_servers": len(config.urls),
        # 0.5.3: use_mla renamed mla_only
        "mla_only": config.use_mla,
    }
    # ARG.pp_size is about the constructor (no strategy before 0.4.4); every strategy has it
    values["pp_size"] = config.pp_size
    dcp = apply(ARG.dcp_size, facts, downgrades, given=_more_than_one)
    if dcp.takes:  # 0.5.5: passed as it is (1 included)
        values[dcp.keyword] = config.dcp_size
    else:
        dcp.put(values, config.dcp_size)
    unknown = {p.name for p in facts.params if facts.required(p.name) and p.name not in values}
    if unknown:
        raise UnsupportedArgumentError(
            STRATEGY,
            f"{ps_cls.__qualname__} in LMCache {downgrades.version or 'unknown'} requires fields "
            f"{sorted(unknown)} that lmcache-compat does not know; please report this release",
        )
    return ps_cls(**{k: v for k, v in values.items() if k in names})


def _more_than_one(value: Any) -> bool:
    return bool(value > 1)


def _given(value: Any) -> bool:
    return value is not None


def mp_init_call(
    cls: type,
    config: MPConfig,
    context: Any,
    *,
    worker: bool,
    parallel_strategy_cls: type | None,
    downgrades: Downgrades,
) -> dict[str, Any]:
    """Keyword arguments for the release's ``LMCacheMP{Scheduler,Worker}Adapter(...)``.

    Shapes: 0.3.13 ``(server_url, context, model_name, world_size, kv_rank, vllm_block_size)``;
    0.4.1 ``+tp_size``; 0.4.2 ``+mq_timeout, heartbeat_interval``; 0.4.4 ``+parallel_strategy``;
    0.4.5 ``(server_url, context, model_name, vllm_block_size, parallel_strategy, ...)``; 0.4.6
    ``+extra_config``; 0.5.0 scheduler ``server_urls: list[str]``; 0.5.6 worker
    ``+enable_kv_events``; 0.5.7rc2 ``+required_chunk_alignment``. All are passed by name, so
    positional order never matters; each optional one goes through its argument row.
    """
    facts = init_facts(cls)
    names = set(facts.names)
    urls = config.urls
    kwargs: dict[str, Any] = {"context": context, "model_name": config.model_name}
    one_url = _one_server_url(config, worker, parallel_strategy_cls, downgrades)
    servers = apply(ARG.server_urls, facts, downgrades, given=_given, convert=list, emulate=one_url)
    servers.put(kwargs, urls)
    kwargs["vllm_block_size"] = config.block_size
    strategy = _put_strategy(
        kwargs,
        cls,
        facts,
        config,
        parallel_strategy_cls=parallel_strategy_cls,
        downgrades=downgrades,
    )
    # ARG.tp_size: 0.4.1-0.4.4 take it; before, only MLA caches keyed by it are a loss
    mla_tp = config.use_mla and config.tp_size > 1 and not strategy.takes
    tp = apply(ARG.tp_size, facts, downgrades, given=_given)
    if tp.takes:
        tp.put(kwargs, config.tp_size)
    elif mla_tp:
        tp.put(kwargs, True)
    for row in (ARG.mq_timeout, ARG.heartbeat_interval):  # 0.4.2; timing only before
        apply(row, facts, downgrades, given=_given).put(kwargs, getattr(config, row.argument))
    apply(ARG.extra_config, facts, downgrades, convert=dict).put(kwargs, config.extra_config)
    # ARG.enable_kv_events (0.5.6): the worker's switch; dropped before (no events to enable)
    apply(ARG.enable_kv_events, facts, downgrades).put(kwargs, config.enable_kv_events)
    apply(ARG.required_chunk_alignment, facts, downgrades, given=_given).put(
        kwargs, config.required_chunk_alignment
    )
    _refuse_unknown_required(cls, facts, kwargs, downgrades)
    return {k: v for k, v in kwargs.items() if k in names or facts.signature is None}


def _put_strategy(
    kwargs: dict[str, Any],
    cls: type,
    facts: MethodFacts,
    config: MPConfig,
    *,
    parallel_strategy_cls: type | None,
    downgrades: Downgrades,
) -> Applied:
    """``parallel_strategy`` (0.4.4 on), else ``world_size`` and ``kv_rank``; 0.4.4 takes all
    three. Returns the strategy's step (whether the release takes one)."""
    strategy = apply(
        ARG.parallel_strategy,
        facts,
        downgrades,
        given=_given,
        emulate=_world_size_and_rank(config, downgrades),
    )
    if strategy.takes and parallel_strategy_cls is None:
        raise UnsupportedArgumentError(
            STRATEGY,
            f"{cls.__qualname__} takes parallel_strategy but its module has no "
            "ParallelStrategy class",
        )
    strategy.put(
        kwargs,
        build_parallel_strategy(parallel_strategy_cls, config, downgrades)
        if strategy.takes and parallel_strategy_cls is not None
        else config,
    )
    if "world_size" in facts.names and strategy.takes:  # 0.4.4 passes both
        kwargs["world_size"] = config.kv_world_size
        kwargs["kv_rank"] = config.kv_rank
    return strategy


def _refuse_unknown_required(
    cls: type, facts: MethodFacts, kwargs: dict[str, Any], downgrades: Downgrades
) -> None:
    """A required parameter no row fills: a release lmcache-compat does not know yet."""
    unknown = {p.name for p in facts.params if facts.required(p.name) and p.name not in kwargs}
    if unknown:
        raise UnsupportedArgumentError(
            sorted(unknown)[0],
            f"{cls.__qualname__}.__init__ in LMCache {downgrades.version or 'unknown'} requires "
            f"{sorted(unknown)}, which lmcache-compat does not know; please report this release",
        )


def _one_server_url(
    config: MPConfig, worker: bool, parallel_strategy_cls: type | None, downgrades: Downgrades
) -> Callable[[dict[str, Any], Any], None]:
    """``ARG.server_urls`` before 0.5.0 (and the 0.5.x worker): one URL, as the string
    ``server_url`` (never split). 0.5.0's workers take their node's server (``ParallelStrategy``
    gained ``n_servers`` then); several servers elsewhere are ``ARG.several_servers``."""
    multi_server = (
        parallel_strategy_cls is not None and "n_servers" in init_facts(parallel_strategy_cls).names
    )
    several = apply(ARG.several_servers, None, downgrades, given=_more_than_one)

    def one_url(kwargs: dict[str, Any], urls: Any) -> None:
        if worker and multi_server:
            kwargs["server_url"] = config.local_server_url()
            return
        several.put(kwargs, len(urls))
        kwargs["server_url"] = urls[0]

    return one_url


def _world_size_and_rank(
    config: MPConfig, downgrades: Downgrades
) -> Callable[[dict[str, Any], Any], None]:
    """``ARG.parallel_strategy`` before 0.4.4: plain world size and rank, MLA-adjusted as vLLM's
    connector did; a pipeline-parallel layout cannot be expressed (``ARG.pp_size``)."""
    pp = apply(ARG.pp_size, None, downgrades, given=_more_than_one)

    def plain(kwargs: dict[str, Any], value: Any) -> None:
        kwargs["world_size"] = config.kv_world_size
        kwargs["kv_rank"] = config.kv_rank
        pp.put(kwargs, config.pp_size)

    return plain
