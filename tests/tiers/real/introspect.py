"""Run in a fresh process beside real vLLM + torch, with one LMCache release first on
``PYTHONPATH``: import the real classes and print what lmcache-compat's live probe sees.

    python tests/tiers/real/introspect.py  ->  one JSON object on the last line of stdout

Importing is the point here (the scanner never imports); only the classes' modules are imported,
no engine is constructed.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import json
import sys
import traceback
import types
from typing import Any

from lmcache_compat import probe
from lmcache_compat.core.annotations import normalise, substitute
from lmcache_compat.core.probes import live_surface
from lmcache_compat.core.roles import CONNECTOR, role_named
from lmcache_compat.core.signatures import to_json
from lmcache_compat.core.surface import render_surface
from lmcache_compat.testing import fake_class
from lmcache_compat.upstream.scanner import scan
from lmcache_compat.versions import installed_lmcache_version


def _error_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}".strip()


def _alias(namespace: dict[str, Any], name: str) -> str | None:
    """What a module-level type alias (``CacheEvent = Union[...]``) stands for."""
    value = namespace.get(name)
    if isinstance(value, (types.GenericAlias, types.UnionType)) or (
        type(value).__module__ == "typing" and hasattr(value, "__origin__")
    ):
        return inspect.formatannotation(value)
    return None


def _same_text(fake: str | None, real: str | None, namespace: dict[str, Any]) -> bool:
    """One annotation, however spelt: the fake has the source text, the real class (its module
    without ``from __future__ import annotations``) the evaluated one, aliases expanded."""
    if fake is None or real is None:
        return fake == real
    expanded = substitute(fake, functools.partial(_alias, namespace))
    return normalise(real) in (normalise(fake), normalise(expanded))


def fake_mismatches(cls: type, version: str) -> tuple[int, list[str]]:
    """(members compared, how ``fake_class(version, name)`` differs from the real ``cls``):
    member names, parameter names, kinds and order, which have defaults, ``async``, the
    literal defaults the fake shows (a default the source writes as a name, ``mq_timeout:
    float = DEFAULT_MQ_TIMEOUT``, is only known to exist statically, so the real one may show
    more), and annotations compared through the one annotation model."""
    fake = fake_class(version, cls.__name__)
    real_surface, fake_surface = live_surface(cls), live_surface(fake)
    out = [
        f"member {n}: {'real only' if n in real_surface else 'fake only'}"
        for n in sorted(set(real_surface) ^ set(fake_surface))
    ]
    for name in sorted(set(real_surface) & set(fake_surface)):
        raw = inspect.getattr_static(cls, name)
        func = getattr(raw, "__func__", getattr(raw, "fget", raw))
        namespace = getattr(inspect.unwrap(func), "__globals__", {}) if callable(func) else {}
        (rp, rd), (fp, fd) = to_json(real_surface[name]), to_json(fake_surface[name])
        where = f"{name}"
        if rp != fp:
            out.append(f"{where}: params {fp} != real {rp}")
        for key in ("optional", "async", "dataclass"):
            if rd.get(key) != fd.get(key):
                out.append(f"{where}: {key} {fd.get(key)} != real {rd.get(key)}")
        real_defaults = rd.get("defaults", {})
        for param, literal in fd.get("defaults", {}).items():
            if real_defaults.get(param) != literal:
                out.append(f"{where}: default {param}={literal} != real {real_defaults.get(param)}")
        ra, fa = rd.get("annotations", {}), fd.get("annotations", {})
        for param in sorted(set(ra) | set(fa)):
            if not _same_text(fa.get(param), ra.get(param), namespace):
                out.append(f"{where}: {param}: {fa.get(param)} != real {ra.get(param)}")
        if not _same_text(fd.get("returns"), rd.get("returns"), namespace):
            out.append(f"{where}: returns {fd.get('returns')} != real {rd.get('returns')}")
    return len(real_surface), out


def main() -> int:
    out: dict[str, Any] = {"modules": {}, "classes": {}, "capabilities": None}
    where = scan().modules  # class -> module, read from the installed files (nothing imported)
    out["where"] = where
    for dotted in dict.fromkeys(where.values()):
        relpath = dotted.replace(".", "/") + ".py"
        try:
            module = importlib.import_module(dotted)
        except BaseException as exc:
            out["modules"][relpath] = {"error": _error_line(exc)}
            if "LMCACHE_COMPAT_DEBUG" in sys.argv:
                traceback.print_exc()
            continue
        out["modules"][relpath] = {"file": getattr(module, "__file__", None)}
        for cls_name, home in where.items():
            if home != dotted or not isinstance(getattr(module, cls_name, None), type):
                continue
            cls = getattr(module, cls_name)
            if cls.__module__ != dotted:  # re-exported from elsewhere: still the class vLLM sees
                out.setdefault("reexported", {})[cls_name] = cls.__module__
            surface = live_surface(cls)
            out["classes"][cls_name] = render_surface(surface)
            # the test kit's fake of this class against the real one (issue: "each method's
            # signature equals the real release's")
            compared, mismatches = fake_mismatches(cls, str(installed_lmcache_version()))
            out.setdefault("fake_signatures", {})[cls_name] = {
                "compared": compared,
                "mismatches": mismatches,
            }
            out.setdefault("properties", {})[cls_name] = sorted(
                n for n, f in surface.items() if f.kind == "property"
            )
            # what probe() says of the real class, for the role it plays (its catalog rows)
            role = role_named(cls_name)
            if role is not None:
                out.setdefault("class_capabilities", {})[cls_name] = probe(cls).as_dict(role)
            if role is CONNECTOR:
                out["capabilities"] = probe(cls).as_dict(role)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
