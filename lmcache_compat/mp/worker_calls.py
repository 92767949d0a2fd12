"""How each multi-process worker call is made on a given release: pure functions of its facts
(the scheduler's are in :mod:`lmcache_compat.mp.scheduler_calls`, with the same rules).

``mp_submit`` and ``mp_register_kv_caches`` take the release's own method and its
:class:`~lmcache_compat.core.signatures.MethodFacts`; ``load_store_op_factory`` takes its
``LoadStoreOp`` class and reads the fields' annotations (the token field's form, flat or nested
``block_ids``). Each decides once and returns the closure the adapter binds.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from lmcache_compat.core.arguments import ARG, Downgrades
from lmcache_compat.core.signatures import MethodFacts, init_facts
from lmcache_compat.core.tokens import BYTES_TYPES, Pack, token_field, tokens_converter
from lmcache_compat.errors import UnsupportedArgumentError
from lmcache_compat.mp.scheduler_calls import CONFIGS, SALT

__all__ = ["load_store_op_factory", "mp_register_kv_caches", "mp_submit"]

GROUPS = ARG.engine_group_infos.argument  # Capability.MP_ENGINE_GROUP_INFOS (0.4.7)
HINTS = ARG.layout_hints.argument  # Capability.MP_LAYOUT_HINTS (0.5.5)


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
    convert = tokens_converter(encoding, pack, where) if encoding != "block_hashes" else None
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
                if end is None and isinstance(token_ids, BYTES_TYPES):
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
