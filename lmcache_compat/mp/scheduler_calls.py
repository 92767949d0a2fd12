"""How each multi-process scheduler call is made on a given release: pure functions of its facts.

Each ``mp_*`` function takes the release's own method and its
:class:`~lmcache_compat.core.signatures.MethodFacts`, decides everything once from them (never from
a
version number: the signatures and annotations tell the truth), and returns the closure the
adapter binds. The only per-call work left is looking at the caller's argument values (a
non-empty ``cache_salt`` is refused where it would be dropped). What happens to each argument
on a release that lacks it is a row of :mod:`lmcache_compat.core.arguments` (``ARG.x``). The
worker's
calls are in :mod:`lmcache_compat.mp.worker_calls`.

Token ids take three forms (:mod:`lmcache_compat.core.tokens`): 0.3.13 block hashes, 0.3.14 a
``list[int]``, 0.5.7rc2 ``bytes`` packed by the release's own ``pack_token_ids``. Callers always
pass a sequence of ints (or, for a release that takes bytes, the packed bytes themselves).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from lmcache_compat.core.arguments import ARG, Downgrades
from lmcache_compat.core.catalog import Capability as C
from lmcache_compat.core.signatures import MethodFacts
from lmcache_compat.core.tokens import BYTES_TYPES, Encoding, Pack, token_form, tokens_converter

__all__ = [
    "CONFIGS",
    "SALT",
    "mp_check_lookup_result",
    "mp_free_lookup_locks",
    "mp_lookup",
]

# The keywords releases gained: each argument row takes its name from its capability's row.
SALT = ARG.cache_salt.argument  # Capability.MP_CACHE_SALT (0.4.4)
CONFIGS = ARG.request_configs.argument  # Capability.MP_REQUEST_CONFIGS (0.5.5)
RESERVE = ARG.reserve_last_token.argument  # Capability.MP_RESERVE_LAST_TOKEN (0.5.6)
START = ARG.start.argument  # Capability.MP_LOOKUP_START (0.5.7rc2)
RANGES = ARG.extra_ranges.argument  # Capability.MP_FREE_EXTRA_RANGES (0.5.7rc2)


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
    encoding = token_form(facts, 1, downgrades.where)
    key = facts.params[1].name
    convert = (
        tokens_converter(encoding, pack, downgrades.where) if encoding != "block_hashes" else None
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
                elif isinstance(token_ids, BYTES_TYPES):
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
        packer = tokens_converter(encoding, pack, downgrades.where)  # raises without a codec

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
            packed = packer(token_ids)
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
        if type(token_ids) is not list and (
            token_ids is None or isinstance(token_ids, BYTES_TYPES)
        ):
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
    convert = tokens_converter(token_form(facts, 0, downgrades.where), pack, downgrades.where)
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
