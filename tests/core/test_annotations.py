"""The one annotation model: spellings that mean the same annotation normalise to one text."""

from __future__ import annotations

import pytest

from lmcache_compat.core.annotations import admits_none, normalise, parse, widens


@pytest.mark.parametrize(
    "spellings",
    [
        [
            "Optional[bytes]",
            "Union[bytes, None]",
            "bytes | None",
            "'bytes | None'",
            "typing.Optional[builtins.bytes]",
        ],
        ["typing.List[int]", "list[int]", "List[int]"],
        ["Annotated[int, 'meta']", "int"],
        ["Callable[[torch.Tensor, int], NoneType]", "Callable[[torch.Tensor, int], None]"],
        # str() of an evaluated Optional['X'] (live probe, no future import) vs the source text
        ["Optional[ForwardRef('NodeId')]", "Optional['NodeId']", "NodeId | None"],
        ["typing.ForwardRef('NodeId')", "'NodeId'", "NodeId"],
        ["Optional[lmcache.v1.cache_engine.LMCacheEngine]", "Optional[LMCacheEngine]"],
    ],
)
def test_one_annotation_many_spellings(spellings: list[str]) -> None:
    assert len({normalise(s) for s in spellings}) == 1, [normalise(s) for s in spellings]
    assert parse(spellings[0]) is not None


@pytest.mark.parametrize(
    "text", ["ForwardRef(x)", "ForwardRef('a', 'b')", "f('X')", "1 +", "[" * 5000, "x" * 3000]
)
def test_what_is_not_an_annotation_is_unread(text: str) -> None:
    assert parse(text) is None


def test_none_and_widening() -> None:
    assert admits_none("Optional[ForwardRef('Req')]") and not admits_none("int")
    assert widens("int", "int | str") and not widens("int | str", "int")
