"""Property tests of the reader contract on configuration files and MP front ends' replies.

Hypothesis writes YAML configuration files with every feature a user (or an attacker) may use:
block and flow style, plain, single- and double-quoted scalars, comments, anchors and aliases,
merge keys, tags (harmless and hostile), YAML 1.1 booleans and octals, numbers of any length and
overflowing floats, control characters, nesting of any depth, ``\\n``, ``\\r\\n`` or mixed line
endings, a byte order mark, and encodings other than UTF-8. And it writes HTTP reply bodies.

* ``config check`` and ``config migrate`` end in a documented status, with one line on stderr
  when it is an error, or a result; never a traceback.
* What ``migrate`` writes, read by PyYAML's ``safe_load`` (as LMCache reads it), equals the input
  read the same way, except for the keys the plan renames (and reshapes).
* A reply is a PEP 440 release string of at most 64 characters, ``None``, or "not an LMCache MP
  front end" with nothing unescaped in the message.

Fixed ``max_examples``, derandomized (the ``ci`` profile, the default): a run costs the same each
time. ``LMCACHE_COMPAT_FUZZ_PROFILE=thorough`` runs 20 times the examples, randomized.
"""

from __future__ import annotations

import io
import math
import os
from contextlib import redirect_stderr, redirect_stdout
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lmcache_compat.budgets import BUDGETS
from lmcache_compat.config.history import apply_transform
from lmcache_compat.config.migrate import migrate_file
from lmcache_compat.errors import LMCacheCompatError, NotAFrontEndError
from lmcache_compat.mp.server import RELEASE_CHARS, release_of_reply
from lmcache_compat.report.cli import main
from lmcache_compat.report.statuses import STATUSES, exit_status
from lmcache_compat.versions import parse_version

pytestmark = pytest.mark.fuzz

PROFILE = os.environ.get("LMCACHE_COMPAT_FUZZ_PROFILE", "ci")
SCALE = 20 if PROFILE == "thorough" else 1
DOCUMENTED = {s.code for s in STATUSES}


def _settings(examples: int) -> settings:
    return settings(
        max_examples=examples * SCALE,
        derandomize=PROFILE != "thorough",
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


# --- configuration files ----------------------------------------------------------------------

#: Keys real releases read (renamed, reshaped, removed ones included) and names none reads.
KEYS = [
    "chunk_size", "local_cpu", "max_local_cpu_size", "remote_url", "extra_config",
    "plugin_locations", "runtime_plugin_locations", "external_backends", "storage_plugins",
    "blend_recompute_ratio", "blend_recompute_ratios", "cufile_buffer_size", "gds_buffer_size",
    "error_handling", "nixl_role", "pd_role", "save_unfull_chunk", "lookup_server_worker_ids",
    "mla_lookup_server_worker_id", "nope", "x y", "é",
]  # fmt: skip
_NUMBERS = st.one_of(
    st.integers(-(2**70), 2**70).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["1e999", "1.0e+999", "-.inf", ".NaN", "0o17", "017", "0x1F", "1_000", "1:20"]),
    st.integers(1, 6000).map(lambda n: "9" * n),  # past every budget and digit limit
)
_WORDS = st.sampled_from(
    ["yes", "no", "on", "off", "null", "~", "true", "True", "/opt/p", "lm://h:1", "a: b", "#x"]
)
_TEXT = st.text(st.characters(codec="utf-8"), max_size=20)  # control characters included


