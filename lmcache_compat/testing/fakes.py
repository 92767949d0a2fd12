"""Fake LMCache classes generated at run time from a row of the shipped release matrix.

Each generated class has exactly the row's members: method names, parameter names, kinds and
order, which parameters have defaults, annotations and return annotations (as source text,
never evaluated), ``async def`` where the release has it, properties, and for dataclasses
(``LoadStoreOp``, ``ParallelStrategy``) real dataclasses with the row's fields. So
:func:`lmcache_compat.probe` of a fake equals the row, and a release added to the matrix is
covered with no code change.

Instances are test doubles (:class:`Fake`): they build with no arguments, record every call
(``fake.calls``), answer by the one rule of :mod:`lmcache_compat.testing.shapes`, and take
:func:`set_result` / :func:`set_raises` / :func:`set_delay`. Faults are injected with
:mod:`lmcache_compat.testing.faults`.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import keyword
import struct
import sys
import threading
import time
import types
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from lmcache_compat.core.catalog import Capability
from lmcache_compat.testing.shapes import empty_value
from lmcache_compat.upstream.locations import PACK_TOKEN_IDS
from lmcache_compat.upstream.matrix import ReleaseRow, load_matrix

__all__ = [
    "UNSET",
    "Call",
    "Fake",
    "fake",
    "fake_class",
    "fake_module",
    "instance",
    "pack_tokens",
    "queue",
    "release_row",
    "set_delay",
    "set_raises",
    "set_result",
]

#: The capabilities whose member says whether the engine is healthy: a fake is healthy until
#: a fault says otherwise, so these members answer ``True`` (not the empty value ``False``).
#: ``engine_health`` (``health() -> int``, 0 is healthy) needs no entry: its empty value is 0.
HEALTH: tuple[Capability, ...] = (Capability.MP_HEALTH_CHECK, Capability.ENGINE_IS_HEALTHY)
HEALTH_MEMBERS: frozenset[str] = frozenset(c.spec.method for c in HEALTH)


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


#: The default every generated optional parameter really has, so a call records only what the
#: caller passed (the signature shows the release's literal default where the data has one).
UNSET: Any = _Unset()


@dataclass(frozen=True, slots=True)
class Call:
    """One recorded call: the member, the positional arguments and the keywords passed."""

    name: str
    args: tuple[Any, ...]
    kwargs: Mapping[str, Any]


class Fake:
    """Base of generated fakes. Its own members are private (underscored) so a fake's public
    surface is exactly the release's; tests drive it with :func:`set_result`,
    :func:`set_raises`, :func:`set_delay` and the faults, and read ``fake.calls`` (an instance
    attribute, so probes never see it)."""

    #: The release this class fakes, its row and each member's return annotation (set per
    #: class).
    _release: ClassVar[str] = ""
    _row: ClassVar[ReleaseRow]
    _returns: ClassVar[Mapping[str, str | None]] = {}
    #: A fake keeps no retrieve futures: its ``get_finished`` and load errors answer what a test
    #: sets (:mod:`lmcache_compat.mp.retrieves` reads a real release's source instead).
    _lmcache_compat_retrieve_records: ClassVar[None] = None

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        self = super().__new__(cls)
        self._setup()
        return self

    def _setup(self, *args: Any, **kwargs: Any) -> None:
        self._init = (args, {k: v for k, v in kwargs.items() if v is not UNSET})
        if "calls" in self.__dict__:  # the generated __init__ after __new__: keep the state
            return
        #: Every call so far, in order.
        self.calls: list[Call] = []
        self._calls: list[str] = []
        self._call_args: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
        self._results: dict[str, Any] = {}
        self._raises: dict[str, BaseException] = {}
        self._queued: dict[str, Any] = {}
        self._delays: dict[str, float] = {}
        self._lock = threading.Lock()

    def _member(self, name: str) -> None:
        if name not in type(self)._returns:
            raise AttributeError(
                f"LMCache {self._release} {type(self).__name__} has no member {name!r}"
            )

    def _answer(self, name: str) -> Any:
        exc = self._raises.get(name)
        if exc is not None:
            raise exc
        delay = self._delays.get(name)
        if delay:
            time.sleep(delay)
        with self._lock:
            if name in self._queued:
                return self._queued.pop(name)
        if name in self._results:
            return self._results[name]
        if name in HEALTH_MEMBERS and self._returns.get(name) in (None, "bool"):
            return True
        return empty_value(self._returns.get(name))

    def _called(self, name: str, *args: Any, **kwargs: Any) -> Any:
        passed = {k: v for k, v in kwargs.items() if v is not UNSET}
        self._calls.append(name)
        self._call_args.append((name, args, passed))
        self.calls.append(Call(name, args, passed))
        return self._answer(name)


def _fake(obj: object) -> Fake:
    if not isinstance(obj, Fake):
        raise TypeError(f"not a fake of lmcache_compat.testing: {obj!r}")
    return obj


def set_result(fake: object, name: str, value: Any) -> None:
    """Make ``name`` (a method or property of the fake's release) answer ``value`` from now on."""
    f = _fake(fake)
    f._member(name)
    f._results[name] = value


def set_raises(fake: object, name: str, exc: BaseException) -> None:
    """Make ``name`` raise ``exc`` from now on (an engine error a connector must let out)."""
    f = _fake(fake)
    f._member(name)
    f._raises[name] = exc


def set_delay(fake: object, name: str, seconds: float) -> None:
    """Make ``name`` take ``seconds`` before it answers."""
    f = _fake(fake)
    f._member(name)
    f._delays[name] = seconds


def queue(fake: object, name: str, items: Any) -> None:
    """Add ``items`` (a set, a list) to what ``name`` answers on its next call only: it
    drains, like the release's own reporting methods do."""
    f = _fake(fake)
    f._member(name)
    with f._lock:
        held = f._queued.get(name)
        if held is None:
            f._queued[name] = type(items)(items)
        elif isinstance(held, set):
            held.update(items)
        else:
            held.extend(items)


def _param_source(params: list[str], detail: Mapping[str, Any]) -> tuple[str, str]:
    """(signature source without self, the call forwarding every parameter). Annotations are
    the row's source text, kept as strings (never evaluated); every default is :data:`UNSET`,
    so a call records only what the caller passed (:func:`_literals` then shows the release's
    literal defaults in the signature)."""
    optional = set(detail.get("optional", ()))
    annotations: Mapping[str, str] = detail.get("annotations", {})
    sig, call = [], []
    for token in params:
        name = token.lstrip("*")
        if token not in ("/", "*") and not (name.isidentifier() and not keyword.iskeyword(name)):
            raise ValueError(f"release matrix: {token!r} is not a parameter name")
        text = f"{token}: {annotations[name]!r}" if name in annotations else token
        if token in optional:
            text += "=UNSET"  # the recorded literal is shown by __signature__ (see _literals)
        sig.append(text)
        if token.startswith("**"):
            call.append(f"**{name}")
        elif token.startswith("*") and token != "*":
            call.append(f"*{name}")
        elif token not in ("/", "*"):
            call.append(f"{name}={name}")
    return ", ".join(sig), ", ".join(call)


def _dataclass_source(row: ReleaseRow, cls_name: str) -> list[str]:
    """A real dataclass with the row's fields; its other methods answer by the one rule and
    its properties answer ``None`` (the data records no property annotation)."""
    surface = row.surfaces[cls_name]
    details = row.details.get(cls_name, {})
    detail = details.get("__init__", {})
    fields = detail.get("annotations", {})
    optional = set(detail.get("optional", ()))
    literals = detail.get("defaults", {})
    lines = ["@dataclasses.dataclass", f"class {cls_name}:"]
    for token in surface["__init__"]:
        if token == "*":
            lines.append("    _: dataclasses.KW_ONLY")
            continue
        # no literal recorded (e.g. `field(default_factory=...)`): a default that is not one
        default = f" = {literals.get(token, 'UNSET')}" if token in optional else ""
        lines.append(f"    {token}: {fields.get(token) or 'object'!r}{default}")
    for name, params in surface.items():
        if name == "__init__":
            continue
        sig, _ = _param_source(params, details.get(name, {}))
        returns = details.get(name, {}).get("returns")
        arrow = f" -> {returns!r}" if returns is not None else ""
        lines.append(f"    def {name}(self{', ' if sig else ''}{sig}){arrow}:")
        lines.append(f"        return empty_value({returns!r})")
    for name in row.properties.get(cls_name, ()):
        lines.append(f"    @property\n    def {name}(self):\n        return None")
    return lines


def _class_source(row: ReleaseRow, cls_name: str) -> list[str]:
    surface = row.surfaces[cls_name]
    details = row.details.get(cls_name, {})
    if details.get("__init__", {}).get("dataclass"):
        return _dataclass_source(row, cls_name)
    lines = [f"class {cls_name}(Fake):"]
    for name, params in surface.items():
        detail = details.get(name, {})
        sig, call = _param_source(params, detail)
        returns = f" -> {detail['returns']!r}" if "returns" in detail else ""
        target = "_setup" if name == "__init__" else "_called"
        first = "" if name == "__init__" else f"{name!r}, "
        define = "async def" if detail.get("async") else "def"
        lines.append(f"    {define} {name}(self{', ' if sig else ''}{sig}){returns}:")
        lines.append(f"        return self.{target}({first}{call})")
    for name in row.properties.get(cls_name, ()):
        lines.append(f"    @property\n    def {name}(self):\n        return self._answer({name!r})")
    return lines


def _literals(cls: type, row: ReleaseRow, cls_name: str) -> None:
    """Give each generated method whose row records literal defaults a ``__signature__`` with
    them (what ``inspect.signature`` and probes read): the release's exact signature, while
    the function itself keeps :data:`UNSET` to tell what a caller passed."""
    for name, detail in row.details.get(cls_name, {}).items():
        literals: Mapping[str, str] = detail.get("defaults", {})
        func = cls.__dict__.get(name)
        if not literals or not isinstance(func, types.FunctionType):
            continue
        sig = inspect.signature(func)
        params = [
            p.replace(default=ast.literal_eval(literals[p.name])) if p.name in literals else p
            for p in sig.parameters.values()
        ]
        func.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]


