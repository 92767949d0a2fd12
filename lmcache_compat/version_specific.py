"""Version-specific implementations: every place where a call differs by LMCache release.

Everything release-dependent about *arguments* lives here, one function per call, each branch
commented with the release and the change it tracks. Each decision is read from the release's
own signature (:mod:`lmcache_compat.signatures`, cached per function) rather than from a version
number, because the signatures tell the truth; the functions run once, at adapter construction,
and return the closure the adapter binds. The only per-call work left is looking at the caller's
argument values (a non-empty ``cache_salt`` is refused where it would be dropped).

What happens to each argument on a release that lacks it is the :data:`ARGUMENTS` table
(``on_older``): ``map`` (passed in the release's own form), ``emulate`` (same result another
way), ``drop`` (safe to leave out) or ``error`` (:class:`UnsupportedArgumentError` unless the
caller allows the downgrade with ``allow={"name"}``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from lmcache_compat.errors import UnsupportedArgumentError
from lmcache_compat.signatures import field_annotation, init_facts, signature_facts

__all__ = [
    "ARGUMENTS",
    "ArgumentSpec",
    "Downgrades",
    "MPConfig",
    "build_parallel_strategy",
    "engine_get_or_create",
    "engine_is_healthy",
    "engine_lookup",
    "engine_prefetch",
    "engine_unpin",
    "load_store_op_factory",
    "mp_free_lookup_locks",
    "mp_init_call",
    "mp_lookup",
    "mp_register_kv_caches",
    "mp_submit",
    "render_arguments_markdown",
]


@dataclass(frozen=True)
class ArgumentSpec:
    """One row of the argument table: what a release lacking ``argument`` gets."""

    argument: str
    member: str
    since: str
    on_older: Literal["map", "emulate", "drop", "error"]
    detail: str


ARGUMENTS: tuple[ArgumentSpec, ...] = (
    ArgumentSpec(
        "server_urls",
        "LMCacheMPSchedulerAdapter.__init__",
        "0.5.0",
        "map",
        "one URL is passed as the string server_url (never split into characters)",
    ),
    ArgumentSpec(
        "server_urls (several)",
        "LMCacheMPSchedulerAdapter.__init__",
        "0.5.0",
        "error",
        "one server only; allow={'server_urls'} connects to the first URL",
    ),
    ArgumentSpec(
        "tp_size",
        "LMCacheMP*Adapter.__init__",
        "0.4.1",
        "error",
        "only with use_mla and tp_size > 1 (it keys MLA caches); otherwise dropped",
    ),
    ArgumentSpec(
        "mq_timeout",
        "LMCacheMP*Adapter.__init__",
        "0.4.2",
        "drop",
        "timing only: the release uses its built-in behaviour",
    ),
    ArgumentSpec(
        "heartbeat_interval",
        "LMCacheMP*Adapter.__init__",
        "0.4.2",
        "drop",
        "timing only: the release has no heartbeat",
    ),
    ArgumentSpec(
        "parallel_strategy",
        "LMCacheMP*Adapter.__init__",
        "0.4.4",
        "map",
        "world_size/kv_rank are passed (with MLA: divided by tp_size, as vLLM did)",
    ),
    ArgumentSpec(
        "pp_size",
        "ParallelStrategy",
        "0.4.4",
        "error",
        "only when pp_size > 1: older releases have no pipeline-parallel layout",
    ),
    ArgumentSpec(
        "dcp_size",
        "ParallelStrategy",
        "0.5.5",
        "error",
        "only when dcp_size > 1: older releases have no decode-context parallelism",
    ),
    ArgumentSpec(
        "extra_config",
        "LMCacheMP*Adapter.__init__",
        "0.4.6",
        "error",
        "only when non-empty: the configuration would be ignored",
    ),
    ArgumentSpec(
        "enable_kv_events",
        "LMCacheMPWorkerAdapter.__init__",
        "0.5.6",
        "drop",
        "events are unavailable; get_kv_events() returns []",
    ),
    ArgumentSpec(
        "token_ids",
        "LMCacheMPSchedulerAdapter.maybe_submit_lookup_request",
        "0.3.14",
        "map",
        "0.3.13 looks up by block_hashes: the caller's are passed",
    ),
    ArgumentSpec(
        "cache_salt",
        "LMCacheMP*Adapter lookups, lock frees, submits",
        "0.4.4",
        "error",
        "only when non-empty: dropping it would mix tenants' caches",
    ),
    ArgumentSpec(
        "request_configs",
        "LMCacheMP*Adapter lookups, lock frees, submits",
        "0.5.5",
        "error",
        "only when non-empty: the per-request configuration would be ignored",
    ),
    ArgumentSpec(
        "reserve_last_token",
        "LMCacheMPSchedulerAdapter.maybe_submit_lookup_request",
        "0.5.6",
        "emulate",
        "token_ids[:-1] is looked up: the same aligned range (0.3.13: error)",
    ),
    ArgumentSpec(
        "engine_group_infos",
        "LMCacheMPWorkerAdapter.register_kv_caches",
        "0.4.7",
        "error",
        "only with more than one KV cache group; one group is dropped",
    ),
    ArgumentSpec(
        "layout_hints",
        "LMCacheMPWorkerAdapter.register_kv_caches",
        "0.5.5",
        "drop",
        "hints only: the release infers the layout",
    ),
    ArgumentSpec(
        "skip_first_n_tokens",
        "LoadStoreOp",
        "0.4.1",
        "error",
        "only when non-zero: the skipped tokens would be stored or loaded",
    ),
    ArgumentSpec(
        "block_ids",
        "LoadStoreOp",
        "0.4.7",
        "map",
        "one KV cache group: flat list[int] <-> [[...]]; several groups: error",
    ),
    ArgumentSpec(
        "lookup_id",
        "LMCacheEngine.lookup",
        "0.3.4",
        "map",
        "request_id= on 0.3.3; before: dropped when pin=False, error when pin=True",
    ),
    ArgumentSpec(
        "request_configs (engine)",
        "LMCacheEngine.lookup/prefetch",
        "0.3.4",
        "error",
        "only when non-empty",
    ),
    ArgumentSpec(
        "unpin",
        "LMCacheEngine.lookup_unpin",
        "0.3.9",
        "map",
        "lookup_unpin([id]) on 0.3.3-0.3.7; a no-op before 0.3.3 (nothing is pinned by id)",
    ),
    ArgumentSpec(
        "prefetch",
        "LMCacheEngine.async_lookup_and_prefetch",
        "0.3.6",
        "map",
        "prefetch(tokens) on 0.3.0-0.3.5 (synchronous; lookup_id unused)",
    ),
    ArgumentSpec(
        "broadcast_fn",
        "LMCacheEngineBuilder.get_or_create",
        "0.3.4",
        "map",
        "required from 0.3.5: single-process defaults when not given; given to 0.3.0-0.3.3: error",
    ),
)


def render_arguments_markdown() -> str:
    """The argument table as Markdown (the README's copy is generated from it)."""
    lines = [
        "| argument | member | since | on an older release | detail |",
        "|---|---|---|---|---|",
    ]
    for spec in ARGUMENTS:
        lines.append(
            f"| `{spec.argument}` | `{spec.member}` | {spec.since} | {spec.on_older} | "
            f"{spec.detail} |"
        )
    return "\n".join(lines) + "\n"


class Downgrades:
    """The caller's permission to drop arguments that change meaning, and the error if not."""

    def __init__(self, allow: Iterable[str] | bool, where: str, version: str | None) -> None:
        self.all = allow is True
        self.allowed = frozenset() if isinstance(allow, bool) else frozenset(allow)
        self.where = where
        self.version = version

    def at(self, where: str) -> Downgrades:
        """The same permission, for another member (error messages name it)."""
        return Downgrades(True if self.all else self.allowed, where, self.version)

    def keep(
        self,
        kwargs: dict[str, Any],
        name: str,
        value: Any,
        *,
        takes: bool,
        since: str,
        why: str,
        argument: str | None = None,
    ) -> None:
        """Pass ``name=value`` where the release takes it; otherwise refuse (or, if allowed,
        leave it out)."""
        if takes:
            kwargs[name] = value
        else:
            self.refuse(argument or name, since, why)

    def refuse(self, argument: str, since: str, why: str) -> None:
        """Raise unless ``argument`` may be downgraded (then the caller drops or adapts it)."""
        if self.all or argument in self.allowed:
            return
        raise UnsupportedArgumentError(
            argument,
            f"{self.where} in LMCache {self.version or 'unknown'} cannot take {argument!r} "
            f"(first release that can: {since}); {why}.\n"
            f"HINT: pip install -U 'lmcache>={since}', or pass allow={{{argument!r}}} to "
            "accept the downgrade",
        )


def _names(facts: Any) -> set[str]:
    return {p.name for p in facts.params or ()}


# --- multi-process adapters: construction ---------------------------------------------------


@dataclass(frozen=True)
class MPConfig:
    """The caller's facts for building a multi-process adapter, whatever the release.

    ``server_urls`` is a URL string or a sequence of them (a string is one URL, never a
    sequence of characters). ``world_size``/``rank`` are vLLM's; the MLA adjustment older
    releases need is done here.
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

    def __post_init__(self) -> None:
        urls = self.server_urls
        if isinstance(urls, (bytes, bytearray)):
            raise TypeError("server_urls: give str URLs, not bytes")
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


def build_parallel_strategy(ps_cls: type, config: MPConfig, downgrades: Downgrades) -> Any:
    """A ``ParallelStrategy`` of the release's own field set, built by field name (positional
    order differs between releases)."""
    names = _names(init_facts(ps_cls))
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
        downgrades.refuse("dcp_size", "0.5.5", "this release has no decode-context parallelism")
    unknown = {
        p.name
        for p in init_facts(ps_cls).params or ()
        if not p.has_default and p.name not in values
    }
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
    ``+enable_kv_events``. All are passed by name, so positional order never matters.
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
            downgrades.refuse("server_urls", "0.5.0", "this release talks to one LMCache server")
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
            downgrades.refuse("pp_size", "0.4.4", "this release has no pipeline-parallel layout")
    if "world_size" in names and "parallel_strategy" in names:  # 0.4.4 passes both
        kwargs["world_size"] = config.kv_world_size
        kwargs["kv_rank"] = config.kv_rank
    if "tp_size" in names:  # 0.4.1-0.4.4
        kwargs["tp_size"] = config.tp_size
    elif "parallel_strategy" not in names and config.use_mla and config.tp_size > 1:
        downgrades.refuse("tp_size", "0.4.1", "MLA caches are keyed by tp_size from 0.4.1 on")
    for name in ("mq_timeout", "heartbeat_interval"):  # 0.4.2; safe to drop before
        value = getattr(config, name)
        if value is not None and name in names:
            kwargs[name] = value
    if config.extra_config:
        if "extra_config" in names:  # 0.4.6
            kwargs["extra_config"] = dict(config.extra_config)
        else:
            downgrades.refuse("extra_config", "0.4.6", "the configuration would be ignored")
    if config.enable_kv_events and "enable_kv_events" in names:  # 0.5.6 worker; else dropped
        kwargs["enable_kv_events"] = True
    required = {
        p.name
        for p in facts.params or ()
        if not p.has_default and p.kind not in {"var_keyword", "var_positional"}
    }
    unknown = required - set(kwargs)
    if unknown:
        raise UnsupportedArgumentError(
            sorted(unknown)[0],
            f"{cls.__qualname__}.__init__ in LMCache {downgrades.version or 'unknown'} requires "
            f"{sorted(unknown)}, which lmcache-compat does not know; please report this release",
        )
    return {k: v for k, v in kwargs.items() if k in names or facts.params is None}


# --- multi-process adapters: calls ----------------------------------------------------------


def mp_lookup(
    method: Callable[..., Any], downgrades: Downgrades, *, signature_of: Any = None
) -> Callable[..., Any]:
    """``lookup(request_id, token_ids=None, block_hashes=None, *, cache_salt=None,
    request_configs=None, reserve_last_token=False)`` over the release's
    ``maybe_submit_lookup_request``. (``signature_of``: read the signature from this function
    instead of ``method``; the real-import tier binds recorded calls that way.)"""
    facts = signature_facts(signature_of or method)
    names = _names(facts)
    by_tokens = "token_ids" in names  # 0.3.14: token ids instead of vLLM block hashes
    takes_salt = "cache_salt" in names  # 0.4.4
    takes_configs = "request_configs" in names  # 0.5.5
    takes_reserve = "reserve_last_token" in names  # 0.5.6
    order = [p.name for p in facts.params or ()]
    if order[:5] == [
        "request_id",
        "token_ids",
        "cache_salt",
        "request_configs",
        "reserve_last_token",
    ]:
        # 0.5.6 takes everything, in this order: pass straight through. Every release with
        # cache_salt defaults it to "" (no salt), which is what None means here.
        def lookup_newest(
            request_id: str,
            token_ids: Sequence[int] | None = None,
            block_hashes: Sequence[Any] | None = None,
            *,
            cache_salt: str | None = None,
            request_configs: Mapping[str, Any] | None = None,
            reserve_last_token: bool = False,
        ) -> Any:
            if token_ids is None:
                raise TypeError("lookup(): this LMCache release looks up by token_ids; pass them")
            return method(
                request_id, token_ids, cache_salt or "", request_configs, reserve_last_token
            )

        return lookup_newest

    def lookup(
        request_id: str,
        token_ids: Sequence[int] | None = None,
        block_hashes: Sequence[Any] | None = None,
        *,
        cache_salt: str | None = None,
        request_configs: Mapping[str, Any] | None = None,
        reserve_last_token: bool = False,
    ) -> Any:
        kwargs: dict[str, Any] = {}
        if by_tokens:
            if token_ids is None:
                raise TypeError("lookup(): this LMCache release looks up by token_ids; pass them")
            if reserve_last_token:
                if takes_reserve:
                    kwargs["reserve_last_token"] = True
                else:  # before 0.5.6: the same aligned range, from one token fewer
                    token_ids = token_ids[:-1]
            kwargs["token_ids"] = token_ids
        else:
            if block_hashes is None:
                raise TypeError(
                    "lookup(): LMCache 0.3.13 looks up by vLLM block hashes; pass block_hashes"
                )
            if reserve_last_token:
                downgrades.refuse(
                    "reserve_last_token",
                    "0.5.6",
                    "block-hash lookups cannot leave out the last token",
                )
            kwargs["block_hashes"] = block_hashes
        if cache_salt:
            downgrades.keep(
                kwargs,
                "cache_salt",
                cache_salt,
                takes=takes_salt,
                since="0.4.4",
                why="dropping it would mix tenants' caches",
            )
        if request_configs:
            downgrades.keep(
                kwargs,
                "request_configs",
                request_configs,
                takes=takes_configs,
                since="0.5.5",
                why="the configuration would be ignored",
            )
        return method(request_id, **kwargs)

    return lookup


def mp_free_lookup_locks(
    method: Callable[..., Any], downgrades: Downgrades, *, signature_of: Any = None
) -> Callable[..., Any]:
    """``free_lookup_locks(token_ids, start, end, request_id, *, cache_salt=None,
    request_configs=None)`` over the release's (0.4.1+) method."""
    names = _names(signature_facts(signature_of or method))
    takes_salt = "cache_salt" in names  # 0.4.4
    takes_configs = "request_configs" in names  # 0.5.5

    def free_lookup_locks(
        token_ids: Sequence[int],
        start: int,
        end: int,
        request_id: str,
        *,
        cache_salt: str | None = None,
        request_configs: Mapping[str, Any] | None = None,
    ) -> Any:
        kwargs: dict[str, Any] = {}
        if cache_salt:
            downgrades.keep(
                kwargs,
                "cache_salt",
                cache_salt,
                takes=takes_salt,
                since="0.4.4",
                why="the locks of the salted entries could not be found",
            )
        if request_configs:
            downgrades.keep(
                kwargs,
                "request_configs",
                request_configs,
                takes=takes_configs,
                since="0.5.5",
                why="the configuration would be ignored",
            )
        return method(token_ids, start, end, request_id, **kwargs)

    return free_lookup_locks


