"""What changed between two releases, as typed records with a kind and an explanation.

:func:`diff_releases` compares two :class:`ReleaseView` objects (from the shipped matrix or a
scan) class by class, member by member, parameter by parameter, the way griffe reports API
breakage: each :class:`Change` has a :class:`ChangeKind` that says whether it breaks callers
and why. Rendering to text or JSON happens last (``lmcache-compat diff``).
"""

from __future__ import annotations

import enum
import inspect
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lmcache_compat.core.annotations import normalise, widens
from lmcache_compat.core.signatures import MethodFacts, from_json

if TYPE_CHECKING:
    from lmcache_compat.upstream.matrix import ReleaseRow
    from lmcache_compat.upstream.scanner import ScanResult

__all__ = ["Change", "ChangeKind", "ReleaseDiff", "ReleaseView", "diff_releases"]

P = inspect.Parameter


class ChangeKind(enum.Enum):
    """A kind of change, whether it breaks existing callers, and why."""

    CLASS_ADDED = ("class added", False, "new API; nothing existing changes")
    CLASS_REMOVED = ("class removed", True, "code that uses the class fails")
    CLASS_MOVED = (
        "class moved",
        True,
        "code that imports it by module path fails with ModuleNotFoundError (vLLM's in-tree "
        "LMCacheConnectorV1, kv_connector_module_path settings); finding it by name "
        "(lmcache-compat) still works",
    )
    CLASS_MOVED_REEXPORTED = (
        "class moved, old path re-exports it (deprecated)",
        False,
        "imports by the old module path keep working (the old module re-exports the class) "
        "until the shim is removed; move imports to the new path",
    )
    CLASS_AMBIGUOUS = (
        "class ambiguous",
        True,
        "it is gone from its known module and several modules define a matching class: "
        "finding it by name refuses to guess, and its capabilities cannot be decided",
    )
    METHOD_ADDED = ("method added", False, "new API; nothing existing changes")
    METHOD_REMOVED = ("method removed", True, "calls raise AttributeError")
    MEMBER_KIND_CHANGED = (
        "member kind changed",
        True,
        "a method became a property (or back): calls or reads of it break",
    )
    PARAMETER_ADDED = ("parameter added", False, "optional: existing calls bind unchanged")
    PARAMETER_ADDED_REQUIRED = (
        "required parameter added",
        True,
        "existing calls miss a required argument (TypeError)",
    )
    PARAMETER_RENAMED = (
        "parameter renamed",
        True,
        "calls passing it by keyword raise TypeError (positional callers still bind)",
    )
    PARAMETER_REMOVED = (
        "parameter removed",
        True,
        "calls passing it by keyword raise TypeError; positional callers shift",
    )
    PARAMETER_MOVED = (
        "parameters reordered",
        True,
        "positional callers pass values to the wrong parameters, often silently",
    )
    PARAMETER_KIND_CHANGED = (
        "parameter kind changed",
        True,
        "calls passing it the old way (positionally or by keyword) raise TypeError",
    )
    PARAMETER_BECAME_REQUIRED = (
        "parameter became required",
        True,
        "calls that leave it out raise TypeError",
    )
    PARAMETER_BECAME_OPTIONAL = ("parameter became optional", False, "existing calls still bind")
    PARAMETER_TYPE_CHANGED = (
        "parameter type changed",
        True,
        "callers passing the old type may fail, or be misread without an error",
    )
    PARAMETER_TYPE_WIDENED = (
        "parameter type widened",
        False,
        "every value of the old type is still accepted",
    )
    RETURN_CHANGED = (
        "return type changed",
        True,
        "callers that use the result may misread it",
    )
    RETURN_ADDED = (
        "now returns a value",
        False,
        "it returned None before, so no existing caller reads the result",
    )
    CAPABILITY_ADDED = ("capability added", False, "the release can do more")
    CAPABILITY_REMOVED = ("capability removed", True, "what the capability gave is lost")

    def __init__(self, label: str, breaking: bool, explanation: str) -> None:
        self.label = label
        self.breaking = breaking
        self.explanation = explanation


