"""What an LMCache multi-process server says about itself: its release, asked over HTTP.

The MP server's ZMQ protocol has no request that returns the server's release (a client of
another release is not told; a request it cannot decode is simply never answered). The server's
HTTP front end (the MP server run with its HTTP API on ``--http-port``) serves ``GET
/lmc_version``, a JSON string, in the releases that have that route; earlier front ends answer
404, and then the release cannot be learned.

Used by :meth:`MPSchedulerAdapter.create <lmcache_compat.mp.MPSchedulerAdapter.create>` /
``MPWorkerAdapter.create`` when ``MPConfig.http_urls`` names the front ends (a mismatch raises
:class:`~lmcache_compat.errors.MPVersionMismatchError` before anything connects), by ``doctor
--mp-server URL``, and to word the error a failed exchange raises. Only the standard library
(``urllib``) is used, with a short timeout, at construction or on request: never on a call path.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from http.client import HTTPException
from typing import Any

from lmcache_compat.errors import LMCacheVersionError, MPServerError, MPVersionMismatchError
from lmcache_compat.versions import parse_version, version_or_none

__all__ = [
    "HTTP_TIMEOUT",
    "ROUTE",
    "ServerRelease",
    "check_server_releases",
    "describe_servers",
    "fetch_release",
    "lookup_failure",
    "mismatch_error",
    "same_release",
    "server_release",
]

#: The HTTP front end's route that answers the server's LMCache release (a JSON string).
ROUTE = "/lmc_version"
#: Seconds to wait for a front end (connect and read); it answers from memory.
HTTP_TIMEOUT = 2.0
_MAX_BODY = 4096
_SCHEMES = ("http://", "https://")
_WIRE = (
    "different LMCache releases may not share a wire format: a server that cannot decode a "
    "request never answers it, and the client's lookups time out"
)


def _route_url(http_url: str) -> str:
    if not isinstance(http_url, str) or not http_url.startswith(_SCHEMES):
        raise MPServerError(
            f"{http_url!r} is not the http:// URL of an LMCache MP server's HTTP front end "
            "(e.g. http://127.0.0.1:8080, the server's --http-host/--http-port)"
        )
    return http_url.rstrip("/") + ROUTE


def fetch_release(http_url: str, *, timeout: float = HTTP_TIMEOUT) -> str | None:
    """The LMCache release the server behind ``http_url`` reports, or ``None`` when its front end
    has no such route (404) or reports no version (an empty string).

    Raises :class:`MPServerError` when the front end cannot be reached within ``timeout`` seconds
    or answers something that is not a release string.
    """

    url = _route_url(http_url)
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            body = response.read(_MAX_BODY + 1)
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None
        raise MPServerError(
            f"the LMCache MP HTTP front end at {http_url} answered GET {ROUTE} with HTTP "
            f"{exc.code}; its release cannot be read"
        ) from None
    except (urllib.error.URLError, HTTPException, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or exc
        raise MPServerError(
            f"cannot reach the LMCache MP HTTP front end at {http_url} within {timeout:g} s "
            f"({type(exc).__name__}: {reason}) to read its release.\n"
            "HINT: give the server's --http-host/--http-port as http://HOST:PORT, or leave "
            "http_urls out to skip the release check"
        ) from None
    if len(body) > _MAX_BODY:
        raise MPServerError(f"{url} answered more than {_MAX_BODY} bytes: not a release string")
    try:
        value = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        value = body.decode("utf-8", "replace").strip()
    if not isinstance(value, str):
        raise MPServerError(f"{url} answered {value!r}, not a release string")
    value = value.strip()
    return value or None


def same_release(a: str, b: str) -> bool:
    """Whether two release strings name the same release (PEP 440 public versions compared, so
    ``0.5.6`` equals ``0.5.6+cpu``; strings that are not versions must be equal)."""

    try:
        return parse_version(a).public == parse_version(b).public
    except LMCacheVersionError:
        return a.strip() == b.strip()


@dataclass(frozen=True)
class ServerRelease:
    """A server's release as its HTTP front end reports it, beside the client's."""

    url: str
    #: What the server reports; ``None``: it does not say (no such route, or no version).
    release: str | None
    #: The installed LMCache (the client side); ``None``: not installed or unreadable.
    client: str | None

    @property
    def matches(self) -> bool | None:
        """``True``/``False`` when both releases are known, else ``None`` (cannot tell)."""
        if self.release is None or self.client is None:
            return None
        return same_release(self.release, self.client)

    def to_json(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "release": self.release,
            "client": self.client,
            "matches": self.matches,
        }


def _installed() -> str | None:

    return version_or_none("lmcache")


def server_release(
    http_url: str, *, client: str | None = None, timeout: float = HTTP_TIMEOUT
) -> ServerRelease:
    """Ask ``http_url`` for its release and set it beside ``client`` (default: the installed
    LMCache). Raises :class:`MPServerError` as :func:`fetch_release` does."""
    return ServerRelease(
        http_url,
        fetch_release(http_url, timeout=timeout),
        _installed() if client is None else client,
    )


def mismatch_error(zmq_url: str, found: ServerRelease) -> MPVersionMismatchError:
    """The error for a server whose release differs from the client's."""
    assert found.release is not None
    return MPVersionMismatchError(
        f"the LMCache MP server {zmq_url} runs LMCache {found.release} (its HTTP front end "
        f"{found.url} says so), but this client runs LMCache {found.client or 'unknown'}: "
        f"{_WIRE}, which would read as cache misses.\n"
        f"HINT: run the server and its clients from one LMCache release (pip install "
        f"'lmcache=={found.release}' here, or start the server from {found.client}); leave "
        "MPConfig.http_urls out to skip this check",
        client=found.client,
        server=found.release,
        url=zmq_url,
    )


