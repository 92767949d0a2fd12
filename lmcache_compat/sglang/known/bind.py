"""Binding what an sglang release calls against what an LMCache release offers.

:func:`bind_pair` takes the facts of an sglang release
(:mod:`lmcache_compat.sglang.known.reader`) and a row of the shipped release matrix (or a
scan of an installed LMCache, made into a row) and says, per mode sglang's own cache can run
in, whether it works, and if not, the exact reason, as Python would report it:

1. every import line must find its module, and each name where the release defines it or in a
   module that imports it at its top level (``ReleaseRow.reexported_at``: what Python binds
   there, so the import works); a failure inside sglang's ``try`` is reported as the error
   sglang raises instead, with the real cause beside it. A pair whose imports work is bound
   on, so its real failure (a ``TypeError`` from a call) is the one reported;
2. every call of a connector, metadata record or ``lmcache_get_config`` is bound with
   :meth:`inspect.Signature.bind` (placeholders for the values), dataclass ``__init__``s
   included;
3. every connector method sglang calls, in the mode it calls it in, must exist and bind;
4. the known behaviours a signature cannot show (:mod:`lmcache_compat.sglang.known.issues`:
   the ``tp_group`` sglang hands over) add conditions or failures.

Nothing is imported: both sides are facts read from files.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal, TypedDict

from lmcache_compat.core.signatures import MethodFacts
from lmcache_compat.sglang.known.issues import BehaviourIssue, behaviour_issues
from lmcache_compat.sglang.known.reader import (
    CONNECTOR_MODES,
    CallJSON,
    ImportJSON,
    IntegrationJSON,
    MethodJSON,
    SglangFacts,
)
from lmcache_compat.upstream.matrix import ReleaseRow

__all__ = [
    "ModeJSON",
    "PairJSON",
    "PairVerdict",
    "bind_integration",
    "bind_pair",
    "default_mode",
]

Status = Literal["works", "broken", "none"]
#: sglang's mode names (``LMCacheMode``) -> the connector modes they build.
_MODE_CLASSES = {"IP": ("in-process",), "MP": ("mp", "unified-mp")}


class ModeJSON(TypedDict):
    mode: str
    #: How sglang reaches it: ``always`` / ``default`` / ``never`` / ``when <condition>``.
    reach: str
    status: Status
    reasons: list[str]
    #: Works, except under these conditions (``tp_size > 1: ...``).
    conditions: list[str]


class PairJSON(TypedDict):
    lmcache: str
    status: Status
    modes: list[ModeJSON]


@dataclass(frozen=True, slots=True)
class PairVerdict:
    """sglang's own integration over one LMCache release, per mode."""

    lmcache: str
    modes: tuple[ModeJSON, ...] = field(default=())

    @property
    def default(self) -> ModeJSON | None:
        return default_mode(self.modes)

    @property
    def status(self) -> Status:
        """The status of the mode sglang runs by default (``none``: no LMCache integration)."""
        found = self.default
        return "none" if found is None else found["status"]

    def to_json(self) -> PairJSON:
        return {"lmcache": self.lmcache, "status": self.status, "modes": list(self.modes)}


def default_mode(modes: Iterable[ModeJSON]) -> ModeJSON | None:
    """The mode sglang runs in unless told otherwise."""
    modes = list(modes)
    return next((m for m in modes if m["reach"] in ("always", "default")), None)


def _first_missing(dotted: str, present: set[str]) -> str:
    """The first prefix of ``dotted`` that is no module or package of the release."""
    parts = dotted.split(".")
    for i in range(1, len(parts) + 1):
        prefix = ".".join(parts[:i])
        if prefix not in present:
            return prefix
    return dotted


def _import_error(line: ImportJSON, row: ReleaseRow) -> str | None:
    modules = set(row.modules.values())
    present = {".".join(m.split(".")[:i]) for m in modules for i in range(1, m.count(".") + 2)}
    module = line["module"]
    if module not in present:
        return f"ModuleNotFoundError: No module named {_first_missing(module, present)!r}"
    for name in line["names"]:
        where = row.modules.get(name)
        reexported = module in row.reexported_at.get(name, ())  # the module imports it: it works
        if where is not None and where != module and not reexported:
            return f"ImportError: cannot import name {name!r} from {module!r} (it is in {where})"
        if where is None and name in row.missing_classes:
            return f"ImportError: cannot import name {name!r} from {module!r}"
    return None