@dataclass(frozen=True)
class Change:
    kind: ChangeKind
    cls: str | None = None
    member: str | None = None
    parameter: str | None = None
    before: str | None = None
    after: str | None = None

    @property
    def breaking(self) -> bool:
        return self.kind.breaking

    def describe(self) -> str:
        """One line, without the class (the text output groups by class)."""
        k = self.kind
        if k in (ChangeKind.CAPABILITY_ADDED, ChangeKind.CAPABILITY_REMOVED):
            return f"{k.label}: {self.member}"
        if k in (ChangeKind.CLASS_ADDED, ChangeKind.CLASS_REMOVED):
            return k.label
        if k is ChangeKind.CLASS_MOVED:
            return f"moved: {self.before} -> {self.after}"
        if k is ChangeKind.CLASS_AMBIGUOUS:
            return f"{k.label}: {self.before} -> one of {self.after}"
        if k is ChangeKind.CLASS_MOVED_REEXPORTED:
            return f"moved: {self.before} -> {self.after} ({self.before} still re-exports it)"
        if k in (ChangeKind.METHOD_ADDED, ChangeKind.METHOD_REMOVED):
            return f"{k.label}: {self.member}"
        if k is ChangeKind.PARAMETER_RENAMED:
            return f"{self.member}: {k.label}: {self.before} -> {self.after}"
        where = self.member if self.parameter is None else f"{self.member}({self.parameter})"
        if k in (ChangeKind.PARAMETER_ADDED, ChangeKind.PARAMETER_ADDED_REQUIRED):
            return f"{where}: {k.label}" + (f": {self.after}" if self.after else "")
        if self.before is not None or self.after is not None:
            return f"{where}: {k.label}: {self.before} -> {self.after}"
        return f"{where}: {k.label}"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind.name.lower(), "breaking": self.breaking}
        for name in ("cls", "member", "parameter", "before", "after"):
            value = getattr(self, name)
            if value is not None:
                out["class" if name == "cls" else name] = value
        out["explanation"] = self.kind.explanation
        return out


@dataclass(frozen=True)
class ReleaseView:
    """What a diff compares: one release's classes, their modules and capabilities."""

    label: str | None
    classes: Mapping[str, Mapping[str, MethodFacts]]
    modules: Mapping[str, str] = field(default_factory=dict)
    capabilities: Mapping[str, bool] = field(default_factory=dict)
    #: class -> the modules that re-export it without defining it (deprecation shims).
    reexported_at: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: class -> the modules of its several matching definitions (none chosen), and the
    #: capabilities that therefore cannot be decided: neither is read as removed.
    ambiguous: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    undecided: frozenset[str] = frozenset()

    @classmethod
    def from_scan(cls, result: ScanResult) -> ReleaseView:
        return cls(
            result.lmcache_version or result.source,
            result.classes,
            result.modules,
            result.capabilities,
            result.reexported_at,
            result.ambiguous,
            frozenset(result.undecided),
        )

    @classmethod
    def from_row(cls, row: ReleaseRow) -> ReleaseView:
        return cls(row.version, row.classes(), row.modules, row.capabilities, row.reexported_at)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ReleaseView:
        details = data.get("details", {})
        classes: dict[str, dict[str, MethodFacts]] = {}
        for name, methods in data.get("surfaces", {}).items():
            classes[name] = {
                m: from_json(params, details.get(name, {}).get(m)) for m, params in methods.items()
            }
            for prop in data.get("properties", {}).get(name, ()):
                classes[name][prop] = MethodFacts(None, kind="property")
        return cls(
            data.get("lmcache_version") or data.get("source"),
            classes,
            data.get("modules", {}),
            data.get("capabilities", {}),
            {k: tuple(v) for k, v in data.get("reexported_at", {}).items()},
            {k: tuple(v) for k, v in data.get("ambiguous", {}).items()},
            frozenset(data.get("undecided", {})),
        )


