"""The installed LMCache: its real classes and doubles of them (``--lmcache-release=installed``).

- :func:`installed_row` is the static scan of the installed distribution's files (nothing is
  imported) as a release-matrix row, so it is right for a release the shipped data does not
  know yet (published today) and for a patched copy alike.
- :func:`real_class` is the real class, found by :func:`lmcache_compat.upstream.resolve.find`
  (only its defining module is imported; import errors propagate unchanged).
- :func:`double_class` subclasses the real class with the fake generated from
  :func:`installed_row`: every public member has the installed release's exact signature,
  records its calls, answers by the one rule of :mod:`lmcache_compat.testing.shapes` and takes
  the faults; ``isinstance(x, real class)`` holds, :func:`lmcache_compat.probe` sees what it sees
  on the real class, and what an adapter finds beside the class (0.5.7rc2's token codec) is the
  release's own. The real ``__init__`` (which needs vLLM's configuration and a device) and
  ``__del__`` never run.
"""

from __future__ import annotations

import functools
import hashlib
import json
import types
from typing import Any

from lmcache_compat.testing.fakes import Fake, fake_class, instance
from lmcache_compat.upstream import locations
from lmcache_compat.upstream.matrix import ReleaseRow

__all__ = ["double", "double_class", "installed_row", "real_class"]


@functools.cache
def installed_row() -> ReleaseRow:
    """The installed LMCache as a release-matrix row, read from its files (cached). Its
    ``sha256`` is that of its scan (an installed copy has no artifact), so its fakes never
    stand in for the shipped row's."""
    from lmcache_compat.upstream.scanner import scan  # lazy: only with an installed release

    scanned = scan().to_json()
    digest = hashlib.sha256(json.dumps(scanned, sort_keys=True).encode()).hexdigest()
    return ReleaseRow.from_scan(scanned, artifact=scanned["source"], sha256=digest)


def real_class(name: str) -> type[Any]:
    """The installed release's real class ``name`` (``LookupError``: lmcache-compat locates no
    LMCache class of that name)."""
    from lmcache_compat.upstream.resolve import find  # lazy: imports the class's module

    place = next(
        (p for p in locations.PLACES if p.name == name and p.package == locations.LMCACHE), None
    )
    if place is None:
        known = sorted({p.name for p in locations.PLACES if p.package == locations.LMCACHE})
        raise LookupError(
            f"lmcache-compat locates no LMCache class {name!r} (it locates: {', '.join(known)})"
        )
    cls: type[Any] = find(place)
    return cls


def _no_del(self: object) -> None:
    """The real ``__del__`` would tear down what the real ``__init__`` (never run) built."""


@functools.cache
def double_class(name: str) -> type[Any]:
    """A test double of the installed release's class ``name``: a subclass of the real class
    whose public members are the generated fake's (see the module docstring). A dataclass
    (``LoadStoreOp``...) is returned as the real class itself."""
    generated = fake_class(installed_row(), name)
    real = real_class(name)
    if not issubclass(generated, Fake):
        return real
    namespace: dict[str, Any] = {
        "__module__": real.__module__,
        "__qualname__": real.__qualname__,
        "__doc__": f"A test double of LMCache {installed_row().version}'s real {name}.",
    }
    if hasattr(real, "__del__"):
        namespace["__del__"] = _no_del
    cls: type[Any] = types.new_class(
        name, (generated, real), exec_body=lambda ns: ns.update(namespace)
    )
    return cls


def double(name: str) -> Any:
    """An instance of :func:`double_class` built with no arguments (a dataclass is returned as
    the class, as :func:`lmcache_compat.testing.fake` does)."""
    return instance(double_class(name))
