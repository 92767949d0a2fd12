"""How each multi-process scheduler call is made on a given release: pure functions of its facts.

Each function takes the release's own method and its
:class:`~lmcache_compat.core.signatures.MethodFacts`, decides everything once (never from a
version number: the signatures and annotations tell the truth), and returns the closure the
adapter binds. Every optional argument goes through its row of
:mod:`lmcache_compat.core.arguments` (:func:`~lmcache_compat.core.arguments.apply`); the only
per-call work left is the caller's values. The worker's calls are in
:mod:`lmcache_compat.mp.worker_calls`.

Token ids take three forms (:mod:`lmcache_compat.core.tokens`): 0.3.13 block hashes, 0.3.14 a
``list[int]``, 0.5.7rc2 ``bytes`` packed by the release's own ``pack_token_ids``. Callers pass
a sequence of ints (or, for a release that takes bytes, any bytes-like object already packed).
Parameters are passed by keyword unless the signature guarantees their positions.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from lmcache_compat.core.arguments import ARG, Applied, Downgrades, Put, apply
from lmcache_compat.core.catalog import Capability as C
from lmcache_compat.core.signatures import MethodFacts
from lmcache_compat.core.tokens import (
    BYTES_TYPES,
    Pack,
    TokenParameter,
    token_parameter,
    tokens_converter,
)

__all__ = ["CONFIGS", "SALT", "check_lookup_result_call", "free_lookup_locks_call", "lookup_call"]

# The keywords releases gained: each argument row takes its name from its capability's row.
SALT = ARG.cache_salt.argument  # Capability.MP_CACHE_SALT (0.4.4)
CONFIGS = ARG.request_configs.argument  # Capability.MP_REQUEST_CONFIGS (0.5.5)
RESERVE = ARG.reserve_last_token.argument  # Capability.MP_RESERVE_LAST_TOKEN (0.5.6)
START = ARG.start.argument  # Capability.MP_LOOKUP_START (0.5.7rc2)
RANGES = ARG.extra_ranges.argument  # Capability.MP_FREE_EXTRA_RANGES (0.5.7rc2)
#: The request id's parameter name (every release), and the token parameter's documented name.
REQUEST = "request_id"


def _always(value: Any) -> bool:
    return True


def _passed(steps: Sequence[Applied]) -> list[str]:
    """The release's keywords that these argument steps fill."""
    return [step.keyword for step in steps if step.takes]


def _request_parameter(facts: MethodFacts) -> str:
    return REQUEST if facts.parameter(REQUEST) is not None else facts.params[0].name


def _tokens_step(
    facts: MethodFacts,
    downgrades: Downgrades,
    found: TokenParameter,
    convert: Callable[[Any], Any] | None,
) -> Applied:
    """The token parameter's row: packed or a list of ids (``ARG.packed_token_ids``), or the
    caller's block hashes on releases keyed by them (``ARG.token_ids``)."""
    row = ARG.token_ids if convert is None else ARG.packed_token_ids
    return apply(row, facts, downgrades, keyword=found.name, given=_always, convert=convert)


def _trim_last_token(key: str) -> Callable[[dict[str, Any], Any], None]:
    """``ARG.reserve_last_token`` before 0.5.6: the lookup of ``token_ids[:-1]`` covers the
    same aligned range the release's own ``reserve_last_token`` would."""

    def trim(kwargs: dict[str, Any], reserve: Any) -> None:
        if not reserve:
            return
        tokens = kwargs[key]
        if isinstance(tokens, BYTES_TYPES):
            raise TypeError("lookup(): reserve_last_token needs token ids, not bytes")
        kwargs[key] = tokens[:-1]

    return trim


def lookup_call(
    method: Callable[..., Any],
    facts: MethodFacts,
    downgrades: Downgrades,
    pack: Pack | None,
    missing_pack: str,
) -> Callable[..., Any]:
    """``lookup(request_id, token_ids=None, block_hashes=None, *, cache_salt=None,
    request_configs=None, reserve_last_token=False, start=0)`` over the release's
    ``maybe_submit_lookup_request``.

    Returns what the release returns: ``None`` before 0.5.7rc2 (a lookup may or may not have
    gone out), from 0.5.7rc2 a ``bool`` (whether a LOOKUP went out).
    """
    where = downgrades.where
    found = _token_parameter(facts, where)
    convert = tokens_converter(found, pack, where, missing_pack)
    request = _request_parameter(facts)
    key = found.name
    tokens = _tokens_step(facts, downgrades, found, convert)
    salt = apply(ARG.cache_salt, facts, downgrades)
    configs = apply(ARG.request_configs, facts, downgrades)
    start = apply(ARG.start, facts, downgrades)
    if convert is None:  # 0.3.13, keyed by block hashes: the last token cannot be left out
        reserve = apply(ARG.reserve_by_hashes, facts, downgrades)
    else:
        reserve = apply(ARG.reserve_last_token, facts, downgrades, emulate=_trim_last_token(key))
    steps = (salt, configs, start, reserve)
    downgrades.refuse_unknown_required(facts, [request, key, *_passed(steps)])
    if convert is not None and salt.takes and configs.takes and reserve.takes:
        ready = bytes if found.encoding == "packed" else list  # passed without a conversion
        return _lookup_every_keyword(method, facts, (request, key), (ready, convert), start)
    return _lookup_step_by_step(method, (request, key), convert is not None, tokens, steps)


