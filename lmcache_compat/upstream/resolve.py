"""Finding upstream classes: at a known path, else by name anywhere in the package.

:func:`locate_all` is the static rule (the scanner's): for each :class:`~lmcache_compat.
locations.Place`, its known modules first (newest first, following re-exports within the
package); otherwise every Python file of the package that defines a class of that name is a
candidate, and the candidate whose members include the role's core methods
(:func:`identifying_members`) is taken. Several matching candidates are refused
(:class:`~lmcache_compat.errors.AmbiguousLocationError` names them): guessing would bind a
connector to the wrong class.

:func:`find` is the same rule at run time: the installed package's files are read (nothing is
imported while looking), then only the module that defines the symbol is imported. A release
that moves a class (LMCache 0.5.7rc2 moved ``LMCacheConnectorV1Impl`` under
``lmcache.inprocess``) therefore needs no code change.
"""

from __future__ import annotations

import ast
import functools
import importlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from lmcache_compat.budgets import Meter
from lmcache_compat.core.roles import role_named
from lmcache_compat.errors import AmbiguousLocationError, ScanError, UpstreamNotFoundError
from lmcache_compat.scan.classreader import ClassReader
from lmcache_compat.scan.modules import Index, Module
from lmcache_compat.scan.sources import directory_tree, package_root
from lmcache_compat.upstream.locations import Place
from lmcache_compat.versions import version_or_none

__all__ = [
    "Where",
    "clear_find_cache",
    "find",
    "identifying_members",
    "locate_all",
    "static_members",
    "where",
]


def identifying_members(place: Place) -> tuple[str, ...]:
    """The members a definition must have to be ``place`` (a role's core methods, else the
    place's own ``core``)."""
    role = role_named(place.name)
    return tuple(name for name, _ in role.core) if role is not None else place.core


def _under(relpath: str, dotted: str) -> bool:
    """Whether the file ``relpath`` is the module ``dotted`` or inside the package ``dotted``."""
    base = dotted.replace(".", "/")
    return relpath.startswith(base + "/") or relpath == base + ".py"


FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef


def _known(
    index: Index, reader: ClassReader, place: Place
) -> tuple[tuple[Module, ast.ClassDef, str] | None, tuple[str, ...]]:
    """The first of ``place``'s known modules that provides it (defining it, or re-exporting
    it from elsewhere in the package), and every known module that re-exports that definition
    without defining it (a deprecation shim left at an old path)."""
    first: tuple[Module, ast.ClassDef, str] | None = None
    shims: list[str] = []
    for dotted in place.modules:
        module = index.module_by_dotted(dotted)
        if module is None:
            continue
        hit = reader.resolve(module, place.name)
        if hit is None or (first is not None and hit[1] is not first[1]):
            continue
        if first is None:
            first = (*hit, "known")
        if hit[0] is not module:
            shims.append(dotted)
    return first, tuple(shims)


def _known_function(index: Index, place: Place) -> tuple[Module, FunctionNode, str] | None:
    for dotted in place.modules:
        module = index.module_by_dotted(dotted)
        if module is not None and place.name in module.functions:
            return module, module.functions[place.name], "known"
    return None


def _matches(reader: ClassReader, module: Module, node: ast.ClassDef, place: Place) -> bool:
    wanted = identifying_members(place)
    if not wanted:
        return True
    info = reader.info(module, node)
    members = set(info.methods) | {p.name for p in info.fields or ()}
    return all(name in members for name in wanted)


