"""What a release's loader does with a configuration name and a value: the loader modelled as
rows, and the one function that applies each table.

* :data:`NAME_RULES`: what a name from the file or the environment becomes, by the loader's
  alias rule (read from its code: :class:`~lmcache_compat.config.schema.LoaderFacts`) and where
  the name stands in the release's tables; :func:`resolve_name` applies them. From 0.3.4 to
  0.5.7rc2 ``_resolve_config_aliases`` maps an old name only when it is also in
  ``_DEPRECATED_CONFIGS``: an alias the deprecation table does not list is logged as unknown
  and its value dropped.
* :data:`CONVERTERS`: each converter a release's key table names, re-implemented here so a
  value is judged without running the release (the ``releases`` tier runs the real loaders on
  the same values and compares); :func:`convert` applies one, :func:`judge_value` says whether
  the result is what the file meant.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from lmcache_compat.config.schema import KeySpec, ReleaseSchema
from lmcache_compat.errors import UnsafeConfigError
from lmcache_compat.inputs import check_json, check_number

__all__ = [
    "CONVERTERS",
    "NAME_RULES",
    "Conversion",
    "NameOutcome",
    "NameRule",
    "convert",
    "judge_value",
    "resolve_name",
]

Effect = Literal["read", "renamed", "dropped"]
#: What a value check finds: the value is lost, or read as something else.
ValueEffect = Literal["dropped", "changed"]


@dataclass(frozen=True, slots=True)
class NameRule:
    """One row of what a loader does with an input name. ``None`` in a condition: any."""

    alias_rule: str
    deprecated: bool | None
    aliased: bool | None
    is_key: bool | None
    fallback: bool | None
    #: What the value is read as: the name itself, its alias, its code fallback, or nothing.
    reads_as: Literal["itself", "alias", "fallback"] | None
    #: What the loader logs (``unknown`` is silent where the release does not log unknown keys).
    log: Literal["deprecation", "unknown"] | None
    meaning: str


NAME_RULES: tuple[NameRule, ...] = (
    # 0.3.4 ... 0.5.7rc2: ``_resolve_config_aliases`` maps an alias only for deprecated names.
    NameRule(
        "deprecated-only", True, True, None, None, "alias", "deprecation",
        "deprecated: mapped to its alias, with a warning",
    ),
    NameRule(
        "deprecated-only", True, False, True, None, "itself", "deprecation",
        "deprecated, still a key: read as itself, with a warning",
    ),
    NameRule(
        "deprecated-only", True, False, False, None, None, "deprecation",
        "deprecated and not a key: warned about, then dropped",
    ),
    NameRule(
        "deprecated-only", False, None, True, None, "itself", None,
        "a key (its alias, if any, is not applied)",
    ),
    NameRule(
        "deprecated-only", False, None, False, None, None, "unknown",
        "not a key: logged as an unknown key and dropped (an alias the deprecation table does "
        "not list is never applied)",
    ),
    # A resolver that maps every alias (the EC overrides' normaliser, 0.4.5 on).
    NameRule("always", None, True, None, None, "alias", None, "mapped to its alias"),
    NameRule("always", None, False, True, None, "itself", None, "a key"),
    NameRule("always", None, False, False, None, None, "unknown", "not a key: dropped"),
    # 0.3.0 ... 0.3.3: no tables; the hand-written readers read each key by name, and a few old
    # names as fallbacks when the new one is unset.
    NameRule("none", None, None, True, None, "itself", None, "a key"),
    NameRule(
        "none", None, None, False, True, "fallback", "deprecation",
        "an old name its reader falls back to when the new one is unset, with a warning",
    ),
    NameRule(
        "none", None, None, False, False, None, "unknown",
        "not read: the reader asks for the names it knows only",
    ),
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class NameOutcome:
    """What one release does with one input name."""

    name: str
    #: The key the value lands in (``None``: dropped).
    key: str | None
    effect: Effect
    log: str | None
    rule: NameRule


def _matches(rule: NameRule, facts: Mapping[str, bool]) -> bool:
    return all(
        want is None or facts[field] == want
        for field, want in (
            ("deprecated", rule.deprecated),
            ("aliased", rule.aliased),
            ("is_key", rule.is_key),
            ("fallback", rule.fallback),
        )
    )


def resolve_name(
    schema: ReleaseSchema,
    name: str,
    source: Literal["file", "env"] = "file",
    alias_rule: str | None = None,
) -> NameOutcome:
    """What ``schema``'s loader does with ``name`` (a key name, not a variable name)."""
    rule_set = alias_rule or schema.loader.alias_rule
    fallbacks = schema.file_fallbacks if source == "file" else schema.env_fallbacks
    facts = {
        "deprecated": name in schema.deprecated,
        "aliased": name in schema.aliases,
        "is_key": name in schema.keys,
        "fallback": name in fallbacks,
    }
    rule = next(r for r in NAME_RULES if r.alias_rule == rule_set and _matches(r, facts))
    key = {
        "itself": name,
        "alias": schema.aliases.get(name),
        "fallback": fallbacks.get(name),
        None: None,
    }[rule.reads_as]
    if key is not None and key not in schema.keys:
        key = None  # mapped to a name that is not a key: never read
    log = rule.log
    if log == "unknown" and schema.loader.unknown_file_key == "silent":
        log = None
    effect: Effect = "read" if key == name else "renamed" if key else "dropped"
    return NameOutcome(name, key, effect, log, rule)


