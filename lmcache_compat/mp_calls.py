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
from typing import Any

from lmcache_compat.arguments import ARG, Downgrades
from lmcache_compat.catalog import Capability as C
from lmcache_compat.errors import UnsupportedArgumentError
from lmcache_compat.locations import PACK_TOKEN_IDS
from lmcache_compat.signatures import MethodFacts, init_facts
from lmcache_compat.tokens import Encoding, key_encoding, token_field

__all__ = [
    "Pack",
    "load_store_op_factory",
    "mp_check_lookup_result",
    "mp_free_lookup_locks",
    "mp_lookup",
    "mp_register_kv_caches",
    "mp_submit",
]

Pack = Callable[[Sequence[int]], bytes]
_BYTES = (bytes, bytearray, memoryview)


# The keywords releases gained: each argument row takes its name from its capability's row.
SALT = ARG.cache_salt.argument  # Capability.MP_CACHE_SALT (0.4.4)
CONFIGS = ARG.request_configs.argument  # Capability.MP_REQUEST_CONFIGS (0.5.5)
RESERVE = ARG.reserve_last_token.argument  # Capability.MP_RESERVE_LAST_TOKEN (0.5.6)
START = ARG.start.argument  # Capability.MP_LOOKUP_START (0.5.7rc2)
RANGES = ARG.extra_ranges.argument  # Capability.MP_FREE_EXTRA_RANGES (0.5.7rc2)
GROUPS = ARG.engine_group_infos.argument  # Capability.MP_ENGINE_GROUP_INFOS (0.4.7)
HINTS = ARG.layout_hints.argument  # Capability.MP_LAYOUT_HINTS (0.5.5)


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
    """The conversion applied to the caller's token ids for a parameter of ``encoding``
    (``ARG.packed_token_ids``; Capability.MP_PACKED_TOKEN_IDS)."""
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
    names = set(facts.names)
    encoding = _token_form(facts, 1, downgrades.where)
    key = facts.params[1].name
    convert = (
        _tokens_converter(encoding, pack, downgrades.where) if encoding != "block_hashes" else None
    )
    takes_salt = SALT in names
    takes_configs = CONFIGS in names
    takes_reserve = RESERVE in names
    takes_start = START in names
    order = list(facts.names)
    if convert is not None and order[2:5] == [SALT, CONFIGS, RESERVE]:
        # 0.5.6 on: every keyword, in this order (0.5.7rc2 appends start): passed straight
        # through, positionally. Every release with cache_salt defaults it to "" (no salt).
        return _lookup_positional(
            method, encoding, pack, downgrades, with_start=order[5:6] == [START]
        )

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
                    kwargs[RESERVE] = True
                elif isinstance(token_ids, _BYTES):
                    raise TypeError("lookup(): reserve_last_token needs token ids, not bytes")
                else:  # ARG.reserve_last_token before 0.5.6: the same range, one token fewer
                    token_ids = token_ids[:-1]
            kwargs[key] = convert(token_ids)
        else:  # ARG.token_ids (Capability.MP_LOOKUP_BY_TOKEN_IDS): 0.3.13 takes block hashes
            if block_hashes is None:
                raise TypeError(
                    "lookup(): this LMCache release looks up by vLLM block hashes (token ids "
                    f"from {C.MP_LOOKUP_BY_TOKEN_IDS.since}); pass block_hashes"
                )
            if reserve_last_token:
                downgrades.refuse(ARG.reserve_by_hashes)
            kwargs[key] = block_hashes
        if cache_salt:
            if takes_salt:
                kwargs[SALT] = cache_salt
            else:
                downgrades.refuse(ARG.cache_salt)
        if request_configs:
            if takes_configs:
                kwargs[CONFIGS] = request_configs
            else:
                downgrades.refuse(ARG.request_configs)
        if start:
            if takes_start:
                kwargs[START] = start
            else:
                downgrades.refuse(ARG.start)
        return method(request_id, **kwargs)

    return lookup


def _lookup_positional(
    method: Callable[..., Any],
    encoding: Encoding,
    pack: Pack | None,
    downgrades: Downgrades,
    *,
    with_start: bool,
) -> Callable[..., Any]:
    """The per-call path for releases that take every keyword positionally (0.5.6 on): one
    type check, then the release's method. Token ids are packed with the release's codec
    where it takes bytes (0.5.7rc2); bytes are refused where it takes a list."""
    if encoding == "packed":
        packer = pack
        if packer is None:
            _tokens_converter(encoding, pack, downgrades.where)  # raises: no codec
            raise AssertionError("unreachable")

        def lookup_packed(
            request_id: str,
            token_ids: Sequence[int] | bytes | None = None,
            block_hashes: Sequence[Any] | None = None,
            *,
            cache_salt: str | None = None,
            request_configs: Mapping[str, Any] | None = None,
            reserve_last_token: bool = False,
            start: int = 0,
        ) -> Any:
            if token_ids is None:
                raise TypeError("lookup(): this LMCache release looks up by token_ids; pass them")
            packed = token_ids if type(token_ids) is bytes else packer(token_ids)
            if with_start:
                return method(
                    request_id, packed, cache_salt or "", request_configs, reserve_last_token, start
                )
            if start:
                downgrades.refuse(ARG.start)  # allowed: dropped
            return method(request_id, packed, cache_salt or "", request_configs, reserve_last_token)

        return lookup_packed

    def lookup_ids(
        request_id: str,
        token_ids: Sequence[int] | bytes | None = None,
        block_hashes: Sequence[Any] | None = None,
        *,
        cache_salt: str | None = None,
        request_configs: Mapping[str, Any] | None = None,
        reserve_last_token: bool = False,
        start: int = 0,
    ) -> Any:
        if type(token_ids) is not list and (token_ids is None or isinstance(token_ids, _BYTES)):
            raise TypeError(
                "lookup(): this LMCache release takes token ids as a list of ints; pass the ids"
            )
        if start:
            if with_start:
                return method(
                    request_id, token_ids, cache_salt or "", request_configs,
                    reserve_last_token, start,
                )  # fmt: skip
            downgrades.refuse(ARG.start)  # allowed: dropped
        return method(request_id, token_ids, cache_salt or "", request_configs, reserve_last_token)

    return lookup_ids