@dataclass(frozen=True)
class ReleaseDiff:
    old: str | None
    new: str | None
    changes: tuple[Change, ...]

    @property
    def breaking(self) -> bool:
        return any(c.breaking for c in self.changes)

    def of_kind(self, kind: ChangeKind) -> list[Change]:
        return [c for c in self.changes if c.kind is kind]

    def to_json(self) -> dict[str, Any]:
        classes: dict[str, dict[str, Any]] = {}
        for c in self.changes:
            if c.cls is None:
                continue
            entry = classes.setdefault(c.cls, {})
            if c.kind is ChangeKind.CLASS_ADDED:
                entry["class_added"] = True
            elif c.kind is ChangeKind.CLASS_REMOVED:
                entry["class_removed"] = True
            elif c.kind is ChangeKind.CLASS_AMBIGUOUS:
                entry["ambiguous"] = {"from": c.before, "candidates": c.after}
            elif c.kind in (ChangeKind.CLASS_MOVED, ChangeKind.CLASS_MOVED_REEXPORTED):
                entry["moved"] = {
                    "from": c.before,
                    "to": c.after,
                    "old_path_reexports": c.kind is ChangeKind.CLASS_MOVED_REEXPORTED,
                }
            elif c.kind is ChangeKind.METHOD_ADDED:
                entry.setdefault("methods_added", []).append(c.member)
            elif c.kind is ChangeKind.METHOD_REMOVED:
                entry.setdefault("methods_removed", []).append(c.member)
            else:
                changed = entry.setdefault("methods_changed", {}).setdefault(c.member, [])
                changed.append(c.to_json())
        return {
            "from": self.old,
            "to": self.new,
            "capabilities_added": sorted(
                c.member or "" for c in self.of_kind(ChangeKind.CAPABILITY_ADDED)
            ),
            "capabilities_removed": sorted(
                c.member or "" for c in self.of_kind(ChangeKind.CAPABILITY_REMOVED)
            ),
            "classes": classes,
            "changes": [c.to_json() for c in self.changes],
            "breaking": self.breaking,
        }

    def format(self) -> str:
        lines = [f"LMCache {self.old} -> {self.new}" + ("  (BREAKING)" if self.breaking else "")]
        caps = [c for c in self.changes if c.cls is None]
        lines.extend(f"  {c.describe()}" for c in caps)
        by_class: dict[str, list[Change]] = {}
        for c in self.changes:
            if c.cls is not None:
                by_class.setdefault(c.cls, []).append(c)
        for cls, changes in by_class.items():
            lines.append(f"  {cls}:")
            for c in changes:
                mark = "  [breaking]" if c.breaking else ""
                lines.append(f"    {c.describe()}{mark}")
            for kind in (ChangeKind.CLASS_MOVED, ChangeKind.CLASS_MOVED_REEXPORTED):
                if any(c.kind is kind for c in changes):
                    lines.append(f"      ({kind.explanation})")
        if not self.changes:
            lines.append("  no differences in the scanned surfaces")
        return "\n".join(lines)


# --- comparing ------------------------------------------------------------------------------------


def _annotation(p: P) -> str | None:
    return None if p.annotation is P.empty else str(p.annotation)


def _positional(facts: MethodFacts) -> list[str]:
    return [p.name for p in facts.params if p.kind in (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD)]


def _type_change(cls: str, name: str, pname: str, ta: str | None, tb: str | None) -> list[Change]:
    if not ta or not tb:
        return []
    if normalise(ta) == normalise(tb):
        return []
    kind = (
        ChangeKind.PARAMETER_TYPE_WIDENED if widens(ta, tb) else ChangeKind.PARAMETER_TYPE_CHANGED
    )
    return [Change(kind, cls, name, pname, ta, tb)]


def _renames(a: MethodFacts, b: MethodFacts) -> dict[str, str]:
    """Old name -> new name for parameters that only changed name: the same positional index,
    the old name gone and the new one new."""
    pa, pb = a.signature.parameters, b.signature.parameters  # type: ignore[union-attr]
    old, new = _positional(a), _positional(b)
    out = {}
    for i, name in enumerate(old):
        if name not in pb and i < len(new) and new[i] not in pa:
            out[name] = new[i]
    return out


def _method_changes(cls: str, name: str, a: MethodFacts, b: MethodFacts) -> list[Change]:
    if a.kind != b.kind:
        return [Change(ChangeKind.MEMBER_KIND_CHANGED, cls, name, None, a.kind, b.kind)]
    if a.kind != "method" or a.signature is None or b.signature is None:
        return []
    renames = _renames(a, b)
    out = _renamed(cls, name, a, b, renames)
    out += _added_and_removed(cls, name, a, b, renames)
    before = [n for n in _positional(a) if n in b.signature.parameters]
    after = [n for n in _positional(b) if n in a.signature.parameters]
    if [n for n in before if n in after] != [n for n in after if n in before]:
        out.append(
            Change(ChangeKind.PARAMETER_MOVED, cls, name, None, ", ".join(before), ", ".join(after))
        )
    for pname, old in a.signature.parameters.items():
        new = b.signature.parameters.get(pname)
        if new is not None:
            out += _kept_parameter(cls, name, pname, old, new)
    ra, rb = a.returns, b.returns
    if ra and rb and normalise(ra) != normalise(rb):
        none_before = normalise(ra) == "None"  # nobody read a None result
        kind = ChangeKind.RETURN_ADDED if none_before else ChangeKind.RETURN_CHANGED
        out.append(Change(kind, cls, name, None, ra, rb))
    return out