def mp_submit(
    method: Callable[..., Any],
    downgrades: Downgrades,
    *,
    batched: bool,
    signature_of: Any = None,
) -> Callable[..., Any]:
    """``submit_{store,retrieve}_request(request_id, op, event, *, cache_salt=None,
    request_configs=None)`` and the batched forms (``cache_salts``, ``request_configs_list``)."""
    facts = signature_facts(signature_of or method)
    names = _names(facts)
    salt_name = "cache_salts" if batched else "cache_salt"
    configs_name = "request_configs_list" if batched else "request_configs"
    takes_salt = salt_name in names  # 0.4.4
    takes_configs = configs_name in names  # 0.5.5
    order = [p.name for p in facts.params or ()]
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

    def submit(first: Any, ops: Any, event: Any, *, salt: Any = None, configs: Any = None) -> Any:
        kwargs: dict[str, Any] = {}
        if salt and (any(salt) if batched else True):
            downgrades.keep(
                kwargs,
                salt_name,
                salt,
                takes=takes_salt,
                since="0.4.4",
                why="dropping it would mix tenants' caches",
                argument="cache_salt",
            )
        if configs and (any(configs) if batched else True):
            downgrades.keep(
                kwargs,
                configs_name,
                configs,
                takes=takes_configs,
                since="0.5.5",
                why="the configuration would be ignored",
                argument="request_configs",
            )
        return method(first, ops, event, **kwargs)

    if batched:

        def batched_submit(
            request_ids: Sequence[str],
            ops: Sequence[Any],
            event: Any,
            *,
            cache_salts: Sequence[str | None] | None = None,
            request_configs_list: Sequence[Mapping[str, Any] | None] | None = None,
        ) -> Any:
            return submit(request_ids, ops, event, salt=cache_salts, configs=request_configs_list)

        return batched_submit

    def single_submit(
        request_id: str,
        op: Any,
        event: Any,
        *,
        cache_salt: str | None = None,
        request_configs: Mapping[str, Any] | None = None,
    ) -> Any:
        return submit(request_id, op, event, salt=cache_salt, configs=request_configs)

    return single_submit


