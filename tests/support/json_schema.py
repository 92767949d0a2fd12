"""A validator for the subset of JSON Schema (2020-12) that ``doctor.schema.json`` uses:
``type`` (a name or a list), ``enum``, ``pattern``, ``properties``, ``required``,
``additionalProperties`` (a boolean or a schema), ``items``, ``anyOf`` and ``$ref`` to
``#/$defs/NAME``. Anything else in a schema is an error, so the file cannot use a keyword this
does not check (the runtime dependency stays ``packaging`` alone, and the test group gains
none)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["KEYWORDS", "validate"]

KEYWORDS = frozenset(
    {
        "type",
        "enum",
        "pattern",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "anyOf",
        "$ref",
        # annotations only
        "$schema",
        "$id",
        "$defs",
        "title",
        "description",
    }
)
_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "null": (type(None),),
}


def _is(value: object, name: str) -> bool:
    if name in ("integer", "number") and isinstance(value, bool):
        return False
    return isinstance(value, _TYPES[name])


def validate(
    value: object,
    schema: Mapping[str, Any],
    root: Mapping[str, Any] | None = None,
    where: str = "$",
) -> list[str]:
    """Every place ``value`` breaks ``schema`` (empty: it conforms)."""
    root = schema if root is None else root
    unknown = set(schema) - KEYWORDS
    if unknown:
        return [f"{where}: the schema uses {sorted(unknown)}, which this validator does not check"]
    if "$ref" in schema:
        name = schema["$ref"].removeprefix("#/$defs/")
        return validate(value, root["$defs"][name], root, where)
    errors: list[str] = []
    if "anyOf" in schema and all(validate(value, s, root, where) for s in schema["anyOf"]):
        errors.append(f"{where}: matches none of anyOf")
    types = schema.get("type")
    if types is not None:
        names = [types] if isinstance(types, str) else types
        if not any(_is(value, n) for n in names):
            return [*errors, f"{where}: {type(value).__name__} is not {'/'.join(names)}"]
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{where}: {value!r} is not one of {schema['enum']}")
    if "pattern" in schema and isinstance(value, str) and not re.search(schema["pattern"], value):
        errors.append(f"{where}: {value!r} does not match {schema['pattern']}")
    if isinstance(value, dict):
        props = schema.get("properties", {})
        for key in schema.get("required", ()):
            if key not in value:
                errors.append(f"{where}: {key!r} is required")
        extra = schema.get("additionalProperties", True)
        for key, item in value.items():
            if key in props:
                errors += validate(item, props[key], root, f"{where}.{key}")
            elif extra is False:
                errors.append(f"{where}: {key!r} is not a property of the schema")
            elif isinstance(extra, dict):
                errors += validate(item, extra, root, f"{where}.{key}")
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            errors += validate(item, schema["items"], root, f"{where}[{i}]")
    return errors
