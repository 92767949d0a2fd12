"""Static scanning: what a release offers, read with ``ast`` and never imported.

:func:`scan` opens a wheel, an sdist, a source directory or the installed distribution
(:mod:`lmcache_compat.scan.sources`), finds each class LMCache integrations call where
:mod:`lmcache_compat.upstream.locations` says it lives, or by name anywhere in the package
(:mod:`lmcache_compat.upstream.resolve`), follows base classes defined in the same package, and
reports
each class's module, its public methods (plus ``__init__``; a dataclass without one gets the
``__init__`` its fields generate) and the catalog's capabilities, decided by the same rule as the
live probe (:func:`lmcache_compat.core.surface.release_capabilities`).
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lmcache_compat.budgets import Meter
from lmcache_compat.core.catalog import CATALOG
from lmcache_compat.core.signatures import MethodFacts, to_json
from lmcache_compat.core.surface import release_capabilities, render_surface, undecided
from lmcache_compat.errors import InvalidSourceError, NotLMCacheError
from lmcache_compat.scan.classreader import ClassReader, function_facts
from lmcache_compat.scan.modules import Index
from lmcache_compat.scan.sources import SourceTree
from lmcache_compat.scan.targets import open_source
from lmcache_compat.upstream import locations as loc
from lmcache_compat.upstream.resolve import locate_all

if TYPE_CHECKING:
    from lmcache_compat.upstream.matrix import ReleaseRow

__all__ = ["ScanResult", "scan", "scan_tree"]


@dataclass
class ScanResult:
    """What one scan found. :meth:`to_json` is the ``scan --json`` object."""

    source: str
    project: str | None
    version: str | None
    package: str
    classes: dict[str, dict[str, MethodFacts]]
    #: class -> the dotted module that defines it, and how it was found ("known" or "search").
    modules: dict[str, str] = field(default_factory=dict)
    found_by: dict[str, str] = field(default_factory=dict)
    #: The symbols (classes and functions) found nowhere.
    missing_classes: list[str] = field(default_factory=list)
    external_bases: dict[str, list[str]] = field(default_factory=dict)
    #: class -> the modules of the several definitions that match it (none was chosen).
    ambiguous: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: class -> its known modules that still provide it by re-exporting it from where it is
    #: now defined (``from new import *``, an explicit import, or an alias): deprecation shims.
    reexported_at: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: function -> its facts (functions the locations name: ``lmcache_get_config``).
    functions: dict[str, MethodFacts] = field(default_factory=dict)

    @property
    def lmcache_version(self) -> str | None:
        return self.version if self.package == loc.LMCACHE else None

    # Decided once per result (doctor asks for each capability): a result is complete when
    # scan_tree returns it, and nothing changes it after.
    @functools.cached_property
    def capabilities(self) -> dict[str, bool]:
        """Every catalog capability -> whether the scanned classes carry it (``False`` for the
        :attr:`undecided` ones too)."""
        return release_capabilities(self.classes)

    @functools.cached_property
    def undecided(self) -> dict[str, str]:
        """Capability -> why these files cannot decide it: its class is ambiguous (several
        candidates), or a rule cannot classify its member's annotation."""
        out = undecided(self.classes)
        for row in CATALOG:
            for owner in row.owners:
                if owner.name in self.ambiguous:
                    out[row.capability.value] = (
                        f"{owner.name} is ambiguous: several modules define a matching class "
                        f"({', '.join(self.ambiguous[owner.name])})"
                    )
        return out

    def surfaces(self) -> dict[str, dict[str, list[str]]]:
        return {cls: render_surface(methods) for cls, methods in sorted(self.classes.items())}

    def properties(self) -> dict[str, list[str]]:
        """Per class, its public properties (present; a probe never evaluates them)."""
        out = {
            cls: sorted(n for n, f in methods.items() if f.kind == "property")
            for cls, methods in sorted(self.classes.items())
        }
        return {cls: names for cls, names in out.items() if names}

    def details(self) -> dict[str, dict[str, dict[str, Any]]]:
        """Per method, what ``surfaces`` leaves out: parameters with defaults, annotations and
        the return annotation (source text), dataclass-generated ``__init__``."""
        out: dict[str, dict[str, dict[str, Any]]] = {}
        for cls, methods in sorted(self.classes.items()):
            for name, facts in sorted(methods.items()):
                if facts.kind != "method":
                    continue
                _, entry = to_json(facts)
                if entry:
                    out.setdefault(cls, {})[name] = entry
        return out

    def function_json(self) -> dict[str, dict[str, Any]]:
        """Per function, its parameters (as ``surfaces`` renders them) and its details."""
        out: dict[str, dict[str, Any]] = {}
        for name, facts in sorted(self.functions.items()):
            params, detail = to_json(facts)
            out[name] = {"params": params, **detail}
        return out

    @classmethod
    def from_row(cls, row: ReleaseRow, tree: SourceTree) -> ScanResult:
        """The scan of ``tree`` whose files are exactly ``row``'s release's (see
        :func:`lmcache_compat.upstream.known.shipped_row_of_tree`): the row's facts."""
        return cls(
            tree.description,
            tree.project,
            tree.version,
            tree.package,
            row.classes(),
            modules=dict(row.modules),
            found_by=dict(row.found_by),
            missing_classes=list(row.missing_classes),
            external_bases={k: list(v) for k, v in row.external_bases.items()},
            reexported_at={k: tuple(v) for k, v in row.reexported_at.items()},
            functions={n: f for n in row.functions if (f := row.function(n)) is not None},
        )

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"lmcache_version": self.lmcache_version, "source": self.source}
        if self.package != loc.LMCACHE:
            data[f"{self.package}_version"] = self.version
        data["capabilities"] = dict(self.capabilities)
        data["modules"] = dict(sorted(self.modules.items()))
        data["found_by"] = dict(sorted(self.found_by.items()))
        data["surfaces"] = self.surfaces()
        data["properties"] = self.properties()
        data["details"] = self.details()
        data["functions"] = self.function_json()
        data["missing_classes"] = sorted(self.missing_classes)
        data["external_bases"] = {k: v for k, v in sorted(self.external_bases.items()) if v}
        if self.ambiguous:  # absent from a release matrix row: no real release has it
            data["ambiguous"] = {k: list(v) for k, v in sorted(self.ambiguous.items())}
        if self.reexported_at:  # in a matrix row only where a release has such a shim
            data["reexported_at"] = {k: list(v) for k, v in sorted(self.reexported_at.items())}
        undecided_caps = self.undecided
        if undecided_caps:
            data["undecided"] = dict(sorted(undecided_caps.items()))
        return data


