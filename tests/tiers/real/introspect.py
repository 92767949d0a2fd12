"""Run in a fresh process beside real vLLM + torch, with one LMCache release first on
``PYTHONPATH``: import the real classes and print what lmcache-compat's live probe sees.

    python tests/tiers/real/introspect.py  ->  one JSON object on the last line of stdout

Importing is the point here (the scanner never imports); only the classes' modules are imported,
no engine is constructed.
"""

from __future__ import annotations

import importlib
import json
import sys
import traceback
from typing import Any

from lmcache_compat import probe
from lmcache_compat.core.probes import live_surface
from lmcache_compat.core.roles import CONNECTOR, role_named
from lmcache_compat.core.surface import render_surface
from lmcache_compat.upstream.scanner import scan


def _error_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}".strip()


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