@st.composite
def scalar(draw: st.DrawFn) -> str:
    """One scalar as YAML text: plain, quoted either way, tagged (sometimes hostile)."""
    kind = draw(st.sampled_from(["number", "word", "single", "double", "tag", "alias-ish"]))
    if kind == "number":
        return draw(_NUMBERS)
    if kind == "word":
        return draw(_WORDS)
    text = draw(_TEXT)
    if kind == "single":
        return "'" + text.replace("'", "''") + "'"
    if kind == "double":
        escaped = text.replace("\\", "\\\\").replace('"', '\\"')
        return '"' + "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in escaped) + '"'
    if kind == "tag":
        tag = draw(st.sampled_from(["!!str", "!!int", "!!float", "!!python/object:os.system"]))
        return f"{tag} {draw(_NUMBERS)}"
    return draw(st.sampled_from(["*a", "&a 1", "<<", "[", "}", "'"]))  # broken on purpose


@st.composite
def value(draw: st.DrawFn, depth: int = 0) -> str:
    """A value as flow YAML text (nested lists and mappings, or a scalar)."""
    if depth > 3 or draw(st.integers(0, 3)) < 2:
        return draw(scalar())
    if draw(st.booleans()):
        items = draw(st.lists(value(depth + 1), max_size=4))
        return "[" + ", ".join(items) + "]"
    items = [
        f"{k}: {draw(value(depth + 1))}" for k in draw(st.lists(st.sampled_from(KEYS), max_size=3))
    ]
    return "{" + ", ".join(items) + "}"


@st.composite
def config_file(draw: st.DrawFn) -> bytes:
    """A configuration file's bytes: keys with values in block or flow style, comments,
    anchors and merges, nesting of any depth, any line endings, a BOM, another encoding."""
    lines: list[str] = []
    if draw(st.booleans()):
        lines.append("# LMCache configuration")
    for key in draw(st.lists(st.sampled_from(KEYS), min_size=0, max_size=8)):
        shape = draw(st.sampled_from(["flow", "flow", "block-list", "block-map", "deep", "anchor"]))
        quoted = draw(st.sampled_from(["", "", "'", '"']))
        name = f"{quoted}{key}{quoted}"
        comment = draw(st.sampled_from(["", "", "  # note", " #x"]))
        if shape == "flow":
            lines.append(f"{name}: {draw(value())}{comment}")
        elif shape == "block-list":
            lines.append(f"{name}:{comment}")
            lines += [f"  - {draw(scalar())}" for _ in range(draw(st.integers(0, 3)))]
        elif shape == "block-map":
            lines.append(f"{name}:")
            lines += [
                f"  {k}: {draw(scalar())}"
                for k in draw(st.lists(st.sampled_from(KEYS), max_size=3))
            ]
        elif shape == "deep":
            n = draw(st.one_of(st.integers(1, 80), st.integers(1, 4000)))
            if draw(st.booleans()):
                lines.append(f"{name}: " + "[" * n + "]" * n)
            else:
                lines.append(f"{name}:")
                lines += [" " * (2 * i + 2) + "k:" for i in range(min(n, 400))]
        else:
            lines.append(f"{name}: &a {draw(scalar())}")
            lines.append(draw(st.sampled_from(["other: *a", "<<: {chunk_size: 1}", "more: *a"])))
    if draw(st.integers(0, 9)) == 0:
        lines.append(draw(st.sampled_from(["- a list at the top", "just a scalar", "---", "..."])))
    ending = draw(st.sampled_from(["\n", "\n", "\r\n", "mixed"]))
    if ending == "mixed":
        text = "".join(line + draw(st.sampled_from(["\n", "\r\n"])) for line in lines)
    else:
        text = ending.join(lines) + (ending if lines else "")
    if draw(st.integers(0, 5)) == 0:
        text = "\ufeff" + text
    encoding = draw(st.sampled_from(["utf-8"] * 8 + ["utf-16", "latin-1"]))
    return text.encode(encoding, errors="replace")


_SAFE_NUMBERS = st.one_of(
    st.integers(-(2**40), 2**40).map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.sampled_from(["1e999", "1.0e+999", "-.inf", ".NaN", "0o17", "017", "0x1F", "1_000", "1:20"]),
)
_SAFE_TEXT = st.text(
    st.characters(codec="utf-8", categories=["L", "N", "P", "S", "Zs"]), max_size=12
)


