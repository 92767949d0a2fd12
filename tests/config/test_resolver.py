"""The loader model: the name rules cover every case exactly once, and the converters behave as
the release code they are named after (the real loaders check the same in the releases tier)."""

from __future__ import annotations

import itertools

import pytest

from lmcache_compat.config.resolver import CONVERTERS, NAME_RULES, _matches, convert
from lmcache_compat.config.schema import load_schemas

BOOL_0_3_4 = "lambda x: x if isinstance(x, bool) else str(x).lower() in ['true', '1']"
JSON_DICT = "lambda x: x if isinstance(x, dict) else json.loads(x) if x else None"


@pytest.mark.parametrize("rule_set", ["deprecated-only", "always", "none"])
def test_every_case_matches_exactly_one_rule(rule_set: str) -> None:
    for values in itertools.product((True, False), repeat=4):
        facts = dict(zip(("deprecated", "aliased", "is_key", "fallback"), values, strict=True))
        rows = [r for r in NAME_RULES if r.alias_rule == rule_set and _matches(r, facts)]
        assert len(rows) == 1, (rule_set, facts, rows)


def test_every_converter_of_the_shipped_releases_is_modelled_or_none() -> None:
    seen = {
        c
        for r in load_schemas().rows
        for k in r.keys.values()
        for c in (k.converter, k.env_converter)
        if c is not None
    }
    assert seen - set(CONVERTERS) == set()


@pytest.mark.parametrize(
    ("converter", "value", "result"),
    [
        ("int", "512", 512),
        ("int", 256.7, 256),
        ("int", True, 1),
        ("_to_bool", " true ", True),
        ("_to_bool", "yes", False),
        (
            "lambda x: x if isinstance(x, bool) else str(x).lower() in ['true', '1']",
            " true ",
            False,
        ),
        ("_to_int_list", "1, 2", [1, 2]),
        ("_to_int_list", 5, [5]),
        ("_to_str_list", "a,b", ["a", "b"]),
        ("_to_float_list", 1, [1.0]),
        ("_parse_local_disk", "file:///a/,/b/", "/a/,/b/"),
        ("to_int", "7", 7),
        ("to_bool", "TRUE", True),
    ],
)
def test_converter_results(converter: str, value: object, result: object) -> None:
    assert convert(converter, value).value == result


@pytest.mark.parametrize(
    ("converter", "value", "error"),
    [
        ("int", "abc", "ValueError"),
        ("int", [1], "TypeError"),
        ("_to_int_list", "[1, 2]", "ValueError"),
        ("_to_str_list", 5, "AttributeError"),
        (
            "lambda x: x if isinstance(x, dict) else json.loads(x) if x else None",
            "{a",
            "JSONDecodeError",
        ),
        ("assert isinstance(x, dict)", "text", "AssertionError"),
    ],
)
def test_converter_errors(converter: str, value: object, error: str) -> None:
    assert convert(converter, value).error == error


def test_an_unknown_converter_is_not_judged() -> None:
    assert convert("lambda x: something_new(x)", "v").modelled is False
