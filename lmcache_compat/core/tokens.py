"""How a release wants token ids: block hashes, a ``list[int]``, or packed ``bytes``.

LMCache keys its multi-process lookups, lock frees and load/store operations by the request's
tokens, and the form has changed: 0.3.13 takes vLLM's block hashes (``block_hashes:
list[bytes]``), 0.3.14 token ids (``token_ids: list[int]``), 0.5.7rc2 the ids packed into bytes
(``packed_token_ids: bytes``, ``LoadStoreOp.token_bytes: bytes``) by the release's own
``pack_token_ids`` (big-endian uint32). The form is read from the parameter's annotation (its
name when it has none), never from a version number, so the next change is seen, not guessed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal

from lmcache_compat.core.signatures import annotation_words
from lmcache_compat.errors import UnsupportedArgumentError
from lmcache_compat.upstream.locations import PACK_TOKEN_IDS

if TYPE_CHECKING:
    from lmcache_compat.core.signatures import MethodFacts

__all__ = [
    "BYTES_TYPES",
    "Encoding",
    "Pack",
    "encoding_of",
    "key_encoding",
    "looks_up_by_tokens",
    "packed_converter",
    "takes_packed_tokens",
    "token_field",
    "token_form",
    "tokens_converter",
]

Encoding = Literal["block_hashes", "token_ids", "packed"]
#: A release's own ``pack_token_ids`` (0.5.7rc2 on).
Pack = Callable[[Sequence[int]], bytes]
#: What a caller may pass as token ids already packed.
BYTES_TYPES = (bytes, bytearray, memoryview)

_BYTES = frozenset({"bytes", "bytearray", "memoryview", "Buffer"})
_HASHES = frozenset({"BlockHash", "ExternalBlockHash"})
_INTS = frozenset({"int"})


def encoding_of(name: str, annotation: str | None) -> Encoding | None:
    """The token form of one parameter or field: from its annotation's words (``bytes`` ->
    packed, ``list[bytes]`` or block-hash types -> block hashes, ``list[int]`` -> token ids),
    else from its name. ``None``: not a token parameter (or one this library cannot read)."""
    words = annotation_words(annotation)
    if words:
        if len(words) == 1 and words[0] in _BYTES:
            return "packed"
        inner = set(words[1:])
        if inner & _HASHES or (len(words) >= 2 and words[-1] in _BYTES):
            return "block_hashes"
        if inner and inner <= _INTS | {"Sequence", "list", "List", "tuple", "Tuple", "Iterable"}:
            return "token_ids"
    lowered = name.lower()
    if "hash" in lowered:
        return "block_hashes"
    if "token" in lowered and ("bytes" in lowered or "packed" in lowered):
        return "packed"
    if "token" in lowered:
        return "token_ids"
    return None


def key_encoding(facts: MethodFacts, position: int) -> Encoding | None:
    """The token form of the positional parameter at ``position`` (``None`` if absent)."""
    positional = [p for p in facts.params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if position >= len(positional):
        return None
    p = positional[position]
    return encoding_of(p.name, None if p.annotation is p.empty else str(p.annotation))


def looks_up_by_tokens(facts: MethodFacts) -> bool:
    """``maybe_submit_lookup_request(request_id, <key>)`` is keyed by tokens (ids or packed)."""
    return key_encoding(facts, 1) in ("token_ids", "packed")


def takes_packed_tokens(facts: MethodFacts) -> bool:
    """``maybe_submit_lookup_request(request_id, <key>)`` takes the ids packed into bytes."""
    return key_encoding(facts, 1) == "packed"


def token_field(facts: MethodFacts) -> tuple[str, Encoding] | None:
    """The parameter of a constructor (``LoadStoreOp``) that carries the tokens, and its form."""
    for p in facts.params:
        enc = encoding_of(p.name, None if p.annotation is p.empty else str(p.annotation))
        if enc is not None:
            return p.name, enc
    return None


def token_form(facts: MethodFacts, position: int, where: str) -> Encoding:
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


def packed_converter(pack: Pack) -> Callable[[Any], bytes]:
    """The one normaliser of token ids for a release that takes them packed: ``bytes`` are
    passed as they are, any other bytes-like object (``bytearray``, ``memoryview``) as the same
    bytes (already packed by the caller: never packed again, which would pack each byte as a
    token), and a sequence of ints is packed with the release's own codec."""

    def to_bytes(token_ids: Any) -> bytes:
        if type(token_ids) is bytes:
            return token_ids
        if isinstance(token_ids, BYTES_TYPES):
            return bytes(token_ids)  # a memoryview: its bytes, in memory order
        return pack(token_ids)

    return to_bytes


def tokens_converter(encoding: Encoding, pack: Pack | None, where: str) -> Callable[[Any], Any]:
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
        return packed_converter(pack)

    def as_list(token_ids: Any) -> Any:
        if isinstance(token_ids, BYTES_TYPES):
            raise TypeError(
                f"{where} takes token ids as a list of ints; pass the ids, not packed bytes"
            )
        return token_ids

    return as_list
