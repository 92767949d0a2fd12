"""Static scanning: what a release offers, read with ``ast`` and never imported.

:func:`scan` opens a wheel, an sdist, a source directory or the installed distribution
(:mod:`lmcache_compat.sources`), parses the modules that define the classes LMCache integrations
call, follows base classes defined in the same package, and reports each class's public methods
(plus ``__init__``; a dataclass without one gets the ``__init__`` its fields generate) and the
catalog's capabilities, decided by the same rule as the live probe
(:func:`lmcache_compat.surface.release_capabilities`).
"""

from __future__ import annotations

import ast
import io
import os
import tokenize
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from lmcache_compat.sources import InvalidSourceError, NotLMCacheError, SourceTree, open_source
from lmcache_compat.surface import (
    MethodFacts,
    Param,
    ParamKind,
    release_capabilities,
    render_surface,
)

__all__ = [
    "LMCACHE_LAYOUT",
    "VLLM_NATIVE_LAYOUT",
    "Layout",
    "ScanResult",
    "facts_from_json",
    "scan",
    "scan_tree",
]


@dataclass(frozen=True)
class Layout:
    """Where the scanned classes live in a package."""

    package: str
    subtree: str
    classes: Mapping[str, str]


_V1 = "lmcache/integration/vllm/vllm_v1_adapter.py"
_MP = "lmcache/integration/vllm/vllm_multi_process_adapter.py"
_ENGINE = "lmcache/v1/cache_engine.py"

#: LMCache's own modules (``LMCacheEngine``/``LMCacheEngineBuilder`` are also defined, with other
#: meanings, in other modules: only ``lmcache/v1/cache_engine.py`` counts).
LMCACHE_LAYOUT = Layout(
    "lmcache",
    "lmcache/",
    {
        "LMCacheConnectorV1Impl": _V1,
        "LMCacheMPSchedulerAdapter": _MP,
        "LMCacheMPWorkerAdapter": _MP,
        "LoadStoreOp": _MP,
        "ParallelStrategy": _MP,
        "LMCacheEngine": _ENGINE,
        "LMCacheEngineBuilder": _ENGINE,
    },
)

_NATIVE = "vllm/distributed/kv_transfer/kv_connector/v1/lmcache_integration/"
#: vLLM's vendored copy (``use_native=True``); it has no ``LMCacheEngine`` of its own.
VLLM_NATIVE_LAYOUT = Layout(
    "vllm",
    _NATIVE,
    {
        "LMCacheConnectorV1Impl": _NATIVE + "vllm_v1_adapter.py",
        "LMCacheMPSchedulerAdapter": _NATIVE + "multi_process_adapter.py",
        "LMCacheMPWorkerAdapter": _NATIVE + "multi_process_adapter.py",
        "LoadStoreOp": _NATIVE + "multi_process_adapter.py",
        "ParallelStrategy": _NATIVE + "multi_process_adapter.py",
    },
)


@dataclass
class ScanResult:
    """What one scan found. :meth:`to_json` is the ``scan --json`` object."""

    source: str
    project: str | None
    version: str | None
    package: str
    classes: dict[str, dict[str, MethodFacts]]
    missing_classes: list[str] = field(default_factory=list)
    external_bases: dict[str, list[str]] = field(default_factory=dict)

    @property
    def lmcache_version(self) -> str | None:
        return self.version if self.package == "lmcache" else None

    @property
    def capabilities(self) -> dict[str, bool]:
        """Every catalog capability -> whether the scanned classes carry it."""
        return release_capabilities(self.classes)

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
        """Per method, what ``surfaces`` leaves out: parameters with defaults and the return
        annotation's source text (only where there is something to say)."""
        out: dict[str, dict[str, dict[str, Any]]] = {}
        for cls, methods in sorted(self.classes.items()):
            for name, facts in sorted(methods.items()):
                if facts.kind != "method":
                    continue
                entry: dict[str, Any] = {}
                optional = [p.name for p in facts.params or () if p.has_default]
                if optional:
                    entry["optional"] = optional
                if facts.returns is not None:
                    entry["returns"] = facts.returns
                if facts.fields:
                    entry["fields"] = dict(facts.fields)
                if entry:
                    out.setdefault(cls, {})[name] = entry
        return out

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "lmcache_version": self.lmcache_version,
            "source": self.source,
        }
        if self.package != "lmcache":
            data[f"{self.package}_version"] = self.version
        data["capabilities"] = self.capabilities
        data["surfaces"] = self.surfaces()
        data["properties"] = self.properties()
        data["details"] = self.details()
        data["missing_classes"] = sorted(self.missing_classes)
        data["external_bases"] = {k: v for k, v in sorted(self.external_bases.items()) if v}
        return data