def mp_register_kv_caches(
    method: Callable[..., Any], downgrades: Downgrades, *, signature_of: Any = None
) -> Callable[..., Any]:
    """``register_kv_caches(kv_caches, *, engine_group_infos=None, layout_hints=None)``."""
    names = _names(signature_facts(signature_of or method))
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
                downgrades.refuse(
                    "engine_group_infos", "0.4.7", "this release handles one KV cache group only"
                )
        if layout_hints is not None and takes_hints:  # safe to drop before 0.5.5
            kwargs["layout_hints"] = layout_hints
        return method(kv_caches, **kwargs)

    return register_kv_caches


def load_store_op_factory(op_cls: type, downgrades: Downgrades) -> Callable[..., Any]:
    """``make_op(block_ids, token_ids=None, *, block_hashes=None, start=0, end=None,
    skip_first_n_tokens=0)`` building the release's ``LoadStoreOp``.

    ``block_ids`` is a flat ``list[int]`` (one KV cache group) or ``list[list[int]]``."""
    names = _names(init_facts(op_cls))
    by_tokens = "token_ids" in names  # 0.3.14 (0.3.13: block_hashes)
    takes_skip = "skip_first_n_tokens" in names  # 0.4.1
    # 0.4.7: block_ids became list[list[int]] (one list per KV cache group); the field's
    # annotation says which form the release wants.
    annotation = (field_annotation(op_cls, "block_ids") or "").replace(" ", "").lower()
    nested = annotation.startswith(("list[list", "sequence[list", "list[sequence"))

    def make_op(
        block_ids: Sequence[int] | Sequence[Sequence[int]],
        token_ids: Sequence[int] | None = None,
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
            downgrades.refuse("block_ids", "0.4.7", "this release has one KV cache group only")
            ids = groups[0]
        kwargs: dict[str, Any] = {"block_ids": ids}
        if by_tokens:
            if token_ids is None:
                raise TypeError("make_load_store_op(): this LMCache release needs token_ids")
            kwargs["token_ids"] = token_ids
            if "start" in names:
                kwargs["start"] = start
            if "end" in names:
                kwargs["end"] = len(token_ids) if end is None else end
        else:
            if block_hashes is None:
                raise TypeError("make_load_store_op(): LMCache 0.3.13 needs block_hashes")
            kwargs["block_hashes"] = block_hashes
        if skip_first_n_tokens:
            downgrades.keep(
                kwargs,
                "skip_first_n_tokens",
                skip_first_n_tokens,
                takes=takes_skip,
                since="0.4.1",
                why="the skipped tokens would be stored or loaded",
            )
        return op_cls(**kwargs)

    return make_op


# --- LMCacheEngine ---------------------------------------------------------------------------


def engine_lookup(method: Callable[..., Any], downgrades: Downgrades) -> Callable[..., Any]:
    """``lookup(tokens, *, lookup_id=None, pin=False, request_configs=None, **kwargs)``."""
    names = _names(signature_facts(method))
    # 0.3.4: lookup_id=; 0.3.3: request_id=; 0.3.0-0.3.2: no id at all
    id_name = (
        "lookup_id" if "lookup_id" in names else "request_id" if "request_id" in names else None
    )
    takes_configs = "request_configs" in names  # 0.3.4
    order = [p.name for p in signature_facts(method).params or ()]
    if order[:7] == [
        "tokens",
        "hashes",
        "offsets",
        "search_range",
        "lookup_id",
        "pin",
        "request_configs",
    ]:
        # 0.3.6 on: everything in this order, defaults None: pass straight through
        def lookup_newest(
            tokens: Any,
            *,
            lookup_id: str | None = None,
            pin: bool = False,
            request_configs: Mapping[str, Any] | None = None,
            **kwargs: Any,
        ) -> Any:
            if kwargs:
                return method(
                    tokens, lookup_id=lookup_id, pin=pin, request_configs=request_configs, **kwargs
                )
            return method(tokens, None, None, None, lookup_id, pin, request_configs)

        return lookup_newest

    def lookup(
        tokens: Any,
        *,
        lookup_id: str | None = None,
        pin: bool = False,
        request_configs: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> Any:
        if lookup_id is not None:
            if id_name is not None:
                kwargs[id_name] = lookup_id
            elif pin:
                downgrades.refuse("lookup_id", "0.3.3", "a pinned lookup could never be unpinned")
        if pin:
            kwargs["pin"] = True
        if request_configs:
            downgrades.keep(
                kwargs,
                "request_configs",
                request_configs,
                takes=takes_configs,
                since="0.3.4",
                why="the configuration would be ignored",
            )
        return method(tokens, **kwargs)

    return lookup


def engine_unpin(method: Callable[..., Any] | None) -> Callable[[str], Any]:
    """``unpin(lookup_id)`` over ``lookup_unpin``: one id from 0.3.9, a list of ids on
    0.3.3-0.3.7 (``lookup_ids``/``request_ids``), nothing to unpin before 0.3.3."""
    if method is None:

        def unpin_nothing(lookup_id: str) -> None:
            """Before 0.3.3 nothing is pinned by id."""

        return unpin_nothing
    names = _names(signature_facts(method))
    if "lookup_id" in names:  # 0.3.9: one id
        return method
    target = method

    def unpin(lookup_id: str) -> Any:  # 0.3.3-0.3.7: a list of ids
        return target([lookup_id])

    return unpin


def engine_prefetch(
    async_method: Callable[..., Any] | None,
    sync_method: Callable[..., Any] | None,
    downgrades: Downgrades,
) -> Callable[..., Any] | None:
    """``prefetch(tokens, *, lookup_id, **kwargs)``: ``async_lookup_and_prefetch`` from 0.3.6,
    the synchronous ``prefetch(tokens, mask)`` of 0.3.0-0.3.5 before."""
    if async_method is not None:
        target = async_method

        def prefetch_async(tokens: Any, *, lookup_id: str, **kwargs: Any) -> Any:
            return target(lookup_id=lookup_id, tokens=tokens, **kwargs)

        return prefetch_async
    if sync_method is None:
        return None
    names = _names(signature_facts(sync_method))
    takes_configs = "request_configs" in names  # 0.3.4
    old = sync_method

    def prefetch_sync(
        tokens: Any,
        *,
        lookup_id: str | None = None,
        request_configs: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> Any:
        if request_configs:
            downgrades.keep(
                kwargs,
                "request_configs",
                request_configs,
                takes=takes_configs,
                since="0.3.4",
                why="the configuration would be ignored",
            )
        return old(tokens, **kwargs)

    return prefetch_sync


def engine_is_healthy(
    is_healthy: Callable[[], Any] | None, health: Callable[[], Any] | None
) -> Callable[[], bool]:
    """``is_healthy()``: the release's own from 0.3.13; ``health() == 0`` on 0.3.4-0.3.12
    ("0 if healthy, otherwise the error code"); unknown before 0.3.4 (documented: True)."""
    if is_healthy is not None:
        own = is_healthy

        def healthy() -> bool:
            return bool(own())

        return healthy
    if health is not None:
        code = health

        def healthy_by_code() -> bool:
            return bool(code() == 0)

        return healthy_by_code

    def unknown() -> bool:
        return True

    return unknown


def _no_broadcast(tensor: Any, src: int) -> None:
    """Single-process ``broadcast_fn``: there is no other rank to send to."""


def _same_object(obj: Any, src: int) -> Any:
    """Single-process ``broadcast_object_fn``: every rank already has the object."""
    return obj


def engine_get_or_create(method: Callable[..., Any], downgrades: Downgrades) -> Callable[..., Any]:
    """``get_or_create(instance_id, config, metadata, gpu_connector, *, broadcast_fn=None,
    broadcast_object_fn=None)`` over ``LMCacheEngineBuilder.get_or_create``: the broadcast
    functions appeared in 0.3.4 (optional) and are required from 0.3.5; where required and not
    given, single-process defaults are passed (correct for one rank only)."""
    facts = signature_facts(method)
    names = _names(facts)
    takes = "broadcast_fn" in names  # 0.3.4
    required = takes and any(
        p.name == "broadcast_fn" and not p.has_default for p in facts.params or ()
    )  # 0.3.5

    def get_or_create(
        instance_id: str,
        config: Any,
        metadata: Any,
        gpu_connector: Any,
        *,
        broadcast_fn: Callable[[Any, int], None] | None = None,
        broadcast_object_fn: Callable[[Any, int], Any] | None = None,
        **kwargs: Any,
    ) -> Any:
        if takes:
            if broadcast_fn is not None or required:
                kwargs["broadcast_fn"] = broadcast_fn or _no_broadcast
            if broadcast_object_fn is not None or required:
                kwargs["broadcast_object_fn"] = broadcast_object_fn or _same_object
        elif broadcast_fn is not None or broadcast_object_fn is not None:
            downgrades.refuse(
                "broadcast_fn", "0.3.4", "other ranks would not receive the broadcasts"
            )
        return method(instance_id, config, metadata, gpu_connector, **kwargs)

    return get_or_create