def _lookup_step_by_step(
    method: Callable[..., Any],
    names: tuple[str, str],
    by_tokens: bool,
    tokens: Applied,
    steps: tuple[Applied, Applied, Applied, Applied],
) -> Callable[..., Any]:
    """The per-call path for a release that lacks a keyword (before 0.5.6): each argument's
    step (pass, emulate, refuse or drop) in turn, then the method by keyword. ``by_tokens``:
    the release looks up by token ids (0.3.14 on), else by vLLM block hashes (0.3.13)."""
    request, key = names
    salt, configs, start, reserve = steps
    start_step = start.put

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
        kwargs: dict[str, Any] = {request: request_id}
        if by_tokens:  # keyed by the request's tokens (0.3.14 on)
            if token_ids is None:
                raise TypeError("lookup(): this LMCache release looks up by token_ids; pass them")
            kwargs[key] = token_ids
            reserve.put(kwargs, reserve_last_token)  # before conversion: it trims ids
            tokens.put(kwargs, kwargs[key])
        else:  # ARG.token_ids (Capability.MP_LOOKUP_BY_TOKEN_IDS): 0.3.13 takes block hashes
            if block_hashes is None:
                raise TypeError(
                    "lookup(): this LMCache release looks up by vLLM block hashes (token ids "
                    f"from {C.MP_LOOKUP_BY_TOKEN_IDS.since}); pass block_hashes"
                )
            tokens.put(kwargs, block_hashes)
            reserve.put(kwargs, reserve_last_token)
        salt.put(kwargs, cache_salt)
        configs.put(kwargs, request_configs)
        start_step(kwargs, start)
        return method(**kwargs)

    return lookup


def _token_parameter(facts: MethodFacts, where: str) -> TokenParameter:
    found = token_parameter(facts)
    if isinstance(found, TokenParameter):
        return found
    tokens_converter(found, None, where, "")  # raises: the form cannot be told
    raise AssertionError("unreachable")


def _lookup_every_keyword(
    method: Callable[..., Any],
    facts: MethodFacts,
    names: tuple[str, str],
    tokens: tuple[type, Callable[[Any], Any]],
    start: Applied,
) -> Callable[..., Any]:
    """The per-call path for releases that take every keyword (0.5.6 on): the token form's
    conversion, then the release's method, positionally where the signature guarantees the
    order (0.5.6 ``(request_id, token_ids, cache_salt, request_configs, reserve_last_token)``,
    0.5.7rc2 ``+ start``), else by keyword. Every release with ``cache_salt`` defaults it to
    ``""`` (no salt). The token ids' one conversion runs only when they are not already in the
    release's form (``bytes`` packed, or a ``list`` of ids)."""
    request, key = names
    ready, convert = tokens  # token ids of type `ready` are passed as they are (one check)
    order = (request, key, SALT, CONFIGS, RESERVE, *((START,) if start.takes else ()))
    if facts.call_shape(order) != "positional":
        return _lookup_by_keyword(method, names, tokens, start.put)
    if start.takes:
        return _lookup_positional(method, ready, convert)
    return _lookup_positional_no_start(method, ready, convert, start.put)


def _lookup_positional(
    method: Callable[..., Any], ready: type, convert: Callable[[Any], Any]
) -> Callable[..., Any]:
    """0.5.7rc2's order: every argument positionally, ``start`` last."""

    def lookup_positional(
        request_id: str,
        token_ids: Sequence[int] | bytes | None = None,
        block_hashes: Sequence[Any] | None = None,
        *,
        cache_salt: str | None = None,
        request_configs: Mapping[str, Any] | None = None,
        reserve_last_token: bool = False,
        start: int = 0,
    ) -> Any:
        if type(token_ids) is not ready:
            token_ids = _convert(convert, token_ids)
        return method(
            request_id, token_ids, cache_salt or "", request_configs,
            reserve_last_token, start,
        )  # fmt: skip

    return lookup_positional