def _renamed(
    cls: str, name: str, a: MethodFacts, b: MethodFacts, renames: dict[str, str]
) -> list[Change]:
    """Each renamed parameter, and its annotation's change across the rename."""
    assert a.signature is not None and b.signature is not None
    pa, pb = a.signature.parameters, b.signature.parameters
    out: list[Change] = []
    for old_name, new_name in renames.items():
        out.append(Change(ChangeKind.PARAMETER_RENAMED, cls, name, None, old_name, new_name))
        out.extend(
            _type_change(
                cls,
                name,
                f"{old_name} -> {new_name}",
                _annotation(pa[old_name]),
                _annotation(pb[new_name]),
            )
        )
    return out


def _added_and_removed(
    cls: str, name: str, a: MethodFacts, b: MethodFacts, renames: dict[str, str]
) -> list[Change]:
    """The parameters only one side has (a rename is neither)."""
    assert a.signature is not None and b.signature is not None
    pa, pb = a.signature.parameters, b.signature.parameters
    out = [
        Change(ChangeKind.PARAMETER_REMOVED, cls, name, pname)
        for pname in pa
        if pname not in pb and pname not in renames
    ]
    renamed_to = set(renames.values())
    for pname, p in pb.items():
        if pname in pa or pname in renamed_to:
            continue
        required = p.default is P.empty and p.kind not in (P.VAR_POSITIONAL, P.VAR_KEYWORD)
        kind = ChangeKind.PARAMETER_ADDED_REQUIRED if required else ChangeKind.PARAMETER_ADDED
        out.append(Change(kind, cls, name, pname, None, _annotation(p)))
    return out


def _kept_parameter(cls: str, name: str, pname: str, old: P, new: P) -> list[Change]:
    """What changed on a parameter both sides have: its kind, whether it is required, its
    annotation."""
    out: list[Change] = []
    if old.kind != new.kind:
        out.append(
            Change(
                ChangeKind.PARAMETER_KIND_CHANGED,
                cls,
                name,
                pname,
                old.kind.description,
                new.kind.description,
            )
        )
    variadic = (P.VAR_POSITIONAL, P.VAR_KEYWORD)
    if old.default is not P.empty and new.default is P.empty and new.kind not in variadic:
        out.append(Change(ChangeKind.PARAMETER_BECAME_REQUIRED, cls, name, pname))
    elif old.default is P.empty and new.default is not P.empty and old.kind not in variadic:
        out.append(Change(ChangeKind.PARAMETER_BECAME_OPTIONAL, cls, name, pname))
    out.extend(_type_change(cls, name, pname, _annotation(old), _annotation(new)))
    return out


def diff_releases(old: ReleaseView, new: ReleaseView) -> ReleaseDiff:
    """Every change from ``old`` to ``new``: capabilities, then class by class."""
    changes: list[Change] = []
    for cap, present in old.capabilities.items():
        if present and not new.capabilities.get(cap, False) and cap not in new.undecided:
            changes.append(Change(ChangeKind.CAPABILITY_REMOVED, member=cap))
    for cap, present in new.capabilities.items():
        if present and not old.capabilities.get(cap, False):
            changes.append(Change(ChangeKind.CAPABILITY_ADDED, member=cap))
    for cls in sorted(set(old.classes) | set(new.classes)):
        a, b = old.classes.get(cls), new.classes.get(cls)
        if a is None:
            changes.append(Change(ChangeKind.CLASS_ADDED, cls))
            continue
        if b is None and cls in new.ambiguous:
            after = ", ".join(new.ambiguous[cls])
            changes.append(
                Change(ChangeKind.CLASS_AMBIGUOUS, cls, None, None, old.modules.get(cls), after)
            )
            continue
        if b is None:
            changes.append(Change(ChangeKind.CLASS_REMOVED, cls))
            continue
        ma, mb = old.modules.get(cls), new.modules.get(cls)
        if ma and mb and ma != mb:
            shim = ma in new.reexported_at.get(cls, ())
            kind = ChangeKind.CLASS_MOVED_REEXPORTED if shim else ChangeKind.CLASS_MOVED
            changes.append(Change(kind, cls, None, None, ma, mb))
        for name in sorted(set(b) - set(a)):
            if b[name].kind == "method":
                changes.append(Change(ChangeKind.METHOD_ADDED, cls, name))
        for name in sorted(set(a) - set(b)):
            if a[name].kind == "method":
                changes.append(Change(ChangeKind.METHOD_REMOVED, cls, name))
        for name in sorted(set(a) & set(b)):
            changes.extend(_method_changes(cls, name, a[name], b[name]))
    return ReleaseDiff(old.label, new.label, tuple(changes))
