"""How each multi-process call is made on a given release: pure functions of its facts.

Each ``mp_*`` function takes the release's own method (or class) and its
:class:`~lmcache_compat.signatures.MethodFacts`, decides everything once from them (never from a
version number: the signatures and annotations tell the truth), and returns the closure the
adapter binds. The only per-call work left is looking at the caller's argument values (a
non-empty ``cache_salt`` is refused where it would be dropped). What happens to each argument
on a release that lacks it is a row of :mod:`lmcache_compat.arguments` (``ARG.x``).

Token ids take three forms (:mod:`lmcache_compat.tokens`): 0.3.13 block hashes, 0.3.14 a
``list[int]``, 0.5.7rc2 ``bytes`` packed by the release's own ``pack_token_ids``. Callers always
pass a sequence of ints (or, for a release that takes bytes, the packed bytes themselves).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lmcache_compat.arguments import ARG, Downgrades
from lmcache_compat.errors import UnsupportedArgumentError
from lmcache_compat.locations import PACK_TOKEN_IDS
from lmcache_compat.signatures import MethodFacts, init_facts
from lmcache_compat.tokens import Encoding, key_encoding, token_field

__all__ = [
    "MPConfig",
    "Pack",
    "build_parallel_strategy",
    "load_store_op_factory",
    "mp_free_lookup_locks",
    "mp_init_call",
    "mp_lookup",
    "mp_register_kv_caches",
    "mp_submit",
]

Pack = Callable[[Sequence[int]], bytes]
_BYTES = (bytes, bytearray, memoryview)


@dataclass(frozen=True)
class MPConfig:
    """The caller's facts for building a multi-process adapter, whatever the release.

    ``server_urls`` is a URL string or an ordered sequence of them (a string is one URL, never
    a sequence of characters; a set is refused: rank ``r`` talks to the ``r``-th block of
    servers, so the order carries meaning). ``world_size``/``rank`` are vLLM's; the MLA
    adjustment older releases need is done here.
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

    def __post_init__(self) -> None:
        urls = self.server_urls
        if isinstance(urls, (bytes, bytearray)):
            raise TypeError("server_urls: give str URLs, not bytes")
        if isinstance(urls, (set, frozenset, Mapping)) or not isinstance(urls, (str, Sequence)):
            raise TypeError(
                f"server_urls: give a URL string or an ordered sequence (list/tuple) of them, "
                f"not a {type(urls).__name__}: which rank reaches which server depends on the "
                "order"
            )
        urls = (urls,) if isinstance(urls, str) else tuple(urls)
        if not urls or not all(isinstance(u, str) and u.strip() for u in urls):
            raise ValueError(
                f"server_urls: expected one or more non-empty URL strings, got {urls!r}"
            )
        object.__setattr__(self, "server_urls", urls)
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

    def local_server_url(self) -> str:
        """The worker's server: ranks are spread over servers in contiguous blocks, as LMCache
        0.5.x's own connector does."""
        urls = self.urls
        per_server = max(1, self.world_size // len(urls))
        return urls[min(self.rank // per_server, len(urls) - 1)]


def _names(facts: MethodFacts) -> set[str]:
    return set(facts.names)


# --- construction -----------------------------------------------------------------------------


def build_parallel_strategy(ps_cls: type, config: MPConfig, downgrades: Downgrades) -> Any:
    """A ``ParallelStrategy`` of the release's own field set, built by field name (positional
    order differs between releases)."""
    facts = init_facts(ps_cls)
    names = _names(facts)
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
        "pp_size": config.pp_size,
        # 0.5.0: number of LMCache servers
        "n_servers": len(config.urls),
        # 0.5.3: use_mla renamed mla_only
        "mla_only": config.use_mla,
        # 0.5.5: decode context parallel size
        "dcp_size": config.dcp_size,
    }
    if config.dcp_size > 1 and "dcp_size" not in names:
        downgrades.refuse(ARG.dcp_size)
    unknown = {p.name for p in facts.params if facts.required(p.name) and p.name not in values}
    if unknown:
        raise UnsupportedArgumentError(
            "parallel_strategy",
            f"{ps_cls.__qualname__} in LMCache {downgrades.version or 'unknown'} requires fields "
            f"{sorted(unknown)} that lmcache-compat does not know; please report this release",
        )
    return ps_cls(**{k: v for k, v in values.items() if k in names})


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
    positional order never matters.
    """
    facts = init_facts(cls)
    names = _names(facts)
    urls = config.urls
    kwargs: dict[str, Any] = {"context": context, "model_name": config.model_name}
    if "server_urls" in names:  # 0.5.0 scheduler: a list, never a bare string
        kwargs["server_urls"] = list(urls)
    else:
        # 0.5.0: the scheduler takes every server; each worker still takes one URL, its node's
        # (ParallelStrategy gained n_servers then). Before 0.5.0 there is one server.
        multi_server = parallel_strategy_cls is not None and "n_servers" in _names(
            init_facts(parallel_strategy_cls)
        )
        if len(urls) > 1 and not (worker and multi_server):
            downgrades.refuse(ARG.several_servers)
        kwargs["server_url"] = config.local_server_url() if worker and multi_server else urls[0]
    kwargs["vllm_block_size"] = config.block_size
    if "parallel_strategy" in names:  # 0.4.4: a ParallelStrategy dataclass
        if parallel_strategy_cls is None:
            raise UnsupportedArgumentError(
                "parallel_strategy",
                f"{cls.__qualname__} takes parallel_strategy but its module has no "
                "ParallelStrategy class",
            )
        kwargs["parallel_strategy"] = build_parallel_strategy(
            parallel_strategy_cls, config, downgrades
        )
    else:  # 0.3.13-0.4.2: plain world size and rank, MLA-adjusted as vLLM's connector did
        kwargs["world_size"] = config.kv_world_size
        kwargs["kv_rank"] = config.kv_rank
        if config.pp_size > 1:
            downgrades.refuse(ARG.pp_size)
    if "world_size" in names and "parallel_strategy" in names:  # 0.4.4 passes both
        kwargs["world_size"] = config.kv_world_size
        kwargs["kv_rank"] = config.kv_rank
    if "tp_size" in names:  # 0.4.1-0.4.4
        kwargs["tp_size"] = config.tp_size
    elif "parallel_strategy" not in names and config.use_mla and config.tp_size > 1:
        downgrades.refuse(ARG.tp_size)
    for row in (ARG.mq_timeout, ARG.heartbeat_interval):  # 0.4.2; safe to drop before
        value = getattr(config, row.argument)
        if value is not None and row.argument in names:
            kwargs[row.argument] = value
    if config.extra_config:
        if "extra_config" in names:  # 0.4.6
            kwargs["extra_config"] = dict(config.extra_config)
        else:
            downgrades.refuse(ARG.extra_config)
    if config.enable_kv_events and "enable_kv_events" in names:  # 0.5.6 worker; else dropped
        kwargs["enable_kv_events"] = True
    if config.required_chunk_alignment is not None:
        if "required_chunk_alignment" in names:  # 0.5.7rc2: negotiated with the server
            kwargs["required_chunk_alignment"] = config.required_chunk_alignment
        else:
            downgrades.refuse(ARG.required_chunk_alignment)
    unknown = {p.name for p in facts.params if facts.required(p.name) and p.name not in kwargs}
    if unknown:
        raise UnsupportedArgumentError(
            sorted(unknown)[0],
            f"{cls.__qualname__}.__init__ in LMCache {downgrades.version or 'unknown'} requires "
            f"{sorted(unknown)}, which lmcache-compat does not know; please report this release",
        )
    return {k: v for k, v in kwargs.items() if k in names or facts.signature is None}


# --- tokens ---------------------------------------------------------------------------------------


def _token_form(facts: MethodFacts, position: int, where: str) -> Encoding:
    encoding = key_encoding(facts, position)
    if encoding is None:
        names = [p.name for p in facts.params]
        raise UnsupportedArgumentError(
            "token_ids",
            f"{where}: cannot tell how this release wants the request's tokens (parameter "
            f"{position} of {names}, annotation "
            f"{facts.params[position].annotation if position < len(names) else 'none'!s}); "
            "please report this release",
        )
    return encoding


def _tokens_converter(encoding: Encoding, pack: Pack | None, where: str) -> Callable[[Any], Any]:
    """The conversion applied to the caller's token ids for a parameter of ``encoding``."""
    if encoding == "packed":
        if pack is None:
            raise UnsupportedArgumentError(
                "token_ids",
                f"{where} takes packed token ids, but no {PACK_TOKEN_IDS.name} was found beside "
                f"it (its module, or {', '.join(PACK_TOKEN_IDS.modules)}); please report this "
                "release",
            )
        packer = pack

        def to_bytes(token_ids: Any) -> bytes:
            if isinstance(token_ids, _BYTES):  # already packed by the caller: as is
                return bytes(token_ids)
            return packer(token_ids)

        return to_bytes

    def as_list(token_ids: Any) -> Any:
        if isinstance(token_ids, _BYTES):
            raise TypeError(
                f"{where} takes token ids as a list of ints; pass the ids, not packed bytes"
            )
        return token_ids

    return as_list


# --- calls ----------------------------------------------------------------------------------------


def mp_lookup(
    method: Callable[..., Any],
    facts: MethodFacts,
    downgrades: Downgrades,
    pack: Pack | None = None,
) -> Callable[..., Any]:
    """``lookup(request_id, token_ids=None, block_hashes=None, *, cache_salt=None,
    request_configs=None, reserve_last_token=False, start=0)`` over the release's
    ``maybe_submit_lookup_request``.

    Returns what the release returns: ``None`` before 0.5.7rc2 (a lookup may or may not have
    gone out), from 0.5.7rc2 a ``bool`` (whether a LOOKUP went out).
    """
    names = _names(facts)
    encoding = _token_form(facts, 1, downgrades.where)
    key = facts.params[1].name
    convert = (
        _tokens_converter(encoding, pack, downgrades.where) if encoding != "block_hashes" else None
    )
    takes_salt = "cache_salt" in names  # 0.4.4
    takes_configs = "request_configs" in names  # 0.5.5
    takes_reserve = "reserve_last_token" in names  # 0.5.6
    takes_start = "start" in names  # 0.5.7rc2

    def lookup(
        request_id: str,
        token_ids: Sequence[int] | bytes | None = None,
        block_hashes: Sequence[Any] | None = None,
        *,
        cache_salt: str | None = None,
        request_configs: Mapping[str, Any] | None = None,
        reserve_last_token: bool = False,
        start: int = 0,
    ) -> Any:
        kwargs: dict[str, Any] = {}
        if convert is not None:  # 0.3.14: keyed by the request's tokens
            if token_ids is None:
                raise TypeError("lookup(): this LMCache release looks up by token_ids; pass them")
            if reserve_last_token:
                if takes_reserve:  # 0.5.6
                    kwargs["reserve_last_token"] = True
                elif isinstance(token_ids, _BYTES):
                    raise TypeError("lookup(): reserve_last_token needs token ids, not bytes")
                else:  # before 0.5.6: the same aligned range, from one token fewer
                    token_ids = token_ids[:-1]
            kwargs[key] = convert(token_ids)
        else:  # 0.3.13: keyed by vLLM's block hashes
            if block_hashes is None:
                raise TypeError(
                    "lookup(): LMCache 0.3.13 looks up by vLLM block hashes; pass block_hashes"
                )
            if reserve_last_token:
                downgrades.refuse(ARG.reserve_by_hashes)
            kwargs[key] = block_hashes
        if cache_salt:
            if takes_salt:
                kwargs["cache_salt"] = cache_salt
            else:
                downgrades.refuse(ARG.cache_salt)
        if request_configs:
            if takes_configs:
                kwargs["request_configs"] = request_configs
            else:
                downgrades.refuse(ARG.request_configs)
        if start:
            if takes_start:
                kwargs["start"] = start
            else:
                downgrades.refuse(ARG.start)
        return method(request_id, **kwargs)

    return lookup


def mp_free_lookup_locks(
    method: Callable[..., Any],
    facts: MethodFacts,
    downgrades: Downgrades,
    pack: Pack | None = None,
) -> Callable[..., Any]:
    """``free_lookup_locks(token_ids, start, end, request_id, *, cache_salt=None,
    request_configs=None, extra_ranges=())`` over the release's (0.4.1+) method."""
    names = _names(facts)
    convert = _tokens_converter(_token_form(facts, 0, downgrades.where), pack, downgrades.where)
    takes_salt = "cache_salt" in names  # 0.4.4
    takes_configs = "request_configs" in names  # 0.5.5
    takes_ranges = "extra_ranges" in names  # 0.5.7rc2

    def free_lookup_locks(
        token_ids: Sequence[int] | bytes,
        start: int,
        end: int,
        request_id: str,
        *,
        cache_salt: str | None = None,
        request_configs: Mapping[str, Any] | None = None,
        extra_ranges: Sequence[tuple[int, int]] = (),
    ) -> Any:
        kwargs: dict[str, Any] = {}
        if cache_salt:
            if takes_salt:
                kwargs["cache_salt"] = cache_salt
            else:
                downgrades.refuse(ARG.cache_salt)
        if request_configs:
            if takes_configs:
                kwargs["request_configs"] = request_configs
            else:
                downgrades.refuse(ARG.request_configs)
        key = convert(token_ids)
        ranges = tuple(extra_ranges)
        if ranges and takes_ranges:
            kwargs["extra_ranges"] = ranges
            ranges = ()
        result = method(key, start, end, request_id, **kwargs)
        for lo, hi in ranges:  # before 0.5.7rc2: one call per range frees the same locks
            method(key, lo, hi, request_id, **kwargs)
        return result

    return free_lookup_locks


def _optional_values(name: str, values: Any, n: int | None) -> tuple[Any, ...] | None:
    """A per-request list read exactly once (a generator is consumed here, not twice)."""
    if values is None:
        return None
    out = tuple(values)
    if n is not None and len(out) != n:
        raise ValueError(f"{name}: {len(out)} values for {n} requests")
    return out


def mp_submit(
    method: Callable[..., Any], facts: MethodFacts, downgrades: Downgrades, *, batched: bool
) -> Callable[..., Any]:
    """``submit_{store,retrieve}_request(request_id, op, event, *, cache_salt=None,
    request_configs=None)`` and the batched forms (``cache_salts``, ``request_configs_list``),
    every per-request sequence read exactly once."""
    names = _names(facts)
    salt_name = "cache_salts" if batched else "cache_salt"
    configs_name = "request_configs_list" if batched else "request_configs"
    takes_salt = salt_name in names  # 0.4.4
    takes_configs = configs_name in names  # 0.5.5
    order = list(facts.names)
    if not batched and order[3:5] == ["cache_salt", "request_configs"]:
        # 0.5.5 on: pass straight through (cache_salt defaults to "" in every release)
        def submit_newest(
            request_id: str,
            op: Any,
            event: Any,
            *,
            cache_salt: str | None = None,
            request_configs: Mapping[str, Any] | None = None,
        ) -> Any:
            return method(request_id, op, event, cache_salt or "", request_configs)

        return submit_newest

    def keep(kwargs: dict[str, Any], salt: Any, configs: Any) -> None:
        if salt is not None and (any(salt) if batched else salt):
            if takes_salt:
                kwargs[salt_name] = list(salt) if batched else salt
            else:
                downgrades.refuse(ARG.cache_salt)
        if configs is not None and (any(configs) if batched else configs):
            if takes_configs:
                kwargs[configs_name] = list(configs) if batched else configs
            else:
                downgrades.refuse(ARG.request_configs)

    if batched:

        def batched_submit(
            request_ids: Sequence[str],
            ops: Sequence[Any],
            event: Any,
            *,
            cache_salts: Sequence[str | None] | None = None,
            request_configs_list: Sequence[Mapping[str, Any] | None] | None = None,
        ) -> Any:
            ids = list(request_ids)
            kwargs: dict[str, Any] = {}
            salts = _optional_values("cache_salts", cache_salts, len(ids))
            configs = _optional_values("request_configs_list", request_configs_list, len(ids))
            keep(kwargs, salts, configs)
            return method(ids, list(ops), event, **kwargs)

        return batched_submit

    def single_submit(
        request_id: str,
        op: Any,
        event: Any,
        *,
        cache_salt: str | None = None,
        request_configs: Mapping[str, Any] | None = None,
    ) -> Any:
        kwargs: dict[str, Any] = {}
        keep(kwargs, cache_salt, request_configs)
        return method(request_id, op, event, **kwargs)

    return single_submit


def mp_register_kv_caches(
    method: Callable[..., Any], facts: MethodFacts, downgrades: Downgrades
) -> Callable[..., Any]:
    """``register_kv_caches(kv_caches, *, engine_group_infos=None, layout_hints=None)``."""
    names = _names(facts)
    takes_groups = "engine_group_infos" in names  # 0.4.7
    takes_hints = "layout_hints" in names  # 0.5.5

    def register_kv_caches(
        kv_caches: Any,
        *,
        engine_group_infos: Collection[Any] | None = None,
        layout_hints: Any = None,
    ) -> Any:
        kwargs: dict[str, Any] = {}
        if engine_group_infos:
            if takes_groups:
                kwargs["engine_group_infos"] = engine_group_infos
            elif len(engine_group_infos) > 1:
                downgrades.refuse(ARG.engine_group_infos)
        if layout_hints is not None and takes_hints:  # safe to drop before 0.5.5
            kwargs["layout_hints"] = layout_hints
        return method(kv_caches, **kwargs)

    return register_kv_caches


def load_store_op_factory(
    op_cls: type, downgrades: Downgrades, pack: Pack | None = None
) -> Callable[..., Any]:
    """``make_op(block_ids, token_ids=None, *, block_hashes=None, start=0, end=None,
    skip_first_n_tokens=0)`` building the release's ``LoadStoreOp``.

    ``block_ids`` is a flat ``list[int]`` (one KV cache group) or ``list[list[int]]``; the
    tokens go into the op's token field in the form its annotation asks for (0.3.13
    ``block_hashes``, 0.3.14 ``token_ids: list[int]``, 0.5.7rc2 ``token_bytes: bytes``)."""
    facts = init_facts(op_cls)
    names = _names(facts)
    where = downgrades.where
    found = token_field(facts)
    if found is None:
        raise UnsupportedArgumentError(
            "token_ids",
            f"{where}: no field of {facts.names} carries the tokens; please report this release",
        )
    field_name, encoding = found
    convert = _tokens_converter(encoding, pack, where) if encoding != "block_hashes" else None
    takes_skip = "skip_first_n_tokens" in names  # 0.4.1
    # 0.4.7: block_ids became list[list[int]] (one list per KV cache group); the field's
    # annotation says which form the release wants.
    annotation = (facts.annotation("block_ids") or "").replace(" ", "").lower()
    nested = annotation.startswith(("list[list", "sequence[list", "list[sequence"))

    def make_op(
        block_ids: Sequence[int] | Sequence[Sequence[int]],
        token_ids: Sequence[int] | bytes | None = None,
        *,
        block_hashes: Sequence[Any] | None = None,
        start: int = 0,
        end: int | None = None,
        skip_first_n_tokens: int = 0,
    ) -> Any:
        groups: list[list[int]]
        if block_ids and not isinstance(block_ids[0], int):
            groups = [list(g) for g in block_ids]  # type: ignore[arg-type]
        else:
            groups = [list(block_ids)]  # type: ignore[arg-type]
        if nested:
            ids: Any = groups
        elif len(groups) == 1:
            ids = groups[0]
        else:
            downgrades.refuse(ARG.block_ids)
            ids = groups[0]
        kwargs: dict[str, Any] = {"block_ids": ids}
        if convert is not None:
            if token_ids is None:
                raise TypeError("make_load_store_op(): this LMCache release needs token_ids")
            kwargs[field_name] = convert(token_ids)
            if "start" in names:
                kwargs["start"] = start
            if "end" in names:
                if end is None and isinstance(token_ids, _BYTES):
                    raise TypeError("make_load_store_op(): pass end= with packed token bytes")
                kwargs["end"] = len(token_ids) if end is None else end
        else:
            if block_hashes is None:
                raise TypeError("make_load_store_op(): LMCache 0.3.13 needs block_hashes")
            kwargs[field_name] = block_hashes
        if skip_first_n_tokens:
            if takes_skip:
                kwargs["skip_first_n_tokens"] = skip_first_n_tokens
            else:
                downgrades.refuse(ARG.skip_first_n_tokens)
        return op_cls(**kwargs)

    return make_op