def facts_from_json(params: list[str], detail: Mapping[str, Any] | None = None) -> MethodFacts:
    """Rebuild :class:`MethodFacts` from a ``surfaces`` entry and its ``details`` entry."""
    detail = detail or {}
    optional = set(detail.get("optional", ()))
    out: list[Param] = []
    keyword_only = False
    for token in params:
        if token == "/":
            out = [Param(p.name, "positional_only", p.has_default) for p in out]
        elif token == "*":
            keyword_only = True
        elif token.startswith("**"):
            out.append(Param(token[2:], "var_keyword"))
        elif token.startswith("*"):
            out.append(Param(token[1:], "var_positional"))
            keyword_only = True
        else:
            kind: ParamKind = "keyword_only" if keyword_only else "positional"
            out.append(Param(token, kind, token in optional))
    fields = tuple(detail.get("fields", {}).items())
    return MethodFacts(tuple(out), detail.get("returns"), fields=fields)


# --- parsing ------------------------------------------------------------------------------


def _decode(relpath: str, data: bytes, where: str) -> str:
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        return data.decode(encoding)
    except (SyntaxError, LookupError, UnicodeDecodeError) as exc:
        raise InvalidSourceError(
            f"{where}: {relpath} is not decodable Python source ({exc})"
        ) from None


@dataclass
class _Module:
    relpath: str
    dotted: str
    classes: dict[str, ast.ClassDef]
    imports: dict[str, tuple[str, str | None]]  # local name -> (module, attribute or None)


