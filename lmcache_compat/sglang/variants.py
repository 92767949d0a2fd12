"""The variants of the lmcache-compat radix-cache backend: one per run of sglang releases whose
internals it relies on, as data.

A variant names the run by its first release and lists the internals it builds on, read from
sglang's files by :func:`lmcache_compat.sglang.known.reader.read_sglang` (``internals``) and
from its cache classes. The backend picks the variant whose facts the installed sglang has
(:func:`variant_for`); no match (an sglang newer than this table, with other internals) is
refused at start-up in one line, never guessed. The shipped sglang grid records which variant
serves each release.

The internals (each decides one thing the backend does):

* ``radix_key_raw_token_ids``: ``RadixKey.raw_token_ids()`` gives the token ids LMCache keys
  by (0.5.14 on; before, ``RadixKey.token_ids``);
* ``radix_key_cache_salt``: ``RadixKey(..., cache_salt=)`` keeps a tenant's salt (0.5.18 on);
* ``record_store_event``: the tree records KV events with ``_record_store_event(node)``
  (through 0.5.18; later ``kv_events.record_store(node)``);
* ``req_flat_kv``: ``Req`` keeps ``kv_committed_len`` and ``req_pool_idx`` itself (through
  0.5.18; later in ``req.kv``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

__all__ = ["RADIX_FACTS", "VARIANTS", "Variant", "variant_for", "variant_named"]

Kind = Literal["radix", "unified"]

#: The internals a radix variant is defined by (the keys of ``SglangFacts.internals``).
RADIX_FACTS = (
    "radix_key_raw_token_ids",
    "radix_key_cache_salt",
    "record_store_event",
    "req_flat_kv",
)


@dataclass(frozen=True, slots=True)
class Variant:
    """One variant of the backend."""

    name: str
    kind: Kind
    #: The sglang releases it was read from (documentation; the grid says it per release).
    releases: str
    #: ``RADIX_FACTS`` -> the value this variant relies on (``unified``: none).
    internals: Mapping[str, bool] = field(default_factory=dict)
    summary: str = ""
    #: ``(mode, LMCache specifier)``: what the sglang tier (tests/tiers/sglang) round-trips
    #: for real through sglang's registry on CPU, for the sglang release it installs of this
    #: variant. The plugin serves other pairs the plan allows too, and says at start-up that
    #: they are not verified. The tier runs every row (a test ties them).
    verified: tuple[tuple[str, str], ...] = ()
    #: The sglang release the tier installs to verify this variant (``None``: none).
    tested_on: str | None = None

    def verifies(self, mode: str, lmcache: str) -> bool:
        """Whether the tier round-trips ``mode`` over LMCache ``lmcache`` for this variant: a
        release of the shipped matrix (the tier runs those) that a row's specifier admits."""
        # lazy: only the plan asks, and the matrix is read once
        from packaging.specifiers import SpecifierSet

        from lmcache_compat.upstream.matrix import load_matrix
        from lmcache_compat.versions import parse_version  # the reader contract (budgeted)

        public = parse_version(parse_version(lmcache).public)
        if public not in {parse_version(v) for v in load_matrix().versions}:
            return False  # a release the tier has not run: not verified, whatever the row says
        return any(
            m == mode and SpecifierSet(spec).contains(public, prereleases=True)
            for m, spec in self.verified
        )


#: Every variant of the radix-cache backend, one per shape of LMCache's SGLang side.
VARIANTS: tuple[Variant, ...] = (
    Variant(
        "radix-0.5.13",
        "radix",
        "0.5.13 ... 0.5.13.post1",
        {
            "radix_key_raw_token_ids": False,
            "radix_key_cache_salt": False,
            "record_store_event": True,
            "req_flat_kv": True,
        },
        "RadixKey.token_ids; Req.kv_committed_len; _record_store_event",
        verified=(("in-process", "==0.4.6"), ("in-process", "==0.5.6")),
        tested_on="0.5.13",
    ),
    Variant(
        "radix-0.5.14",
        "radix",
        "0.5.14 ... 0.5.17",
        {
            "radix_key_raw_token_ids": True,
            "radix_key_cache_salt": False,
            "record_store_event": True,
            "req_flat_kv": True,
        },
        "RadixKey.raw_token_ids(); Req.kv_committed_len; _record_store_event",
        verified=(("in-process", "==0.4.6"), ("in-process", "==0.5.6")),
        tested_on="0.5.14",
    ),
    Variant(
        "radix-0.5.18",
        "radix",
        "0.5.18",
        {
            "radix_key_raw_token_ids": True,
            "radix_key_cache_salt": True,
            "record_store_event": True,
            "req_flat_kv": True,
        },
        "as radix-0.5.14, and RadixKey keeps the request's cache_salt",
        verified=(("in-process", "==0.4.6"), ("in-process", "==0.5.6")),
        tested_on="0.5.18",
    ),
    Variant(
        "radix-0.5.19",
        "radix",
        "0.5.19 ... 0.5.20",
        {
            "radix_key_raw_token_ids": True,
            "radix_key_cache_salt": True,
            "record_store_event": False,
            "req_flat_kv": False,
        },
        "RadixKey.raw_token_ids() and cache_salt; Req.kv.kv_committed_len; kv_events",
        # in-process: every release whose in-process connector runs on CPU; MP: the release
        # whose CPU server takes the connector's tensors (with the CPU layout stand-in)
        verified=(("in-process", ">=0.4.6,<0.5.7rc2"), ("mp", "==0.5.6")),
        tested_on="0.5.20",
    ),
    Variant(
        "unified-0.5.21",
        "unified",
        "0.5.21 ... 0.5.23",
        {},
        "sglang's own LMCacheUnifiedRadixCache, its connector bound through lmcache-compat",
        verified=(("unified-mp", ">=0.5.6"),),
        tested_on="0.5.23",
    ),
)
_BY_NAME = {v.name: v for v in VARIANTS}


def variant_named(name: str) -> Variant:
    return _BY_NAME[name]


def variant_for(
    cache_classes: tuple[str, ...], internals: Mapping[str, bool], unified_cache: str
) -> Variant | None:
    """The variant for an sglang whose LMCache caches are ``cache_classes`` and whose internals
    are ``internals`` (``None``: no variant relies on what it has). An sglang that has
    ``unified_cache`` (the unified radix cache) gets the unified variant."""
    if unified_cache in cache_classes:
        return next(v for v in VARIANTS if v.kind == "unified")
    wanted = {k: bool(internals.get(k)) for k in RADIX_FACTS}
    return next((v for v in VARIANTS if v.kind == "radix" and dict(v.internals) == wanted), None)
