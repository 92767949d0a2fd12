"""How a release wants token ids: block hashes, a ``list[int]``, or packed ``bytes``.

LMCache keys its multi-process lookups, lock frees and load/store operations by the request's
tokens, and the form has changed: 0.3.13 takes vLLM's block hashes (``block_hashes:
list[bytes]``), 0.3.14 token ids (``token_ids: list[int]``), 0.5.7rc2 the ids packed into bytes
(``packed_token_ids: bytes``, ``LoadStoreOp.token_bytes: bytes``) by the release's own
``pack_token_ids`` (big-endian uint32). The form is read from the parameter's annotation (its
name when it has none), never from a version number, so the next change is seen, not guessed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from lmcache_compat.signatures import annotation_words

if TYPE_CHECKING:
    from lmcache_compat.signatures import MethodFacts

__all__ = [
    "Encoding",
    "encoding_of",
    "key_encoding",
    "looks_up_by_tokens",
    "takes_packed_tokens",
    "token_field",
]

Encoding = Literal["block_hashes", "token_ids", "packed"]

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
