"""Reading an LMCache configuration file as LMCache reads it, with line numbers.

LMCache reads its file with PyYAML's ``yaml.safe_load``: YAML 1.1 scalars (``yes`` and ``on``
are booleans, ``0755`` is octal), the last of duplicate keys wins silently, merge keys
(``<<``) are applied, and a tag that would construct an object (``!!python/object``...) is
refused. :func:`read_config_bytes` does exactly that, through PyYAML's own safe loader, and
keeps what ``safe_load`` throws away: the line of each key and every line a duplicate key is on.

Every bad input is one :class:`~lmcache_compat.errors.ConfigFileError` line, never a traceback
(the reader contract, :mod:`lmcache_compat.inputs`): not UTF-8, not YAML (a control character
included), a hostile tag, a value no constructor can convert, a top level that is not a mapping,
aliases that expand past the budget (an alias bomb), a file over its size, depth or number
budget (:class:`~lmcache_compat.budgets.Budgets` ``config_bytes``, ``config_nodes``,
``input_depth``, ``number_chars``: the last two measured on the text before PyYAML reads it).
PyYAML is an optional dependency (``pip install 'lmcache-compat[config]'``).
"""

from __future__ import annotations

import os
from collections.abc import Hashable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lmcache_compat.budgets import BUDGETS, Budgets
from lmcache_compat.errors import (
    ConfigFileError,
    MissingExtraError,
    ScanError,
    SourceNotFoundError,
    UnsafeConfigError,
)
from lmcache_compat.inputs import check_yaml, guarded, shown
from lmcache_compat.scan.sources import read_regular_file

__all__ = ["YamlDocument", "extra_hint", "read_config_bytes", "read_config_file", "require"]


def extra_hint() -> str:
    """How to install the optional dependencies of the configuration commands, in the form
    that works where lmcache-compat came from (:func:`lmcache_compat.installation.install_hint`)."""
    from lmcache_compat.installation import install_hint  # lazy: only a refusal needs it

    return install_hint("config")


def require(module: str, what: str) -> Any:
    """Import the optional dependency ``module`` (``yaml``) or raise one line
    naming the extra that brings it."""
    import importlib  # lazy: optional dependency

    try:
        return importlib.import_module(module)
    except ImportError:
        top = module.split(".", maxsplit=1)[0]
        raise MissingExtraError(
            f"{what} needs {top!r}, which is not installed (HINT: {extra_hint()})"
        ) from None


@dataclass(frozen=True)
class YamlDocument:
    """A configuration file as ``safe_load`` reads it, plus where each key is."""

    where: str
    #: The top-level mapping (``None``: an empty document).
    mapping: dict[Any, Any] | None
    #: key -> the 1-based line of the occurrence that wins.
    lines: dict[Any, int] = field(default_factory=dict)
    #: key -> every line it is on, for keys written more than once (the last wins).
    duplicates: dict[Any, list[int]] = field(default_factory=dict)
    #: Keys that come from a merge key (``<<: *anchor``), not written in the mapping itself.
    merged: frozenset[Any] = frozenset()
    text: str = ""
    #: key -> ``(key start, key end, value start, value end)``: character offsets in ``text``
    #: of the winning occurrence of each key written in the mapping (what ``migrate`` edits).
    spans: dict[Any, tuple[int, int, int, int]] = field(default_factory=dict)


def _expanded_size(value: Any, limit: int) -> int:
    """How many nodes ``value`` has once its aliases are expanded, counting up to ``limit``."""
    count, stack = 0, [value]
    while stack:
        item = stack.pop()
        count += 1
        if count > limit:
            return count
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple, set)):
            stack.extend(item)
    return count


