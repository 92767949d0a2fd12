"""How each multi-process worker call is made on a given release: pure functions of its facts
(the scheduler's are in :mod:`lmcache_compat.mp.scheduler_calls`, with the same rules).

``submit_call`` and ``register_kv_caches_call`` take the release's own method and its
:class:`~lmcache_compat.core.signatures.MethodFacts`; ``load_store_op_factory`` takes its
``LoadStoreOp`` class and reads the fields' annotations (the token field's form, flat or nested
``block_ids``). Each decides once, through the argument rows
(:func:`~lmcache_compat.core.arguments.apply`), and returns the closure the adapter binds.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from lmcache_compat.core.annotations import parse
from lmcache_compat.core.arguments import ARG, Downgrades, apply
from lmcache_compat.core.signatures import MethodFacts, init_facts
from lmcache_compat.core.tokens import BYTES_TYPES, Pack, token_parameter, tokens_converter
from lmcache_compat.errors import UnsupportedArgumentError

__all__ = ["load_store_op_factory", "register_kv_caches_call", "submit_call"]

#: The leading parameters of the submits, single and batched (every release names them so).
HEAD = ("request_id", "op", "event")
BATCHED_HEAD = ("request_ids", "ops", "event")
#: The batched submits take one value per request, under these plural names.
SALTS = "cache_salts"
CONFIGS_LIST = "request_configs_list"


def _optional_values(name: str, values: Any, n: int) -> list[Any] | None:
    """A per-request sequence read exactly once (a generator is consumed here, not twice)."""
    if values is None:
        return None
    out = list(values)
    if len(out) != n:
        raise ValueError(f"{name}: {len(out)} values for {n} requests")
    return out


def _any(values: Any) -> bool:
    return values is not None and any(values)


def _leading_by_name(method: Callable[..., Any], names: tuple[str, ...]) -> Callable[..., Any]:
    """``method`` with its leading arguments passed by ``names`` (a release that made them
    keyword-only or reordered them)."""

    def by_name(*args: Any, **kwargs: Any) -> Any:
        kwargs.update(zip(names, args, strict=True))
        return method(**kwargs)

    return by_name


def submit_call(
    method: Callable[..., Any], facts: MethodFacts, downgrades: Downgrades, *, batched: bool
) -> Callable[..., Any]:
    """``submit_{store,retrieve}_request(request_id, op, event, *, cache_salt=None,
    request_configs=None)`` and the batched forms (``cache_salts``, ``request_configs_list``),
    every per-request sequence read exactly once. The leading three go positionally only where
    the signature guarantees their order, else by name (decided here, once)."""
    head = BATCHED_HEAD if batched else HEAD
    if facts.call_shape(head) == "keyword":
        method = _leading_by_name(method, head)
    if batched:
        return _batched_submit(method, facts, downgrades)
    return _single_submit(method, facts, downgrades)


def _batched_submit(
    method: Callable[..., Any], facts: MethodFacts, downgrades: Downgrades
) -> Callable[..., Any]:
    """``submit_*_requests(request_ids, ops, event, *, cache_salts, request_configs_list)``."""
    salts = apply(ARG.cache_salt, facts, downgrades, keyword=SALTS, given=_any)
    configs_list = apply(ARG.request_configs, facts, downgrades, keyword=CONFIGS_LIST, given=_any)

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
        salts.put(kwargs, _optional_values(SALTS, cache_salts, len(ids)))
        configs_list.put(kwargs, _optional_values(CONFIGS_LIST, request_configs_list, len(ids)))
        return method(ids, list(ops), event, **kwargs)

    return batched_submit


def _single_submit(
    method: Callable[..., Any], facts: MethodFacts, downgrades: Downgrades
) -> Callable[..., Any]:
    """``submit_*_request(request_id, op, event, *, cache_salt, request_configs)``: straight
    through where the release takes both keywords in order, else each argument's step."""
    salt = apply(ARG.cache_salt, facts, downgrades)
    configs = apply(ARG.request_configs, facts, downgrades)
    order = (*HEAD, salt.keyword, configs.keyword)
    if salt.takes and configs.takes and facts.call_shape(order) == "positional":
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

    def single_submit(
        request_id: str,
        op: Any,
        event: Any,
        *,
        cache_salt: str | None = None,
        request_configs: Mapping[str, Any] | None = None,
    ) -> Any:
        kwargs: dict[str, Any] = {}
        salt.put(kwargs, cache_salt)
        configs.put(kwargs, request_configs)
        return method(request_id, op, event, **kwargs)

    return single_submit


def _several(groups: Any) -> bool:
    return groups is not None and len(groups) > 1