@st.composite
def safe_scalar(draw: st.DrawFn) -> str:
    """A scalar every YAML reader takes: plain, quoted either way, or harmlessly tagged."""
    kind = draw(st.sampled_from(["number", "word", "single", "double", "tag"]))
    if kind == "number":
        return draw(_SAFE_NUMBERS)
    if kind == "word":
        return draw(_WORDS.filter(lambda w: w not in ("a: b", "#x")))
    text = draw(_SAFE_TEXT)
    if kind == "single":
        return "'" + text.replace("'", "''") + "'"
    if kind == "double":
        escaped = text.replace("\\", "\\\\").replace('"', '\\"')
        return '"' + escaped + draw(st.sampled_from(["", "\\x01", "\\u00e9", "\\n"])) + '"'
    return f"!!str {draw(_SAFE_NUMBERS)}"


@st.composite
def valid_config(draw: st.DrawFn) -> bytes:
    """A file a user writes: unique keys (the renamed ones among them) in block or flow style,
    comments in their columns, an anchor and its alias, a merge key, any line endings, a BOM."""
    keys = draw(st.lists(st.sampled_from(KEYS), unique=True, max_size=8))
    lines = ["# LMCache configuration"] if draw(st.booleans()) else []
    if draw(st.integers(0, 4)) == 0:
        lines.append("base: &base {chunk_size: 256}")
        lines.append("<<: *base")
    anchored = False
    for key in keys:
        quoted = draw(st.sampled_from(["", "", "", "'", '"']))
        name = f"{quoted}{key}{quoted}"
        comment = draw(st.sampled_from(["", "", "   # note", " # x"]))
        shape = draw(st.sampled_from(["scalar", "scalar", "flow", "block", "anchor", "alias"]))
        if shape == "alias" and anchored:
            lines.append(f"{name}: *v{comment}")
        elif shape == "anchor" and not anchored:
            lines.append(f"{name}: &v {draw(safe_scalar())}{comment}")
            anchored = True
        elif shape == "flow":
            items = draw(st.lists(safe_scalar(), max_size=3))
            lines.append(f"{name}: [{', '.join(items)}]{comment}")
        elif shape == "block":
            lines.append(f"{name}:{comment}")
            lines += [f"  - {draw(safe_scalar())}" for _ in range(draw(st.integers(1, 3)))]
        else:
            lines.append(f"{name}: {draw(safe_scalar())}{comment}")
    ending = draw(st.sampled_from(["\n", "\n", "\r\n", "mixed"]))
    if ending == "mixed":
        text = "".join(line + draw(st.sampled_from(["\n", "\r\n"])) for line in lines)
    else:
        text = ending.join(lines) + (ending if lines else "")
    bom = "\ufeff" if draw(st.integers(0, 5)) == 0 else ""
    return (bom + text).encode("utf-8")


