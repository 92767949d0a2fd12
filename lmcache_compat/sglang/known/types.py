"""The JSON shapes of what the sglang reader finds (:mod:`lmcache_compat.sglang.known.reader`),
which the shipped sglang grid stores."""

from __future__ import annotations

from typing import TypedDict

__all__ = ["CallJSON", "ImportJSON", "IntegrationJSON", "MethodJSON", "SglangFacts"]


class ImportJSON(TypedDict):
    module: str
    names: list[str]
    #: The error sglang raises instead when the import fails (``None``: the ImportError itself
    #: propagates), and whether the import runs when the module is imported.
    guard: str | None
    at_import: bool


class CallJSON(TypedDict):
    callee: str
    mode: str
    positional: int
    #: keyword -> the source text of its value.
    keywords: dict[str, str]


class MethodJSON(TypedDict):
    classes: list[str]
    method: str
    mode: str
    positional: int
    #: The source text of the positional arguments (what sglang hands over).
    arguments: list[str]
    keywords: list[str]
    #: ``call`` or ``read`` (an attribute read on the connector).
    access: str


class IntegrationJSON(TypedDict):
    module: str
    cache_class: str
    imports: list[ImportJSON]
    calls: list[CallJSON]
    methods: list[MethodJSON]
    #: mode -> ``always`` / ``default`` / ``never`` / ``when <condition>``.
    modes: dict[str, str]


class SglangFacts(TypedDict):
    sglang: str | None
    integration: list[IntegrationJSON]
    plugin_group: str | None
    registry: bool
    context_fields: list[str]
    #: The internals the lmcache-compat backend builds on (``sglang.variants``).
    internals: dict[str, bool]
