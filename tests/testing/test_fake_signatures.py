"""The grid tiers' fake-vs-real signature comparison (tests/tiers/real/introspect.py) sees
every kind of difference it claims to, and none where there is none."""

from __future__ import annotations

from typing import Any

from lmcache_compat.testing import fake_class
from lmcache_compat.upstream import locations as loc
from tests.tiers.real.introspect import fake_mismatches

V = "0.3.10.post2"
IMPL = loc.CONNECTOR_IMPL.name


def _real(body: dict[str, Any]) -> type:
    return type(IMPL, (), body)


def test_a_fake_matches_its_own_release() -> None:
    fake = fake_class(V, IMPL)
    compared, mismatches = fake_mismatches(fake, V)
    assert compared > 10 and mismatches == []


def test_each_difference_is_named() -> None:
    fake = fake_class(V, IMPL)
    body = {k: v for k, v in vars(fake).items() if not k.startswith("_") or k == "__init__"}

    def wait_for_layer_load(self: object, layer: str) -> None: ...  # renamed parameter

    def get_num_new_matched_tokens(  # a different annotation and a literal default
        self: object, request: object, num_computed_tokens: str = "0"
    ) -> int | None: ...

    def extra(self: object) -> None: ...

    body.update(
        wait_for_layer_load=wait_for_layer_load,
        get_num_new_matched_tokens=get_num_new_matched_tokens,
        extra=extra,
    )
    del body["shutdown"]
    _, mismatches = fake_mismatches(_real(body), V)
    text = "\n".join(mismatches)
    assert "member extra: real only" in text and "member shutdown: fake only" in text
    assert "wait_for_layer_load: params ['layer_name'] != real ['layer']" in text
    assert "get_num_new_matched_tokens: num_computed_tokens: int != real str" in text
    assert "get_num_new_matched_tokens: optional" in text