def _signature(row: ReleaseRow, callee: str) -> MethodFacts | None:
    if callee in row.functions:
        return row.function(callee)
    return row.facts(callee).get("__init__")


def _bind(facts: MethodFacts, positional: int, keywords: Iterable[str]) -> str | None:
    if facts.signature is None:
        return None
    names = [k for k in keywords if not k.startswith("**")]
    try:
        facts.signature.bind(*range(positional), **dict.fromkeys(names))
    except TypeError as exc:
        return str(exc)
    return None


def _call_error(call: CallJSON, row: ReleaseRow) -> str | None:
    facts = _signature(row, call["callee"])
    if facts is None:
        return None  # not in this release: its import already failed
    error = _bind(facts, call["positional"], call["keywords"])
    return None if error is None else f"TypeError: {call['callee']}() {error}"


def _use_error(use: MethodJSON, cls: str, row: ReleaseRow) -> str | None:
    if cls not in row.surfaces and cls not in row.properties:
        return None
    member = row.facts(cls).get(use["method"])
    if use["access"] == "read":
        return None  # a method, a property or an instance attribute: all readable
    if member is None:
        return f"AttributeError: {cls!r} object has no attribute {use['method']!r}"
    if member.kind == "property":
        return None  # a property holding a callable: not checked
    error = _bind(member, use["positional"], use["keywords"])
    return None if error is None else f"TypeError: {cls}.{use['method']}() {error}"


def _classes_in(mode: str, classes: Iterable[str]) -> list[str]:
    """The connector classes a use in sglang's ``mode`` (``IP``/``MP``/``shared``) runs on."""
    if mode == "shared":
        return list(classes)
    return [c for c in classes if CONNECTOR_MODES[c] in _MODE_CLASSES[mode]]


def _applies(mode: str, connector_mode: str) -> bool:
    return mode == "shared" or connector_mode in _MODE_CLASSES.get(mode, ())


def _integration(module: IntegrationJSON, row: ReleaseRow) -> list[ModeJSON]:
    shared: list[str] = []
    for line in module["imports"]:
        error = _import_error(line, row)
        if error is None:
            continue
        where = "at import" if line["at_import"] else "when the cache is built"
        if line["guard"] is not None:
            shared.append(f"{line['guard']} (sglang's message; the real cause, {where}: {error})")
        else:
            shared.append(f"{error} (uncaught, {where} of {module['module']})")
        break  # the first failing import stops the module
    out: list[ModeJSON] = []
    connectors = _connectors_of(module)
    for cls, connector_mode in sorted(connectors.items(), key=lambda kv: kv[1]):
        reasons = list(shared)
        conditions: list[str] = []
        if not reasons:
            for call in module["calls"]:
                if _applies(call["mode"], connector_mode) and (
                    call["callee"] not in CONNECTOR_MODES or call["callee"] == cls
                ):
                    error = _call_error(call, row)
                    if error is not None:
                        reasons.append(error)
            for use in module["methods"]:
                if cls in _classes_in(use["mode"], use["classes"]):
                    error = _use_error(use, cls, row)
                    if error is not None:
                        reasons.append(error)
            for found in behaviour_issues(module, cls, row):
                (reasons if found.always else conditions).append(_issue_text(found))
        out.append(
            {
                "mode": connector_mode,
                "reach": module["modes"].get(connector_mode, "always"),
                "status": "broken" if reasons else "works",
                "reasons": list(dict.fromkeys(reasons)),
                "conditions": conditions,
            }
        )
    return out


def _issue_text(found: BehaviourIssue) -> str:
    return found.text if found.always else f"{found.condition}: {found.text}"


def _connectors_of(module: IntegrationJSON) -> dict[str, str]:
    return {
        c["callee"]: CONNECTOR_MODES[c["callee"]]
        for c in module["calls"]
        if c["callee"] in CONNECTOR_MODES
    }


def bind_pair(facts: SglangFacts, row: ReleaseRow) -> PairVerdict:
    """sglang's own LMCache integration (every cache module it has) over ``row``'s release."""
    return bind_integration(facts["integration"], row)


def bind_integration(integration: Iterable[IntegrationJSON], row: ReleaseRow) -> PairVerdict:
    """:func:`bind_pair` of the integration facts alone (a run of the shipped grid)."""
    modes: list[ModeJSON] = []
    for module in integration:
        if _connectors_of(module):
            modes += _integration(module, row)
    return PairVerdict(row.version, tuple(modes))