# --- converters -------------------------------------------------------------------------------


def _to_bool(value: Any, strip: bool) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip() if strip else str(value)
    return text.lower() in ["true", "1"]


def _int_list(value: Any) -> list[int] | None:
    if value is None:
        return None
    if isinstance(value, list):
        return [int(x) for x in value]
    if isinstance(value, int):
        return [value]
    return [int(p) for p in (p.strip() for p in str(value).split(",")) if p]


def _float_list(value: Any) -> list[float] | None:
    if value is None:
        return None
    if isinstance(value, list):
        return [float(x) for x in value]
    if isinstance(value, float):
        return [value]
    return [float(p) for p in (p.strip() for p in str(value).split(",")) if p]


def _str_list(value: Any) -> list[Any] | None:
    if value is None:
        return None
    if isinstance(value, list):
        return value
    return [p for p in (p.strip() for p in value.split(",")) if p]  # AttributeError on non-str


def _local_disk(value: Any) -> str | None:
    if value is None:
        return None
    parts = [p.strip() for p in str(value).split(",") if p.strip()]
    return ",".join(p[7:] if p.startswith("file://") else p for p in parts) or None


def _json(value: Any) -> Any:
    """``json.loads`` as the release calls it, its budgets checked first (the reader contract:
    a value nested past ``input_depth`` is one :class:`UnsafeConfigError` line, never the
    interpreter's RecursionError); invalid JSON raises the release's own JSONDecodeError."""
    if isinstance(value, str):
        check_json(value, "the value", UnsafeConfigError)
    return json.loads(value)


def _json_dict(value: Any) -> Any:
    return value if isinstance(value, dict) else _json(value) if value else None


def _env_dict(value: Any) -> Any:
    if value is None:
        return None
    parsed = _json(value)
    if not isinstance(parsed, dict):
        raise AssertionError("value must be a dict")
    return parsed


def _retrieve_mode(value: Any) -> str:
    if value is None:
        return "prefix_strict"
    text = str(value).strip().lower().replace("-", "_")
    if text in ("prefix_strict", "prefixstrict"):
        return "prefix_strict"
    if text in ("skip_missing_chunks", "skipmissingchunks", "legacy"):
        return "skip_missing_chunks"
    raise ValueError(f"hidden_states_retrieve_mode: {value!r}")


def _or_zero(cast: Callable[[Any], Any], zero: Any) -> Callable[[Any], Any]:
    return lambda v: zero if v is None else cast(v)


def _assert_dict(value: Any) -> Any:
    if not isinstance(value, dict):
        raise AssertionError("must be a dict")
    return value


#: Converter source text (as the schema records it) -> our re-implementation. Each mirrors the
#: release code it is named after, exceptions included.
CONVERTERS: Mapping[str, Callable[[Any], Any]] = {
    "int": int,
    "float": float,
    "str": str,
    "_to_bool": lambda v: _to_bool(v, strip=True),
    "lambda x: x if isinstance(x, bool) else str(x).lower() in ['true', '1']": (
        lambda v: _to_bool(v, strip=False)
    ),
    "_to_int_list": _int_list,
    "to_int_list": _int_list,
    "_to_float_list": _float_list,
    "_to_str_list": _str_list,
    "_parse_local_disk": _local_disk,
    "lambda x: x if isinstance(x, dict) else json.loads(x) if x else None": _json_dict,
    "lambda x: x if isinstance(x, list) else [x] if x else []": (
        lambda v: v if isinstance(v, list) else [v] if v else []
    ),
    "_to_hidden_states_retrieve_mode": _retrieve_mode,
    # the hand-written environment readers of 0.3.0 ... 0.3.3 (``from_env``)
    "to_int": _or_zero(int, 0),
    "to_float": _or_zero(float, 0.0),
    "to_bool": lambda v: False if v is None else v.lower() in ["true", "1"],
    "to_dict": _env_dict,
    # checks of the hand-written file readers of 0.3.0 ... 0.3.3 (the value is kept)
    "assert isinstance(x, dict)": _assert_dict,
}


@dataclass(frozen=True, slots=True)
class Conversion:
    """A converter's result, or the exception the release's converter raises."""

    value: Any = None
    error: str | None = None
    #: ``False``: the converter is not one lmcache-compat models (nothing is judged).
    modelled: bool = True


