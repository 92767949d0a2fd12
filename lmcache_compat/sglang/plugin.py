"""The ``sglang.srt.plugins`` entry point: registers the lmcache-compat radix-cache backend.

sglang (0.5.11 on) calls every entry point of the group, with no arguments, in its server,
engine and scheduler processes; a plugin that raises is only logged. :func:`register` is cheap
(it imports sglang's registry and nothing of LMCache or torch) and idempotent: it asks the
registry first, and a second registration (another process's, or a concurrent one) is not an
error. Select the backend with ``--radix-cache-backend lmcache-compat``; the factory decides
what to build when sglang builds its tree cache, at start-up (:mod:`.backend`).
"""

from __future__ import annotations

__all__ = ["BACKEND_NAME", "register"]

#: The name ``--radix-cache-backend`` selects.
BACKEND_NAME = "lmcache-compat"


def register() -> None:
    """Register :data:`BACKEND_NAME` with sglang's radix-cache registry (sglang 0.5.13 on).

    On an sglang without the registry this logs one line and returns: such an sglang is served
    through the adapter and doctor (docs/sglang.md)."""
    # lazy: the plugin module is loaded in every sglang process; it imports sglang only here
    from lmcache_compat.errors import UpstreamNotFoundError
    from lmcache_compat.upstream import locations as loc
    from lmcache_compat.upstream.resolve import find

    try:
        register_backend = find(loc.SGLANG_REGISTER_BACKEND)
        get_factory = find(loc.SGLANG_GET_FACTORY)
    except UpstreamNotFoundError as exc:
        import logging  # lazy: doctor reads BACKEND_NAME from here, and logs nothing

        logging.getLogger(__name__).warning(
            "lmcache-compat: this sglang has no radix-cache registry (%s); the lmcache-compat "
            "backend is not offered (run 'lmcache-compat doctor')",
            " ".join(str(exc).split())[:200],
        )
        return
    if get_factory(BACKEND_NAME) is not None:
        return
    from lmcache_compat.sglang.backend import build  # lazy: torch and LMCache load when built

    try:
        register_backend(BACKEND_NAME, build)
    except ValueError:  # "already registered": another registration won the race
        if get_factory(BACKEND_NAME) is None:
            raise
