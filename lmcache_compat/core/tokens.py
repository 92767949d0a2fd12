"""How a release wants a request's tokens: block hashes, a ``list[int]``, or packed ``bytes``.

LMCache keys its multi-process lookups, lock frees and load/store operations by the request's
tokens, and the form has changed: 0.3.13 takes vLLM's block hashes (``block_hashes:
list[bytes]``), 0.3.14 token ids (``token_ids: list[int]``), 0.5.7rc2 the ids packed into bytes
(``packed_token_ids: bytes``, ``LoadStoreOp.token_bytes: bytes``) by the release's own
``pack_token_ids``.

The form is read from the parameter's meaning, never from a version number or a position: its
annotation, normalised first (:mod:`lmcache_compat.core.annotations`: ``bytes | memoryview``,
``Optional[bytes]`` and ``"bytes"`` are all packed bytes), or its name when it has no
annotation. The token parameter is found among all parameters, positional or keyword-only. An
annotation that names none of the known forms is not classified: the rule says so
(:class:`Unclassified`) and never picks the nearest guess.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from lmcache_compat.core.annotations import Type, parse
from lmcache_compat.errors import UnsupportedArgumentError

if TYPE_CHECKING:
    import inspect

    from lmcache_compat.core.signatures import MethodFacts

__all__ = [
    "BYTES_TYPES",
    "Encoding",
    "Pack",
    "TokenParameter",
    "Unclassified",
    "encoding_of",
    "ids_converter",
    "looks_up_by_tokens",
    "packed_converter",
    "takes_packed_tokens",
    "token_parameter",
    "tokens_converter",
]

Encoding = Literal["block_hashes", "token_ids", "packed"]
#: A release's own ``pack_token_ids`` (0.5.7rc2 on).
Pack = Callable[[Sequence[int]], bytes]
#: What a caller may pass as token ids already packed.
BYTES_TYPES = (bytes, bytearray, memoryview)

#: Bytes-like types (``collections.abc.Buffer``, PEP 688, included).
_BYTES = frozenset({"bytes", "bytearray", "memoryview", "Buffer"})
#: vLLM's block hash types (``BlockHash = NewType(bytes)``, ``ExternalBlockHash``).
_HASHES = frozenset({"BlockHash", "ExternalBlockHash", "BlockHashType"})
#: Containers of one item type a list of ids or hashes may be annotated as.
_SEQUENCES = frozenset(
    {"list", "Sequence", "MutableSequence", "tuple", "Iterable", "Collection", "Iterator"}
)


@dataclass(frozen=True, slots=True)
class Unclassified:
    """A token parameter whose annotation names none of the known forms."""

    parameter: str
    annotation: str

    def __str__(self) -> str:
        return (
            f"parameter {self.parameter!r} is annotated {self.annotation!r}, which is none of "
            "the token forms lmcache-compat knows (block hashes, a list of int ids, packed "
            "bytes)"
        )


def _form_of_type(t: Type) -> Encoding | None:
    if t.head in _BYTES and not t.args:
        return "packed"
    if t.head in _HASHES:
        return "block_hashes"
    if t.head in _SEQUENCES and t.args:
        items = [a for a in t.args if a.text() != "..."]  # tuple[int, ...]
        heads = {h for a in items for h in a.heads}
        if heads == {"int"}:
            return "token_ids"
        if heads and heads <= _BYTES | _HASHES:
            return "block_hashes"
    return None


def encoding_of(name: str, annotation: str | None) -> Encoding | Unclassified | None:
    """The token form of one parameter or field.

    A parameter carries tokens when its name says so (``*hash*``, ``*token*``: ``block_ids``
    does not, whatever its annotation). Its annotation then decides the form: the one every
    non-``None`` alternative names (``bytes`` and other bytes-like types: packed;
    ``list[int]``-like: token ids; ``list[bytes]`` or block-hash types: block hashes), else
    :class:`Unclassified` (no known form, or several). Without an annotation the name decides
    (``*hash*``: block hashes, ``token*bytes`` / ``packed*token*``: packed, ``token*``: ids).
    ``None``: not a token parameter.
    """
    lowered = name.lower()
    by_name: Encoding | None = None
    if "hash" in lowered:
        by_name = "block_hashes"
    elif "token" in lowered and ("bytes" in lowered or "packed" in lowered):
        by_name = "packed"
    elif "token" in lowered:
        by_name = "token_ids"
    if by_name is None or annotation is None:
        return by_name
    parsed = parse(annotation)
    forms = {_form_of_type(t) for t in parsed.without_none()} if parsed is not None else {None}
    if len(forms) == 1 and None not in forms:
        form: Encoding = forms.pop()  # type: ignore[assignment]
        return form
    return Unclassified(name, annotation)


@dataclass(frozen=True, slots=True)
class TokenParameter:
    """The parameter that carries the request's tokens, and its form."""

    parameter: inspect.Parameter
    encoding: Encoding

    @property
    def name(self) -> str:
        return self.parameter.name


def token_parameter(facts: MethodFacts) -> TokenParameter | Unclassified | None:
    """The first parameter (of any kind but ``*args``/``**kwargs``) that carries tokens."""
    for p in facts.params:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        form = encoding_of(p.name, None if p.annotation is p.empty else str(p.annotation))
        if isinstance(form, Unclassified):
            return form
        if form is not None:
            return TokenParameter(p, form)
    return None


def _keyed_by(facts: MethodFacts) -> Encoding | Unclassified | None:
    found = token_parameter(facts)
    return found.encoding if isinstance(found, TokenParameter) else found


def looks_up_by_tokens(facts: MethodFacts) -> bool | None:
    """``maybe_submit_lookup_request`` is keyed by tokens (ids or packed), not block hashes;
    ``None``: its token parameter cannot be classified."""
    form = _keyed_by(facts)
    if isinstance(form, Unclassified):
        return None
    return form in ("token_ids", "packed")


def takes_packed_tokens(facts: MethodFacts) -> bool | None:
    """``maybe_submit_lookup_request`` takes the ids packed into bytes; ``None``: cannot tell."""
    form = _keyed_by(facts)
    if isinstance(form, Unclassified):
        return None
    return form == "packed"


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


def ids_converter(where: str) -> Callable[[Any], Any]:
    """Token ids for a release that takes a list of ints: passed as given; packed bytes are
    refused (this library does not unpack them)."""

    def as_ids(token_ids: Any) -> Any:
        if isinstance(token_ids, BYTES_TYPES):
            raise TypeError(
                f"{where} takes token ids as a list of ints; pass the ids, not packed bytes"
            )
        return token_ids

    return as_ids


def tokens_converter(
    found: TokenParameter | Unclassified | None, pack: Pack | None, where: str, missing_pack: str
) -> Callable[[Any], Any] | None:
    """The conversion of the caller's token ids for the release's token parameter
    (``ARG.packed_token_ids``; Capability.MP_PACKED_TOKEN_IDS), decided once; ``None`` for block
    hashes (the caller's hashes are passed). ``missing_pack`` says where the codec was looked
    for, for the error when a release takes packed ids and none was found."""
    if not isinstance(found, TokenParameter):
        raise UnsupportedArgumentError(
            "token_ids",
            f"{where}: cannot tell how this release wants the request's tokens ("
            + (str(found) if found is not None else "no parameter carries them")
            + "); please report this release",
        )
    if found.encoding == "block_hashes":
        return None
    if found.encoding == "packed":
        if pack is None:
            raise UnsupportedArgumentError(
                "token_ids",
                f"{where} takes packed token ids, but {missing_pack}; please report this release",
            )
        return packed_converter(pack)
    return ids_converter(where)
