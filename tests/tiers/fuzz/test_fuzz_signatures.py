"""Signatures a next release may plausibly have, generated from the real ones: the adapters
built over them keep the release's capabilities, and every call they make binds.

Each example takes a real release's row (every release with the MP adapters), changes one
method's signature the ways releases change them while keeping its meaning (annotations
widened to unions, ``Optional``, ``typing`` generics, quoted; the arguments after a point made
keyword-only; optional parameters added, positional or keyword-only), builds the class from
that row (``tools.generated_fakes``: exactly the row's names, kinds, defaults and
annotation text) and the adapter over it. Properties:

- the adapter's capabilities equal the unchanged release's (a benign change is not a removal);
- the adapter's call binds to the generated signature (the generated method is a real Python
  function with that signature: a call that does not bind raises ``TypeError``);
- the values arrive as given: the same token ids (packed ones unpack to the input), request id,
  salt.
"""

from __future__ import annotations

import dataclasses
import struct
from typing import Any

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from lmcache_compat import MPSchedulerAdapter, MPWorkerAdapter
from lmcache_compat.core.roles import MP_SCHEDULER, MP_WORKER
from lmcache_compat.upstream.matrix import ReleaseRow, load_matrix
from tests.tiers.fuzz.conftest import EXAMPLES, SEED, STATS
from tools.generated_fakes import fake_module, instantiate

pytestmark = pytest.mark.fuzz

FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

MATRIX = load_matrix()
MP_ROWS = [r for r in MATRIX.rows if MP_SCHEDULER.name in r.surfaces]


def _annotation(text: str) -> st.SearchStrategy[str]:
    """Spellings of the same (or a wider) type as ``text``."""
    same = [text, f"'{text}'", f"Optional[{text}]", f"typing.Optional[{text}]"]
    if "None" not in text:
        same += [f"{text} | None", f"Union[{text}, None]", f"None | {text}"]
    wider = {
        "bytes": [
            "bytes | memoryview",
            "Union[bytes, bytearray]",
            "bytes | bytearray | memoryview",
        ],
        "list[int]": [
            "List[int]",
            "typing.List[int]",
            "Sequence[int]",
            "list[int] | tuple[int, ...]",
        ],
        "str": ["str | None", "Optional[str]"],
        "int": ["int | None", "'int'"],
    }.get(text, [])
    return st.sampled_from(same + wider)


@st.composite
def changed_signature(draw: st.DrawFn, row: ReleaseRow, cls: str, method: str) -> ReleaseRow:
    """``row`` with one method's signature changed as a next release might change it."""
    params = list(row.surfaces[cls][method])
    detail = dict(row.details.get(cls, {}).get(method, {}))
    optional = list(detail.get("optional", ()))
    annotations = {
        name: draw(_annotation(text)) for name, text in detail.get("annotations", {}).items()
    }
    if not any(p == "*" or p.startswith("*") for p in params) and draw(st.booleans()):
        # everything after the first argument (the request id) becomes keyword-only
        params.insert(draw(st.integers(1, len(params))), "*")
    for i in range(draw(st.integers(0, 2))):
        name = f"added_{i}"
        end = next((k for k, p in enumerate(params) if p.startswith("**")), len(params))
        where = end if draw(st.booleans()) or "*" not in params else params.index("*")
        params.insert(where, name)  # optional: positional before "*", or keyword-only after
        optional.append(name)
        if draw(st.booleans()):
            annotations[name] = draw(st.sampled_from(["int", "str | None", "'Any'"]))
    detail |= {"optional": optional, "annotations": annotations}
    surfaces = {**row.surfaces, cls: {**row.surfaces[cls], method: params}}
    details = {**row.details, cls: {**row.details.get(cls, {}), method: detail}}
    return dataclasses.replace(row, surfaces=surfaces, details=details)


def _unpack(data: bytes) -> list[int]:
    return list(struct.unpack(f">{len(data) // 4}I", data))


def _last(target: Any) -> tuple[str, tuple[Any, ...], dict[str, Any]]:
    return target._call_args[-1]  # type: ignore[no-any-return]


def _adapter(kind: type, row: ReleaseRow, cls: str) -> tuple[Any, Any]:
    target = instantiate(getattr(fake_module(row), cls))
    return kind(target), target


@seed(SEED)
@FUZZ
@given(data=st.data(), row=st.sampled_from(MP_ROWS))
def test_lookups_bind_to_changed_signatures(data: st.DataObject, row: ReleaseRow) -> None:
    cls, method = MP_SCHEDULER.name, "maybe_submit_lookup_request"
    changed = data.draw(changed_signature(row, cls, method))
    original, _ = _adapter(MPSchedulerAdapter, row, cls)
    adapter, target = _adapter(MPSchedulerAdapter, changed, cls)
    STATS["examples"] += 1
    assert adapter.capabilities.as_dict(MP_SCHEDULER) == original.capabilities.as_dict(
        MP_SCHEDULER
    ), changed.surfaces[cls][method]
    ids = data.draw(st.lists(st.integers(0, 2**31), max_size=12))
    forms: list[Any] = [list, tuple]
    if original.capabilities.as_dict(MP_SCHEDULER)["mp_packed_token_ids"]:  # or refused: a list
        forms.append(lambda x: struct.pack(f">{len(x)}I", *x))
    given_ids = data.draw(st.sampled_from(forms))(ids)
    salted = "cache_salt" in row.surfaces[cls][method]  # before, a salt is refused (documented)
    salt = {"cache_salt": "salt"} if salted else {}
    adapter.lookup("req-1", given_ids, block_hashes=["h"], **salt)
    name, args, kwargs = _last(target)
    assert name == method and not args
    assert kwargs["request_id"] == "req-1"
    if "packed_token_ids" in kwargs:
        assert _unpack(kwargs["packed_token_ids"]) == ids
    elif "token_ids" in kwargs:
        assert list(kwargs["token_ids"]) == ids
    else:
        assert kwargs["block_hashes"] == ["h"]
    if "cache_salt" in changed.surfaces[cls][method]:
        assert kwargs["cache_salt"] == "salt"


@seed(SEED)
@FUZZ
@given(data=st.data(), row=st.sampled_from(MP_ROWS), store=st.booleans())
def test_submits_bind_to_changed_signatures(
    data: st.DataObject, row: ReleaseRow, store: bool
) -> None:
    cls = MP_WORKER.name
    method = "submit_store_request" if store else "submit_retrieve_request"
    changed = data.draw(changed_signature(row, cls, method))
    original, _ = _adapter(MPWorkerAdapter, row, cls)
    adapter, target = _adapter(MPWorkerAdapter, changed, cls)
    STATS["examples"] += 1
    assert adapter.capabilities.as_dict(MP_WORKER) == original.capabilities.as_dict(MP_WORKER)
    op, event = object(), object()
    salted = "cache_salt" in row.surfaces[cls][method]
    getattr(adapter, method)("req-2", op, event, **({"cache_salt": "salt"} if salted else {}))
    name, args, kwargs = _last(target)
    assert name == method and not args
    assert (kwargs["request_id"], kwargs["op"], kwargs["event"]) == ("req-2", op, event)
    if "cache_salt" in changed.surfaces[cls][method]:
        assert kwargs["cache_salt"] == "salt"