#: The converters that turn a string into numbers (``int()``, ``float()``, per comma-separated
#: part): their input is held to the ``number_chars`` budget first.
_NUMERIC = frozenset(
    {"int", "float", "to_int", "to_float", "_to_int_list", "to_int_list", "_to_float_list"}
)


def convert(converter: str | None, value: Any, where: str = "a value") -> Conversion:
    """``value`` through ``converter`` as the release would convert it (``None``: kept).

    Under the reader contract (:mod:`lmcache_compat.inputs`): a number longer than the
    ``number_chars`` budget, or JSON nested past ``input_depth``, raises one
    :class:`UnsafeConfigError` line naming ``where``, before the converter runs."""
    if converter is None or value is None:
        return Conversion(value)
    model = CONVERTERS.get(converter)
    if model is None:
        return Conversion(value, modelled=False)
    try:
        if converter in _NUMERIC and isinstance(value, str):
            for part in value.split(","):
                check_number(part, where, UnsafeConfigError)
        return Conversion(model(value))
    except UnsafeConfigError as exc:
        raise UnsafeConfigError(str(exc).replace("the value", where, 1)) from None
    except (ValueError, TypeError, AttributeError, AssertionError, OverflowError) as exc:
        error = "JSONDecodeError" if isinstance(exc, json.JSONDecodeError) else type(exc).__name__
        return Conversion(error=error)


#: Exceptions the loaders of the ``none`` conversion-error style catch (the rest propagate).
CAUGHT = frozenset({"ValueError", "JSONDecodeError"})

_OPTIONAL = re.compile(r"^Optional\[(.*)\]$")


def base_type(declared: str | None) -> tuple[str, bool]:
    """``("list[int]", True)`` for ``Optional[list[int]]``."""
    if declared is None:
        return "Any", True
    text = declared.replace(" ", "")
    m = _OPTIONAL.match(text)
    if m:
        return m.group(1).replace("List[", "list[").replace("Dict", "dict"), True
    return text.replace("List[", "list[").replace("Dict", "dict"), False


_ELEMENTS: Mapping[str, type | tuple[type, ...]] = {
    "list[int]": int,
    "list[float]": (int, float),
    "list[str]": str,
}
_BOOL_WORDS = {"true", "false", "1", "0"}


def _intended(value: Any) -> bool:
    return str(value).strip().lower() in ("true", "1")


def _fits(base: str, value: Any) -> bool:
    if base == "bool":
        return isinstance(value, bool)
    if base == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if base == "float":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if base == "str":
        return isinstance(value, str)
    if base == "dict":
        return isinstance(value, dict)
    if base in _ELEMENTS:
        return isinstance(value, list) and all(
            isinstance(x, _ELEMENTS[base]) and not isinstance(x, bool) for x in value
        )
    return True  # a type lmcache-compat does not judge


def _show(value: Any) -> str:
    text = repr(value) if not isinstance(value, str) else json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."


def judge_value(
    key: KeySpec, value: Any, conversion: Conversion, raw_mode: bool, env: bool = False
) -> tuple[ValueEffect, str] | None:
    """``None`` when the release reads ``value`` as the file meant it; else the effect and why.
    ``raw_mode``: the release takes file values as they are (0.3.0 ... 0.3.3); ``env``: the
    value is an environment variable's text."""
    base, optional = base_type(key.type)
    if value is None:
        if optional or key.default is None:
            return None
        return "changed", (
            f"null for a key that is not optional: it becomes None instead of its default "
            f"{_show(key.default)} (remove the line to keep the default)"
        )
    if raw_mode:
        if _fits(base, value) or (base == "float" and _fits("int", value)):
            return None
        return "changed", (
            f"{_show(value)} is kept as a {type(value).__name__}: this release does not convert "
            f"file values and the key is {key.type} (write it as a {base})"
        )
    if not conversion.modelled:
        return None
    if conversion.error is not None:
        return "dropped", f"{_show(value)} fails its converter ({conversion.error})"
    result = conversion.value
    if base == "bool" and not isinstance(value, bool):
        if env and (str(value).lower() not in _BOOL_WORDS or result != _intended(value)):
            return "changed", (
                f"{_show(value)} reads as {result}: only true or 1 is true (write true or false"
                + (", without spaces)" if str(value) != str(value).strip() else ")")
            )
        if not env and str(value).strip().lower() not in _BOOL_WORDS:
            return "changed", (
                f"{_show(value)} is not a YAML boolean: it reads as {result} "
                "(write true or false, unquoted)"
            )
        return None
    if isinstance(value, bool) and base not in ("bool", "Any"):
        return "changed", f"{_show(value)} reads as {_show(result)} for a {key.type} key"
    if base == "int" and isinstance(value, float) and value != result:
        return "changed", f"{_show(value)} reads as {result} (the fraction is dropped)"
    if not _fits(base, result):
        return "changed", f"{_show(value)} reads as {_show(result)}, not a {base}"
    if base == "str" and isinstance(value, (list, dict)):
        return "changed", f"{_show(value)} reads as the string {_show(result)}"
    return None