def check_server_releases(
    pairs: Iterable[tuple[str, str | None]],
    *,
    client: str | None = None,
    timeout: float = HTTP_TIMEOUT,
) -> dict[str, str | None]:
    """``{zmq_url: release or None}`` for each ``(zmq_url, http_url or None)``; raises
    :class:`~lmcache_compat.errors.MPVersionMismatchError` for the first server whose release
    differs from ``client`` (default: the installed LMCache), and :class:`MPServerError` when a
    named front end cannot be reached."""
    if client is None:
        client = _installed()
    out: dict[str, str | None] = {}
    for zmq_url, http_url in pairs:
        if http_url is None:
            out[zmq_url] = None
            continue
        found = server_release(http_url, client=client, timeout=timeout)
        if found.matches is False:
            raise mismatch_error(zmq_url, found)
        out[zmq_url] = found.release
    return out


def describe_servers(servers: Mapping[str, str | None], client: str | None) -> str:
    """How a message names the servers and what is known of their releases."""
    if not servers:
        return (
            "the server's release is unknown (the MP protocol cannot be asked; pass "
            "MPConfig.http_urls to compare)"
        )
    parts = []
    for url, release in servers.items():
        if release is None:
            parts.append(f"{url}: release unknown (not asked over HTTP: pass MPConfig.http_urls)")
        elif client is not None and same_release(release, client):
            parts.append(f"{url}: LMCache {release}, the client's release (not a mismatch)")
        else:
            parts.append(f"{url}: LMCache {release}, NOT the client's release")
    return "server " + "; ".join(parts)


def lookup_failure(
    request_id: str, client: str | None, servers: Mapping[str, str | None], where: str
) -> MPServerError:
    """The error ``check_lookup_result`` raises when the release reports a result while its own
    health property says the server is unhealthy: the exchange failed or timed out, so the
    result is not a cache miss."""
    known_same = bool(servers) and all(
        r is not None and client is not None and same_release(r, client) for r in servers.values()
    )
    cause = (
        "The releases match, so the server is down, overloaded, or mq_timeout is too short"
        if known_same
        else f"Possible client/server version mismatch: {_WIRE}. Other causes: the server is "
        "down, overloaded, or mq_timeout is too short"
    )
    return MPServerError(
        f"{where}.check_lookup_result({request_id!r}) gave no hit count: the LMCache MP server "
        "did not answer in time and the release marked it unhealthy, so this is not a cache "
        f"miss. Client LMCache {client or 'unknown'}; "
        f"{describe_servers(servers, client)}. {cause}.\n"
        "HINT: run the server and the client from one LMCache release; MPConfig(http_urls=[...]) "
        "compares releases at start-up, and `lmcache-compat doctor --mp-server http://HOST:PORT` "
        "reports a server's release"
    )