def _cli(args: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(args)
    return code, out.getvalue(), err.getvalue()


@_settings(400)
@given(data=config_file(), target=st.sampled_from(["0.3.5", "0.3.9", "0.5.6", "0.5.7rc2"]))
def test_check_is_one_line_and_a_documented_status_or_a_result(
    tmp_path_factory: pytest.TempPathFactory, data: bytes, target: str
) -> None:
    path = tmp_path_factory.mktemp("check") / "lmcache.yaml"
    path.write_bytes(data)
    code, out, err = _cli(["config", "check", str(path), "--lmcache", target, "--no-env"])
    assert code in DOCUMENTED
    if code in (0, 1):
        assert err == "" and f"LMCache {target} reading" in out
    else:
        assert out == "" and err.count("\n") == 1 and "Traceback" not in err, err
        assert not any(ord(c) < 32 and c != "\n" for c in err)


@_settings(300)
@given(
    data=st.one_of(valid_config(), valid_config(), valid_config(), config_file()),
    pair=st.sampled_from([("0.3.5", "0.5.6"), ("0.3.9", "0.5.6"), ("0.5.6", "0.3.9")]),
)
def test_migrate_keeps_every_value_but_the_planned_moves(
    tmp_path_factory: pytest.TempPathFactory, data: bytes, pair: tuple[str, str]
) -> None:
    source, target = pair
    folder = tmp_path_factory.mktemp("migrate")
    path = folder / "lmcache.yaml"
    path.write_bytes(data)
    out = folder / "out.yaml"
    try:
        result = migrate_file(path, target, source=source, out=out)
    except LMCacheCompatError as exc:
        assert exit_status(exc) in DOCUMENTED
        assert "\n" not in str(exc).strip()
        assert path.read_bytes() == data and not out.exists()  # nothing written, input intact
        return
    assert path.read_bytes() == data  # the input is never touched
    written = out.read_bytes()
    assert written == result.text.encode("utf-8")
    before = yaml.safe_load(data.decode("utf-8")) or {}
    after = yaml.safe_load(written.decode("utf-8")) or {}
    moved = {r.old: r for r in result.plan.rewrites}
    expected: dict[Any, Any] = {}
    for key, old in before.items():
        rewrite = moved.get(key)
        if rewrite is None:
            expected[key] = old
            continue
        new = old
        for transform in rewrite.transforms:
            new = apply_transform(transform, new)
        expected[rewrite.new] = new
    assert _same(after, expected), (after, expected)
    assert list(after) == list(expected)
    ending_in, ending_out = b"\r\n" in data, b"\r\n" in written
    assert ending_in == ending_out and data.startswith(b"\xef\xbb\xbf") == written.startswith(
        b"\xef\xbb\xbf"
    )


def _same(a: Any, b: Any) -> bool:
    """Equal as values, NaN equal to NaN (a float that is not a number is read twice)."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b) and type(a) is type(b)


# --- MP front ends' replies ------------------------------------------------------------------


_VERSIONS = st.sampled_from(["0.5.6", "0.5.7rc2", "0.4.5", "1!2.0.post3.dev4+local.7", "v0.3.9"])


@st.composite
def reply(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["json", "plain", "binary", "text", "deep", "long", "json-any"]))
    if kind == "json":
        return f'"{draw(st.one_of(_VERSIONS, _TEXT))}"'.encode()
    if kind == "plain":
        return (draw(_VERSIONS) + draw(st.sampled_from(["", "\n", "\r\n", " "]))).encode()
    if kind == "binary":
        return draw(st.binary(max_size=200))
    if kind == "text":
        return draw(_TEXT).encode("utf-8", "surrogatepass")
    if kind == "deep":
        n = draw(st.integers(1, 2000))
        return draw(st.sampled_from([b"[", b"{", b'{"a":'])) * n
    if kind == "long":
        return ("0." + "1" * draw(st.integers(60, 4000))).encode()
    return yaml.safe_dump(draw(st.recursive(st.none() | _TEXT, st.lists))).encode()


@_settings(1000)
@given(body=reply())
def test_a_reply_is_a_release_string_or_not_a_front_end(body: bytes) -> None:
    try:
        release = release_of_reply(body, "http://h:1")
    except NotAFrontEndError as exc:
        text = str(exc)
        assert "is not an LMCache MP front end" in text and "\n" not in text
        assert not any(ord(c) < 32 or 0x7F <= ord(c) < 0xA0 for c in text), text
        return
    if release is not None:
        assert 0 < len(release) <= RELEASE_CHARS and release == release.strip()
        parse_version(release)


def test_the_budgets_are_fixed_numbers_not_the_interpreters() -> None:
    import sys

    assert (BUDGETS.input_depth, BUDGETS.number_chars, BUDGETS.version_chars) == (64, 100, 128)
    assert BUDGETS.input_depth * 4 < sys.getrecursionlimit()  # well inside every interpreter's