def mp_check_lookup_result(
    method: Callable[[str], Any],
    health: Callable[[Any], bool],
    target: object,
    failure: Callable[[str], Exception],
) -> Callable[[str], Any]:
    """``check_lookup_result(request_id)`` over the release's own, for releases whose adapter
    has a health property (``is_healthy``, Capability.MP_HEALTH_CHECK; ``health`` is that
    property's getter, read on ``target``, as the release's own callers read it).

    Those releases answer 0 when an exchange with the server failed or timed out (no reply
    within ``mq_timeout``: the server is down, or cannot decode a request of another release)
    and mark the server unhealthy. A falsy result is therefore checked against the health
    property: 0 while it says unhealthy raises ``failure(request_id)`` (an
    :class:`~lmcache_compat.errors.MPServerError`) instead of reading as zero hits. A hit, and
    ``None`` (not finished), are returned at once: health is read only for a 0.

    Releases without health (before the capability) cannot tell a lost reply from a miss: the
    adapter binds their own method (a lost reply stays ``None``, or blocks where the release
    waits without a timeout; it never becomes 0 there).
    """

    def check_lookup_result(request_id: str) -> Any:
        result = method(request_id)
        if result or result is None:
            return result
        if health(target):
            return result
        raise failure(request_id)

    return check_lookup_result


def mp_free_lookup_locks(
    method: Callable[..., Any],
    facts: MethodFacts,
    downgrades: Downgrades,
    pack: Pack | None = None,
) -> Callable[..., Any]:
    """``free_lookup_locks(token_ids, start, end, request_id, *, cache_salt=None,
    request_configs=None, extra_ranges=())`` over the release's (0.4.1+) method."""
    names = set(facts.names)
    convert = _tokens_converter(_token_form(facts, 0, downgrades.where), pack, downgrades.where)
    takes_salt = SALT in names
    takes_configs = CONFIGS in names
    takes_ranges = RANGES in names

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
                kwargs[SALT] = cache_salt
            else:
                downgrades.refuse(ARG.cache_salt)
        if request_configs:
            if takes_configs:
                kwargs[CONFIGS] = request_configs
            else:
                downgrades.refuse(ARG.request_configs)
        key = convert(token_ids)
        ranges = tuple(extra_ranges)
        if ranges and takes_ranges:
            kwargs[RANGES] = ranges
            ranges = ()
        result = method(key, start, end, request_id, **kwargs)
        for lo, hi in ranges:  # ARG.extra_ranges before 0.5.7rc2: one call per range
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
    names = set(facts.names)
    # the batched forms take one value per request, under plural names
    salt_name = "cache_salts" if batched else SALT
    configs_name = "request_configs_list" if batched else CONFIGS
    takes_salt = salt_name in names  # 0.4.4
    takes_configs = configs_name in names  # 0.5.5
    order = list(facts.names)
    if not batched and order[3:5] == [SALT, CONFIGS]:
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
    names = set(facts.names)
    takes_groups = GROUPS in names
    takes_hints = HINTS in names

    def register_kv_caches(
        kv_caches: Any,
        *,
        engine_group_infos: Collection[Any] | None = None,
        layout_hints: Any = None,
    ) -> Any:
        kwargs: dict[str, Any] = {}
        if engine_group_infos:
            if takes_groups:
                kwargs[GROUPS] = engine_group_infos
            elif len(engine_group_infos) > 1:
                downgrades.refuse(ARG.engine_group_infos)
        if layout_hints is not None and takes_hints:  # ARG.layout_hints: dropped before 0.5.5
            kwargs[HINTS] = layout_hints
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
    names = set(facts.names)
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
                raise TypeError("make_load_store_op(): this LMCache release needs block_hashes")
            kwargs[field_name] = block_hashes
        if skip_first_n_tokens:
            if takes_skip:
                kwargs["skip_first_n_tokens"] = skip_first_n_tokens
            else:
                downgrades.refuse(ARG.skip_first_n_tokens)
        return op_cls(**kwargs)

    return make_op