def _top_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Statements at module (or class) level, looking into if/try/with blocks."""
    for node in body:
        yield node
        if isinstance(node, ast.If):
            yield from _top_level(node.body)
            yield from _top_level(node.orelse)
        elif isinstance(node, ast.Try):
            yield from _top_level(node.body)
            for handler in node.handlers:
                yield from _top_level(handler.body)
            yield from _top_level(node.orelse)
            yield from _top_level(node.finalbody)
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            yield from _top_level(node.body)


class _Index:
    """Parsed modules of one source tree, parsed on first use."""

    def __init__(self, tree: SourceTree, package: str) -> None:
        self.tree = tree
        self.package = package
        self._modules: dict[str, _Module | None] = {}

    def module(self, relpath: str) -> _Module | None:
        if relpath in self._modules:
            return self._modules[relpath]
        data = self.tree.read(relpath)
        mod = None if data is None else self._parse(relpath, data)
        self._modules[relpath] = mod
        return mod

    def module_by_dotted(self, dotted: str) -> _Module | None:
        base = dotted.replace(".", "/")
        return self.module(base + ".py") or self.module(base + "/__init__.py")

    def _parse(self, relpath: str, data: bytes) -> _Module:
        where = self.tree.description
        text = _decode(relpath, data, where)
        try:
            tree = ast.parse(text, filename=relpath)
        except SyntaxError as exc:
            raise InvalidSourceError(
                f"{where}: {relpath}:{exc.lineno}: invalid Python ({exc.msg})"
            ) from None
        except (RecursionError, MemoryError, ValueError) as exc:
            raise InvalidSourceError(
                f"{where}: {relpath}: cannot parse ({type(exc).__name__}: nested too deeply "
                "or malformed)"
            ) from None
        dotted = relpath[: -len(".py")].replace("/", ".")
        is_init = dotted.endswith(".__init__")
        if is_init:
            dotted = dotted[: -len(".__init__")]
        package_parts = dotted.split(".") if is_init else dotted.split(".")[:-1]
        classes: dict[str, ast.ClassDef] = {}
        imports: dict[str, tuple[str, str | None]] = {}
        for node in _top_level(tree.body):
            if isinstance(node, ast.ClassDef):
                classes[node.name] = node
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    keep = len(package_parts) - (node.level - 1)
                    if keep <= 0:
                        continue
                    base = ".".join(package_parts[:keep])
                    source = f"{base}.{node.module}" if node.module else base
                else:
                    source = node.module or ""
                for alias in node.names:
                    imports[alias.asname or alias.name] = (source, alias.name)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        imports[alias.asname] = (alias.name, None)
                    else:
                        top = alias.name.split(".")[0]
                        imports[top] = (top, None)
        return _Module(relpath, dotted, classes, imports)


_PROPERTIES = {"property", "cached_property", "abstractproperty"}
_ACCESSORS = {"setter", "getter", "deleter"}


def _tail(node: ast.expr) -> str | None:
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _function_facts(fn: ast.FunctionDef | ast.AsyncFunctionDef, drop_first: bool) -> MethodFacts:
    a = fn.args
    positional = [*a.posonlyargs, *a.args]
    first_default = len(positional) - len(a.defaults)
    params: list[Param] = []
    for i, arg in enumerate(positional):
        kind: ParamKind = "positional_only" if i < len(a.posonlyargs) else "positional"
        params.append(Param(arg.arg, kind, i >= first_default))
    if drop_first and params:
        params = params[1:]
    if a.vararg is not None:
        params.append(Param(a.vararg.arg, "var_positional"))
    for arg, default in zip(a.kwonlyargs, a.kw_defaults, strict=True):
        params.append(Param(arg.arg, "keyword_only", default is not None))
    if a.kwarg is not None:
        params.append(Param(a.kwarg.arg, "var_keyword"))
    returns = ast.unparse(fn.returns) if fn.returns is not None else None
    return MethodFacts(tuple(params), returns)


def _is_dataclass(cls: ast.ClassDef) -> bool:
    return any(_tail(d) == "dataclass" for d in cls.decorator_list)


def _dataclass_kw_only(cls: ast.ClassDef) -> bool:
    for d in cls.decorator_list:
        if isinstance(d, ast.Call) and _tail(d) == "dataclass":
            for k in d.keywords:
                if k.arg == "kw_only" and isinstance(k.value, ast.Constant):
                    return bool(k.value.value)
    return False


def _dataclass_field(node: ast.AnnAssign) -> tuple[Param, str] | None:
    if not isinstance(node.target, ast.Name):
        return None
    ann = ast.unparse(node.annotation)
    if "ClassVar" in ann:
        return None
    has_default = node.value is not None
    if isinstance(node.value, ast.Call) and _tail(node.value.func) == "field":
        kwargs = {k.arg: k.value for k in node.value.keywords if k.arg}
        init = kwargs.get("init")
        if isinstance(init, ast.Constant) and init.value is False:
            return None
        has_default = "default" in kwargs or "default_factory" in kwargs
    return Param(node.target.id, "positional", has_default), ann


@dataclass
class _ClassInfo:
    methods: dict[str, MethodFacts]
    fields: list[Param] | None  # dataclass fields, None for other classes
    external: list[str]


class _Scanner:
    def __init__(self, index: _Index) -> None:
        self.index = index
        self._done: dict[tuple[str, str], _ClassInfo] = {}
        self._active: set[tuple[str, str]] = set()

    def resolve(
        self, module: _Module, name: str, depth: int = 0
    ) -> tuple[_Module, ast.ClassDef] | None:
        """Find class ``name`` as seen from ``module`` (defined there or imported from the same
        package), following re-exports."""
        if depth > 20:
            return None
        if name in module.classes:
            return module, module.classes[name]
        origin = module.imports.get(name)
        if origin is None:
            return None
        source, attr = origin
        if attr is None or not (
            source == self.index.package or source.startswith(self.index.package + ".")
        ):
            return None
        target = self.index.module_by_dotted(source)
        if target is None:
            # ``from pkg import submodule``: not a class
            return None
        return self.resolve(target, attr, depth + 1)

    def _resolve_base(self, module: _Module, expr: ast.expr) -> tuple[_Module, ast.ClassDef] | None:
        if isinstance(expr, ast.Subscript):
            expr = expr.value
        if isinstance(expr, ast.Name):
            return self.resolve(module, expr.id)
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name):
            origin = module.imports.get(expr.value.id)
            if origin is None:
                return None
            source, attr = origin
            dotted = source if attr is None else f"{source}.{attr}"
            if not (dotted == self.index.package or dotted.startswith(self.index.package + ".")):
                return None
            target = self.index.module_by_dotted(dotted)
            return None if target is None else self.resolve(target, expr.attr)
        return None

    def info(self, module: _Module, cls: ast.ClassDef) -> _ClassInfo:
        key = (module.relpath, cls.name)
        if key in self._done:
            return self._done[key]
        if key in self._active:  # a cycle through re-exports: stop
            return _ClassInfo({}, None, [])
        self._active.add(key)
        try:
            info = self._compute(module, cls)
        finally:
            self._active.discard(key)
        self._done[key] = info
        return info

    def _compute(self, module: _Module, cls: ast.ClassDef) -> _ClassInfo:
        methods: dict[str, MethodFacts] = {}
        fields: list[Param] = []
        external: list[str] = []
        base_is_dataclass = False
        for base in reversed(cls.bases):
            found = self._resolve_base(module, base)
            if found is None:
                text = ast.unparse(base)
                if text not in ("object", "ABC", "abc.ABC", "Protocol") and not text.startswith(
                    ("Generic[", "Protocol[")
                ):
                    external.insert(0, text)
                continue
            binfo = self.info(*found)
            methods.update(binfo.methods)
            external[:0] = binfo.external
            if binfo.fields is not None:
                base_is_dataclass = True
                names = {p.name for p in binfo.fields}
                fields = [p for p in fields if p.name not in names] + binfo.fields
        own: dict[str, MethodFacts | None] = {}
        own_fields: list[Param] = []
        kw_only = _dataclass_kw_only(cls)
        annotations: dict[str, str] = {}
        for node in _top_level(cls.body):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                decorators = {_tail(d) for d in node.decorator_list}
                if "overload" in decorators:
                    continue
                if decorators & _PROPERTIES:
                    own[node.name] = MethodFacts(None, None, kind="property")
                    continue
                if decorators & _ACCESSORS:  # @x.setter keeps x a property
                    continue
                own[node.name] = _function_facts(node, drop_first="staticmethod" not in decorators)
            elif isinstance(node, ast.AnnAssign):
                if ast.unparse(node.annotation).endswith("KW_ONLY"):
                    kw_only = True
                    continue
                field_found = _dataclass_field(node)
                if field_found is not None:
                    param, ann = field_found
                    if kw_only:
                        param = Param(param.name, "keyword_only", param.has_default)
                    own_fields.append(param)
                    annotations[param.name] = ann
            elif isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        own[target.id] = None  # a plain attribute shadows an inherited method
        for name, facts in own.items():
            if facts is None:
                methods.pop(name, None)
            else:
                methods[name] = facts
        is_dataclass = _is_dataclass(cls)
        if is_dataclass:
            names = {p.name for p in own_fields}
            fields = [p for p in fields if p.name not in names] + own_fields
            if "__init__" not in own:
                inherited = dict(methods["__init__"].fields) if "__init__" in methods else {}
                inherited.update(annotations)
                methods["__init__"] = MethodFacts(
                    tuple(fields),
                    fields=tuple((p.name, inherited.get(p.name, "")) for p in fields),
                )
        return _ClassInfo(
            methods, fields if (is_dataclass or base_is_dataclass) else None, external
        )


def scan_tree(tree: SourceTree, layout: Layout = LMCACHE_LAYOUT) -> ScanResult:
    """Scan an opened :class:`SourceTree`."""
    index = _Index(tree, layout.package)
    scanner = _Scanner(index)
    result = ScanResult(tree.description, tree.project, tree.version, layout.package, {})
    any_module = False
    for cls_name, relpath in layout.classes.items():
        module = index.module(relpath)
        if module is None:
            result.missing_classes.append(cls_name)
            continue
        any_module = True
        found = scanner.resolve(module, cls_name)
        if found is None:
            result.missing_classes.append(cls_name)
            continue
        try:
            info = scanner.info(*found)
        except RecursionError:
            raise InvalidSourceError(
                f"{tree.description}: {relpath}: class {cls_name} nests too deeply to read"
            ) from None
        result.classes[cls_name] = {
            name: facts
            for name, facts in info.methods.items()
            if not name.startswith("_") or name == "__init__"
        }
        if info.external:
            result.external_bases[cls_name] = info.external
    if not any_module:
        raise NotLMCacheError(
            f"{tree.description}: none of the modules that define "
            f"{', '.join(sorted(layout.classes))} exist (is this an LMCache release from 0.3.0 on?)"
        )
    return result


def scan(target: str | os.PathLike[str] | None = None, *, vllm_native: bool = False) -> ScanResult:
    """Scan a release without importing it: ``target`` is a ``.whl``, a ``.tar.gz``, a source
    directory or ``None`` (the installed distribution). ``vllm_native`` scans vLLM's vendored
    copy instead (in the installed vLLM, or in the vLLM wheel/directory given)."""
    layout = VLLM_NATIVE_LAYOUT if vllm_native else LMCACHE_LAYOUT
    tree = open_source(target, layout.package, layout.subtree)
    return scan_tree(tree, layout)