def scan_tree(tree: SourceTree, places: tuple[loc.Place, ...] = loc.LMCACHE_SCANNED) -> ScanResult:
    """Scan an opened :class:`SourceTree` for ``places`` (default: LMCache's classes)."""
    index = Index(tree)
    reader = ClassReader(index)
    result = ScanResult(tree.description, tree.project, tree.version, tree.package, {})
    try:
        located = locate_all(index, reader, places)
        result.ambiguous.update(located.ambiguous)
        result.reexported_at.update(located.reexported)
        for place in places:
            function = located.functions.get(place.name)
            if function is not None:
                fmodule, fnode, fhow = function
                result.functions[place.name] = function_facts(fnode, drop_first=False)
                result.modules[place.name] = fmodule.dotted
                result.found_by[place.name] = fhow
                continue
            found = located.found.get(place.name)
            if found is None:
                if place.name not in located.ambiguous:
                    result.missing_classes.append(place.name)
                continue
            module, node, how = found
            info = reader.info(module, node)
            result.classes[place.name] = {
                name: facts
                for name, facts in info.methods.items()
                if not name.startswith("_") or name == "__init__"
            }
            result.modules[place.name] = module.dotted
            result.found_by[place.name] = how
            if info.external:
                result.external_bases[place.name] = info.external
    except RecursionError:
        raise InvalidSourceError(f"{tree.description}: classes nest too deeply to read") from None
    if not result.classes and not result.ambiguous:
        raise NotLMCacheError(
            f"{tree.description}: none of the modules that define "
            f"{', '.join(p.name for p in places)} exist, nor is any of them defined anywhere "
            f"in its {tree.package}/ package (is this an LMCache release?)"
        )
    return result


def scan(
    target: str | os.PathLike[str] | None = None,
    *,
    vllm_native: bool = False,
    meter: Meter | None = None,
    known_rows: bool = True,
) -> ScanResult:
    """Scan a release without importing it: ``target`` is a ``.whl``, a ``.tar.gz``, a source
    directory or ``None`` (the installed distribution). ``vllm_native`` scans vLLM's vendored
    copy instead (in the installed vLLM, or in the vLLM wheel/directory given). The installed
    release whose files are exactly a shipped release's is answered from that release's row
    (:func:`lmcache_compat.upstream.known.shipped_row_of_tree`); ``known_rows=False`` (``scan
    --rescan``, and the tiers that test the scanner) reads its files whatever they are."""
    places = loc.NATIVE_SCANNED if vllm_native else loc.LMCACHE_SCANNED
    with open_source(target, places[0].package, meter) as tree:
        if target is None and not vllm_native and known_rows:
            from lmcache_compat.upstream.known import shipped_row_of_tree  # lazy: installed only
            from lmcache_compat.upstream.matrix import ReleaseRow  # lazy: as above

            row = shipped_row_of_tree(tree)
            if row is not None:
                return ScanResult.from_row(ReleaseRow.from_json(row), tree)
        return scan_tree(tree, places)