@dataclass(frozen=True, slots=True)
class Located:
    """Where each place was found, and the places several definitions match."""

    #: class name -> (module, class node, ``"known"`` | ``"search"``).
    found: dict[str, tuple[Module, ast.ClassDef, str]]
    #: class name -> the dotted modules of the matching candidates (none was chosen).
    ambiguous: dict[str, tuple[str, ...]]
    #: class name -> the modules that re-export it without defining it: its known modules (a
    #: shim left at an old path) and the modules of the other places found (a module importing
    #: it at its top level: ``from <that module> import <class>`` works).
    reexported: dict[str, tuple[str, ...]]
    #: function name -> (module, function node, ``"known"`` | ``"search"``).
    functions: dict[str, tuple[Module, FunctionNode, str]] = field(default_factory=dict)

    def error(self, description: str, place: Place) -> AmbiguousLocationError:
        return AmbiguousLocationError(
            f"{description}: {place.name} is at none of its known paths "
            f"({', '.join(place.modules)}) and several modules define a matching "
            f"{place.kind}: {', '.join(self.ambiguous[place.name])}; none was chosen",
            self.ambiguous[place.name],
        )


def locate_all(index: Index, reader: ClassReader, places: tuple[Place, ...]) -> Located:
    """Each place found (at a known path, else by name), and the ambiguous ones."""
    located = Located({}, {}, {})
    missing = _at_known_paths(index, reader, places, located)
    if missing:
        candidates = _candidates(index, missing)
        for place in missing:
            _choose(reader, place, candidates[place.name], located)
    return _with_reexports(reader, located)


def _at_known_paths(
    index: Index, reader: ClassReader, places: tuple[Place, ...], located: Located
) -> list[Place]:
    """Fill ``located`` with the places found at a known path; the places that were not."""
    missing: list[Place] = []
    for place in places:
        if place.kind == "function":
            fhit = _known_function(index, place)
            if fhit is None:
                missing.append(place)
            else:
                located.functions[place.name] = fhit
            continue
        hit, shims = _known(index, reader, place)
        if hit is None:
            missing.append(place)
        else:
            located.found[place.name] = hit
        if shims:
            located.reexported[place.name] = shims
    return missing


def _candidates(index: Index, missing: list[Place]) -> dict[str, list[Module]]:
    """name -> the modules under the places' search roots that define a class or function of
    that name (files are only parsed when a byte search finds a definition line)."""
    names = sorted({p.name for p in missing})
    pattern = re.compile(
        rb"^[ \t]*(?:class|def|async[ \t]+def)[ \t]+("
        + b"|".join(re.escape(n.encode()) for n in names)
        + rb")\b",
        re.MULTILINE,
    )
    candidates: dict[str, list[Module]] = {n: [] for n in names}
    roots = {p.search_under for p in missing}
    for relpath in index.tree.python_files():
        if not any(_under(relpath, r) for r in roots):
            continue
        data = index.tree.read(relpath, limit=index.tree.meter.budgets.source_bytes)
        if not data or not pattern.search(data):  # a file too big to parse is skipped
            continue
        module = index.module(relpath)
        if module is None:
            continue
        for name in names:
            if name in module.classes or name in module.functions:
                candidates[name].append(module)
    return candidates


def _choose(reader: ClassReader, place: Place, modules: list[Module], located: Located) -> None:
    """The one candidate of ``place`` that is admitted and matches it, into ``located``; more
    than one is recorded as ambiguous, none leaves it missing."""
    usable = [
        m for m in modules if _under(m.relpath, place.search_under) and place.admits(m.dotted)
    ]
    if place.kind == "function":
        hits = [(m, m.functions[place.name]) for m in usable if place.name in m.functions]
        if len(hits) > 1:
            located.ambiguous[place.name] = tuple(sorted(m.dotted for m, _ in hits))
        elif hits:
            located.functions[place.name] = (*hits[0], "search")
        return
    matching = [
        (m, m.classes[place.name])
        for m in usable
        if place.name in m.classes and _matches(reader, m, m.classes[place.name], place)
    ]
    if len(matching) > 1:
        located.ambiguous[place.name] = tuple(sorted(m.dotted for m, _ in matching))
    elif matching:
        module, node = matching[0]
        located.found[place.name] = (module, node, "search")