def register_kv_caches_call(
    method: Callable[..., Any], facts: MethodFacts, downgrades: Downgrades
) -> Callable[..., Any]:
    """``register_kv_caches(kv_caches, *, engine_group_infos=None, layout_hints=None)``."""
    groups = apply(ARG.engine_group_infos, facts, downgrades)
    # one KV cache group is what every older release handles: only several are refused
    several = apply(ARG.engine_group_infos, facts, downgrades, given=_several)
    hints = apply(ARG.layout_hints, facts, downgrades, given=_not_none)
    put_groups = groups.put if groups.takes else several.put

    def register_kv_caches(
        kv_caches: Any,
        *,
        engine_group_infos: Collection[Any] | None = None,
        layout_hints: Any = None,
    ) -> Any:
        kwargs: dict[str, Any] = {}
        put_groups(kwargs, engine_group_infos)
        hints.put(kwargs, layout_hints)
        return method(kv_caches, **kwargs)

    return register_kv_caches


def _not_none(value: Any) -> bool:
    return value is not None


def _nested(annotation: str | None) -> bool:
    """``block_ids: list[list[int]]`` (0.4.7: one list per KV cache group), read from the
    field's normalised annotation."""
    parsed = parse(annotation)
    if parsed is None:
        return False
    return any(
        arg_type.head in ("list", "Sequence", "tuple") and arg_type.args
        for t in parsed.without_none()
        for arg in t.args
        for arg_type in arg.alternatives
    )


def load_store_op_factory(
    op_cls: type, downgrades: Downgrades, pack: Pack | None, missing_pack: str
) -> Callable[..., Any]:
    """``make_op(block_ids, token_ids=None, *, block_hashes=None, start=0, end=None,
    skip_first_n_tokens=0)`` building the release's ``LoadStoreOp``.

    ``block_ids`` is a flat ``list[int]`` (one KV cache group) or ``list[list[int]]``; the
    tokens go into the op's token field in the form its annotation asks for (0.3.13
    ``block_hashes``, 0.3.14 ``token_ids: list[int]``, 0.5.7rc2 ``token_bytes: bytes``)."""
    facts = init_facts(op_cls)
    field_name, convert = _token_field(facts, downgrades.where, pack, missing_pack)
    names = set(facts.names)
    skip = apply(ARG.skip_first_n_tokens, facts, downgrades)
    nested = _nested(facts.annotation("block_ids"))
    several = apply(
        ARG.block_ids, None, downgrades, given=_several, emulate=_first_group_only(downgrades)
    )

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
        kwargs: dict[str, Any] = {}
        if nested:
            kwargs["block_ids"] = groups
        else:  # ARG.block_ids before 0.4.7: one flat list (several groups: refused)
            several.put(kwargs, groups)
            kwargs["block_ids"] = groups[0]
        if convert is not None:
            if token_ids is None:
                raise TypeError("make_load_store_op(): this LMCache release needs token_ids")
            kwargs[field_name] = convert(token_ids)
            if "start" in names:
                kwargs["start"] = start
            if "end" in names:
                if end is None and isinstance(token_ids, BYTES_TYPES):
                    raise TypeError("make_load_store_op(): pass end= with packed token bytes")
                kwargs["end"] = len(token_ids) if end is None else end
        else:
            if block_hashes is None:
                raise TypeError("make_load_store_op(): this LMCache release needs block_hashes")
            kwargs[field_name] = block_hashes
        skip.put(kwargs, skip_first_n_tokens)
        return op_cls(**kwargs)

    return make_op


def _token_field(
    facts: MethodFacts, where: str, pack: Pack | None, missing_pack: str
) -> tuple[str, Callable[[Any], Any] | None]:
    """The op's field that carries the tokens, and the conversion into its form (``None``: the
    field takes vLLM block hashes, 0.3.13)."""
    found = token_parameter(facts)
    if found is None:
        raise UnsupportedArgumentError(
            "token_ids",
            f"{where}: no field of {list(facts.names)} carries the tokens; please report this "
            "release",
        )
    convert = tokens_converter(found, pack, where, missing_pack)
    return found.name, convert  # type: ignore[union-attr]  # a TokenParameter (checked above)


def _first_group_only(downgrades: Downgrades) -> Callable[[dict[str, Any], Any], None]:
    """``ARG.block_ids`` (map): a flat list is one KV cache group; several groups are refused
    unless allowed (then the first group is used)."""

    def one_group(kwargs: dict[str, Any], groups: Any) -> None:
        if len(groups) > 1:
            downgrades.refuse(ARG.block_ids)

    return one_group