def _returns(row: ReleaseRow, cls_name: str) -> dict[str, str | None]:
    details = row.details.get(cls_name, {})
    out: dict[str, str | None] = {
        name: details.get(name, {}).get("returns")
        for name in row.surfaces[cls_name]
        if name != "__init__"
    }
    out.update(dict.fromkeys(row.properties.get(cls_name, ())))
    return out


def pack_tokens(token_ids: Any) -> bytes:
    """A stand-in for LMCache 0.5.7rc2's ``token_codec.pack_token_ids`` (big-endian uint32);
    the real tier compares the adapters' output with the real codec."""
    ids = list(token_ids)
    return struct.pack(f">{len(ids)}I", *ids)


def release_row(release: str) -> ReleaseRow:
    """The shipped row of ``release``; a version the data does not know is refused with
    :class:`~lmcache_compat.errors.NotInMatrixError` naming the closest known releases
    (:meth:`~lmcache_compat.upstream.matrix.ReleaseMatrix.known_row`)."""
    return load_matrix().known_row(release)


def fake_module(release: str | ReleaseRow) -> types.ModuleType:
    """A module holding fakes of every class the release's row describes (cached per row: the
    shipped one, or another such as :func:`lmcache_compat.testing.installed.installed_row`)."""
    row = release if isinstance(release, ReleaseRow) else release_row(release)
    name = f"lmcache_compat_fakes_{row.version.replace('.', '_')}_{row.sha256[:12]}"
    cached = sys.modules.get(name)
    if cached is not None:
        return cached
    module = types.ModuleType(name, f"Fakes of the LMCache {row.version} classes.")
    module.__dict__.update(
        {
            "Fake": Fake,
            "UNSET": UNSET,
            "dataclasses": dataclasses,
            "empty_value": empty_value,
            # a stand-in for the release's token codec, found beside the MP adapter class
            PACK_TOKEN_IDS.name: pack_tokens,
        }
    )
    source: list[str] = []
    for cls_name in row.surfaces:
        source += [*_class_source(row, cls_name), ""]
    code = compile(
        "\n".join(source), f"<fakes of LMCache {row.version}>", "exec", dont_inherit=True
    )
    sys.modules[name] = module  # dataclasses look their module up while they are made
    try:
        exec(code, module.__dict__)
    except BaseException:
        del sys.modules[name]
        raise
    for cls_name in row.surfaces:
        cls = module.__dict__[cls_name]
        cls.__module__ = name
        if issubclass(cls, Fake):
            cls._release = row.version
            cls._row = row
            cls._returns = _returns(row, cls_name)
            _literals(cls, row, cls_name)
    return module


def fake_class(release: str | ReleaseRow, name: str) -> type[Any]:
    """The fake of class ``name`` (``LMCacheConnectorV1Impl``, ``LMCacheEngine``...) of
    ``release``; ``LookupError`` naming the classes the release has if it has no ``name``."""
    module = fake_module(release)
    cls = module.__dict__.get(name)
    if not isinstance(cls, type):
        version = release if isinstance(release, str) else release.version
        have = sorted(k for k, v in module.__dict__.items() if isinstance(v, type) and k != "Fake")
        raise LookupError(f"LMCache {version} has no class {name!r} (it has: {', '.join(have)})")
    return cls


def fake(release: str | ReleaseRow, name: str) -> Any:
    """An instance of :func:`fake_class` built with no arguments (the generated ``__init__``
    keeps the release's signature; it is not run). Dataclasses are returned as classes."""
    return instance(fake_class(release, name))


def instance(cls: type[Any]) -> Any:
    """An instance of the generated class ``cls`` built with no arguments (its ``__init__``,
    which has the release's signature, is not run); a dataclass is returned as the class."""
    if not issubclass(cls, Fake):
        return cls
    return cls.__new__(cls)