def _with_reexports(reader: ClassReader, located: Located) -> Located:
    """``located`` with, for each class found, the modules of the other places found that bind
    it at their top level (an import, an alias, a star import) without defining it: LMCache
    0.5.6's ``unified_lmcache_mp_connector`` imports ``SGLangKVComponentGroup`` and the
    operation classes, so importing them from it works."""
    modules = {m.dotted: m for m, _, _ in located.found.values()}
    modules |= {m.dotted: m for m, _, _ in located.functions.values()}
    for name, (home, node, _) in located.found.items():
        extra = [
            dotted
            for dotted, module in sorted(modules.items())
            if module is not home
            and dotted not in located.reexported.get(name, ())
            and (hit := reader.resolve(module, name)) is not None
            and hit[1] is node
        ]
        if extra:
            located.reexported[name] = tuple(sorted({*located.reexported.get(name, ()), *extra}))
    return located


# --- run time -------------------------------------------------------------------------------------


class Where(NamedTuple):
    """Where a place is defined in the importable package."""

    #: The dotted module that defines it.
    module: str
    #: ``"known"`` (reached from one of its known modules) or ``"search"`` (found by name).
    how: str
    #: The name it is defined under there (a renamed class keeps its old name as an alias).
    name: str


@functools.cache
def where(place: Place) -> Where:
    """The module defining ``place`` in the importable package, read from its files (nothing
    imported). Cached; :func:`clear_find_cache` forgets."""
    root = package_root(place.package)
    if root is None:
        raise UpstreamNotFoundError(
            f"cannot find {place.name}: {place.package} is not installed "
            f"(HINT: pip install {place.package})"
        )
    with directory_tree(root, place.package, Meter()) as tree:
        index = Index(tree)
        try:
            located = locate_all(index, ClassReader(index), (place,))
        except ScanError as exc:
            raise UpstreamNotFoundError(f"cannot find {place.name}: {exc}") from None
        if place.name in located.ambiguous:
            raise located.error(index.tree.description, place)
        hit = located.found.get(place.name) or located.functions.get(place.name)
    if hit is None:
        raise _not_found(place, root)
    return Where(hit[0].dotted, hit[2], hit[1].name)


def _not_found(place: Place, root: Path) -> UpstreamNotFoundError:

    from lmcache_compat.installation import install_hint  # lazy: only a refusal needs it

    version = version_or_none(place.package) or "unknown version"
    return UpstreamNotFoundError(
        f"{place.name} is not defined in the installed {place.package} ({version}, "
        f"{root / place.package}): not at its known paths ({', '.join(place.modules)}) nor "
        f"anywhere under {place.search_under}. This release does not ship it.\n"
        f"HINT: {install_hint(upgrade=True)} (a newer one may know this release), or run "
        f"'lmcache-compat doctor' to see what the installed {place.package} offers"
    )


@functools.cache
def static_members(place: Place) -> frozenset[str]:
    """The member names of class ``place`` in the importable package (bases in the package
    included), read from its files: nothing imported. Cached with :func:`where`."""
    found = where(place)
    root = package_root(place.package)
    assert root is not None  # where() found it
    with directory_tree(root, place.package, Meter()) as tree:
        index = Index(tree)
        reader = ClassReader(index)
        module = index.module_by_dotted(found.module)
        hit = None if module is None else reader.resolve(module, found.name)
        if hit is None:
            raise _not_found(place, root)
        return frozenset(reader.info(*hit).methods)


def find(place: Place) -> Any:
    """The upstream class (or function) of ``place``: located statically, then only its
    defining module is imported. Errors importing that module propagate unchanged."""

    found = where(place)
    module = importlib.import_module(found.module)
    value = vars(module).get(found.name)
    if value is None:
        raise UpstreamNotFoundError(
            f"{found.module} defines {found.name} in its source, but not once imported"
        )
    return value


def clear_find_cache() -> None:
    """Forget where upstream symbols were found (after installing another release in-process)."""
    where.cache_clear()
    static_members.cache_clear()