def read_config_bytes(data: bytes, where: str, budgets: Budgets | None = None) -> YamlDocument:
    """``data`` read as LMCache's ``yaml.safe_load`` reads a file (see the module doc)."""
    budgets = budgets or BUDGETS
    if len(data) > budgets.config_bytes:
        raise UnsafeConfigError(
            f"{where}: {len(data)} bytes: over the cap (budget config_bytes={budgets.config_bytes})"
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ConfigFileError(
            f"{where}:{line}: not UTF-8 (byte {exc.start}: {data[exc.start : exc.start + 1]!r}); "
            "LMCache opens the file as text and fails with UnicodeDecodeError: save it as UTF-8"
        ) from None
    check_yaml(text, where, UnsafeConfigError, budgets)
    yaml = require("yaml", "reading a YAML configuration")
    loader = None
    try:
        with guarded(where, ConfigFileError, what="cannot be read as YAML"):
            loader = yaml.SafeLoader(text)  # its reader refuses control characters at once
            return _compose(loader, yaml, text, where, budgets)
    except yaml.constructor.ConstructorError as exc:
        mark = exc.problem_mark
        at = f":{mark.line + 1}" if mark is not None else ""
        problem = shown(" ".join(str(exc.problem or exc).split()))
        if "constructor for the tag" in problem:
            raise UnsafeConfigError(
                f"{where}{at}: {problem}: a tag that would construct an object is refused, "
                "never run (LMCache's safe_load refuses it too)"
            ) from None
        raise ConfigFileError(f"{where}{at}: {problem}") from None
    except yaml.reader.ReaderError as exc:  # a character YAML does not allow (a control one)
        line = text.count("\n", 0, exc.position) + 1
        raise ConfigFileError(
            f"{where}:{line}: not valid YAML (character '{shown(chr(exc.character))}' at "
            f"position {exc.position}: YAML does not allow control characters; LMCache's "
            "safe_load fails on it too)"
        ) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f":{mark.line + 1}" if mark is not None else ""
        problem = shown(" ".join(str(getattr(exc, "problem", None) or exc).split()))
        raise ConfigFileError(f"{where}{at}: not valid YAML ({problem})") from None
    finally:
        if loader is not None:
            loader.dispose()


def _compose(loader: Any, yaml: Any, text: str, where: str, budgets: Budgets) -> YamlDocument:
    node = loader.get_single_node()
    if node is None:
        return YamlDocument(where, None, text=text)
    if not isinstance(node, yaml.MappingNode):
        kind = {"SequenceNode": "a list", "ScalarNode": "a scalar"}.get(type(node).__name__, "?")
        raise ConfigFileError(
            f"{where}:{node.start_mark.line + 1}: the top level is {kind}, not a mapping of keys: "
            "LMCache's loader fails on it (AttributeError)"
        )
    explicit = {id(k) for k, _ in node.value if k.tag != "tag:yaml.org,2002:merge"}
    loader.flatten_mapping(node)
    mapping: dict[Any, Any] = {}
    lines: dict[Any, int] = {}
    seen: dict[Any, list[int]] = {}
    merged: set[Any] = set()
    spans: dict[Any, tuple[int, int, int, int]] = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if not isinstance(key, Hashable):
            raise ConfigFileError(
                f"{where}:{key_node.start_mark.line + 1}: a key that is a "
                f"{type(key).__name__}: safe_load refuses it (found unhashable key)"
            )
        value = loader.construct_object(value_node, deep=True)
        if _expanded_size(value, budgets.config_nodes) > budgets.config_nodes:
            raise UnsafeConfigError(
                f"{where}:{key_node.start_mark.line + 1}: the value of {key!r} expands to more "
                f"than {budgets.config_nodes} nodes through its aliases (an alias bomb?): over "
                f"the cap (budget config_nodes={budgets.config_nodes})"
            )
        line = key_node.start_mark.line + 1
        mapping[key] = value
        lines[key] = line
        if id(key_node) in explicit:
            seen.setdefault(key, []).append(line)
            merged.discard(key)
            spans[key] = (
                key_node.start_mark.index,
                key_node.end_mark.index,
                value_node.start_mark.index,
                value_node.end_mark.index,
            )
        else:
            merged.add(key)
            spans.pop(key, None)
    duplicates = {k: v for k, v in seen.items() if len(v) > 1}
    return YamlDocument(where, mapping, lines, duplicates, frozenset(merged), text, spans)


def read_config_file(path: str | os.PathLike[str], budgets: Budgets | None = None) -> YamlDocument:
    """A configuration file read as LMCache reads it (a missing or special file: one line)."""
    budgets = budgets or BUDGETS
    where = str(path)
    if not os.path.lexists(path):
        raise SourceNotFoundError(f"{where}: no such file")
    try:
        data = read_regular_file(Path(path), budgets.config_bytes, "config_bytes", where)
    except ScanError as exc:  # over the budget, a special file, permissions: one line
        raise UnsafeConfigError(" ".join(str(exc).split())) from None
    return read_config_bytes(data, where, budgets)