def _lookup_positional_no_start(
    method: Callable[..., Any],
    ready: type,
    convert: Callable[[Any], Any],
    refuse_start: Put,
) -> Callable[..., Any]:
    """0.5.6's order: every argument positionally; the release has no ``start``."""

    def lookup_positional_no_start(
        request_id: str,
        token_ids: Sequence[int] | bytes | None = None,
        block_hashes: Sequence[Any] | None = None,
        *,
        cache_salt: str | None = None,
        request_configs: Mapping[str, Any] | None = None,
        reserve_last_token: bool = False,
        start: int = 0,
    ) -> Any:
        if type(token_ids) is not ready:
            token_ids = _convert(convert, token_ids)
        if start:
            refuse_start({}, start)  # ARG.start: refused, or (allowed) dropped
        return method(request_id, token_ids, cache_salt or "", request_configs, reserve_last_token)

    return lookup_positional_no_start


def _lookup_by_keyword(
    method: Callable[..., Any],
    names: tuple[str, str],
    tokens: tuple[type, Callable[[Any], Any]],
    refuse_start: Put,
) -> Callable[..., Any]:
    """Every keyword taken, in an order the signature does not guarantee: by keyword."""
    request, key = names
    ready, convert = tokens

    def lookup_by_keyword(
        request_id: str,
        token_ids: Sequence[int] | bytes | None = None,
        block_hashes: Sequence[Any] | None = None,
        *,
        cache_salt: str | None = None,
        request_configs: Mapping[str, Any] | None = None,
        reserve_last_token: bool = False,
        start: int = 0,
    ) -> Any:
        kwargs = {
            request: request_id,
            key: token_ids if type(token_ids) is ready else _convert(convert, token_ids),
            SALT: cache_salt or "",
            CONFIGS: request_configs,
            RESERVE: reserve_last_token,
        }
        refuse_start(kwargs, start)  # passed where taken; else refused or dropped
        return method(**kwargs)

    return lookup_by_keyword


def _convert(convert: Callable[[Any], Any], token_ids: Any) -> Any:
    if token_ids is None:
        raise TypeError("lookup(): this LMCache release looks up by token_ids; pass them")
    return convert(token_ids)


def check_lookup_result_call(
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


def free_lookup_locks_call(
    method: Callable[..., Any],
    facts: MethodFacts,
    downgrades: Downgrades,
    pack: Pack | None,
    missing_pack: str,
) -> Callable[..., Any]:
    """``free_lookup_locks(token_ids, start, end, request_id, *, cache_salt=None,
    request_configs=None, extra_ranges=())`` over the release's (0.4.1+) method: the same token
    form as the lookup, one call per extra range before the release takes them."""
    where = downgrades.where
    found = _token_parameter(facts, where)
    convert = tokens_converter(found, pack, where, missing_pack)
    tokens = _tokens_step(facts, downgrades, found, convert)
    salt = apply(ARG.cache_salt, facts, downgrades)
    configs = apply(ARG.request_configs, facts, downgrades)
    ranges_step = apply(
        ARG.extra_ranges, facts, downgrades, convert=tuple, emulate=_one_call_per_range
    )
    downgrades.refuse_unknown_required(
        facts, [found.name, "start", "end", REQUEST, *_passed((salt, configs, ranges_step))]
    )
    emulated = ranges_step.action == "emulate"
    named = facts.call_shape((found.name, "start", "end", REQUEST)) == "keyword"
    key = found.name

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
        salt.put(kwargs, cache_salt)
        configs.put(kwargs, request_configs)
        ranges_step.put(kwargs, extra_ranges)
        tokens.put(kwargs, token_ids)
        packed = kwargs.pop(key)
        if named:
            kwargs.update({key: packed, "start": start, "end": end, REQUEST: request_id})
            result = method(**kwargs)
        else:
            result = method(packed, start, end, request_id, **kwargs)
        if emulated:  # ARG.extra_ranges before 0.5.7rc2: one call per range, same locks freed
            for lo, hi in extra_ranges:
                if named:
                    method(**{**kwargs, "start": lo, "end": hi})
                else:
                    method(packed, lo, hi, request_id, **kwargs)
        return result

    return free_lookup_locks


def _one_call_per_range(kwargs: dict[str, Any], ranges: Any) -> None:
    """The emulation of ``extra_ranges`` is the call loop itself (in ``free_lookup_locks``)."""
