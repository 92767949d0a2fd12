"""What an LMCache multi-process server says about itself: its release, asked over HTTP.

The MP server's ZMQ protocol has no request that returns the server's release (a client of
another release is not told; a request it cannot decode is simply never answered). The server's
HTTP front end (the MP server run with its HTTP API on ``--http-port``) serves ``GET
/lmc_version``, a JSON string, in the releases that have that route (0.4.5 on); earlier front
ends (0.4.1 ... 0.4.4) answer 404, and then the release cannot be learned. A 404 is taken as
such a front end only when the server proves it is one in another way: ``GET /`` answers
``{"status": "ok", "service": "LMCache HTTP API"}`` in every release's front end
(``lmcache/v1/multiprocess/http_server.py`` of 0.4.1 ... 0.4.4, ``http_apis/root_api.py`` from
0.4.5 on); any other server that answers 404 is not an LMCache MP front end. A reply is read
under the reader contract (:mod:`lmcache_compat.inputs`): only a PEP 440 version of at most
:data:`RELEASE_CHARS` characters counts; anything else is "not an LMCache MP front end"
(:class:`~lmcache_compat.errors.NotAFrontEndError`), shown escaped.

Used by :meth:`MPSchedulerAdapter.create <lmcache_compat.mp.MPSchedulerAdapter.create>` /
``MPWorkerAdapter.create`` when ``MPConfig.http_urls`` names the front ends (a mismatch raises
:class:`~lmcache_compat.errors.MPVersionMismatchError` before anything connects), by ``doctor
--mp-server URL``, and to word the error a failed exchange raises. Only the standard library
(``http.client``) is used, with a short deadline for the whole exchange, at construction or on
request: never on a call path. Proxy settings are not used: the front end is the server's own.
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import threading
import time
import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from http.client import HTTPException
from typing import Any

from lmcache_compat.errors import (
    LMCacheVersionError,
    MPServerError,
    MPServerURLError,
    MPVersionMismatchError,
    NotAFrontEndError,
)
from lmcache_compat.inputs import load_json, shown
from lmcache_compat.versions import parse_version, version_or_none

__all__ = [
    "HTTP_TIMEOUT",
    "RELEASE_CHARS",
    "ROOT_ROUTE",
    "ROOT_SERVICE",
    "ROUTE",
    "ServerRelease",
    "check_server_releases",
    "check_url",
    "describe_servers",
    "fetch_release",
    "lookup_failure",
    "mismatch_error",
    "release_of_reply",
    "same_release",
    "server_release",
]

#: The HTTP front end's route that answers the server's LMCache release (a JSON string).
ROUTE = "/lmc_version"
#: The route every LMCache MP HTTP front end answers (0.4.1 on) with ``{"status": "ok",
#: "service": ROOT_SERVICE}``: how a front end without :data:`ROUTE` (404) proves what it is.
ROOT_ROUTE = "/"
#: The ``service`` the front end's ``GET /`` names (FastAPI ``root()`` in LMCache's
#: ``lmcache/v1/multiprocess/http_server.py`` 0.4.1 ... 0.4.4, ``http_apis/root_api.py`` later).
ROOT_SERVICE = "LMCache HTTP API"
#: Seconds one exchange with a front end may take in total; it answers from memory.
HTTP_TIMEOUT = 2.0
_MAX_BODY = 4096
#: The longest release string a front end's reply may name (real ones: ``0.5.7rc2``).
RELEASE_CHARS = 64
_MAX_URL = 2048
_SCHEMES = ("http://", "https://")
_WIRE = (
    "different LMCache releases may not share a wire format: a server that cannot decode a "
    "request never answers it, and the client's lookups time out"
)


def check_url(http_url: object) -> str:
    """``http_url`` if it is the ``http(s)://HOST[:PORT]`` of a front end, else
    :class:`MPServerURLError` (a usage error: nothing is asked)."""
    hint = (
        "is not the http:// URL of an LMCache MP server's HTTP front end (e.g. "
        "http://127.0.0.1:8080, the server's --http-host/--http-port)"
    )
    if not isinstance(http_url, str) or not http_url.startswith(_SCHEMES):
        raise MPServerURLError(f"'{shown(str(http_url), 100)}' {hint}")
    if len(http_url) > _MAX_URL or any(c.isspace() or not c.isprintable() for c in http_url):
        raise MPServerURLError(f"'{shown(http_url, 100)}' {hint}")
    try:
        parts = urllib.parse.urlsplit(http_url)
        port = parts.port  # ValueError: not a number, or not 0 ... 65535
    except ValueError as exc:
        raise MPServerURLError(f"'{shown(http_url, 100)}' {hint} ({exc})") from None
    if not parts.hostname or port == 0:
        raise MPServerURLError(f"'{shown(http_url, 100)}' {hint} (no host, or port 0)")
    return http_url


def _route_url(http_url: str) -> str:
    return check_url(http_url).rstrip("/") + ROUTE


def release_of_reply(body: bytes, http_url: str) -> str | None:
    """The release an ``/lmc_version`` reply names, or :class:`NotAFrontEndError`.

    Every release from 0.4.5 on answers a JSON string (``"0.5.6"``; the mp-servers tier reads
    each one's raw reply); plain text (``0.5.6``) is taken too. An LMCache run from a source
    checkout answers ``""`` (its ``utils.VERSION`` is empty without ``lmcache/_version.py``):
    ``None``, a front end that does not know its release. Anything else (binary, an HTML
    page, a truncated or deeply nested body, terminal escape sequences, a version longer than
    :data:`RELEASE_CHARS`) is not an LMCache MP front end, and the message shows it escaped."""
    try:
        text = body.decode("utf-8").strip()
    except UnicodeDecodeError:
        text = body.decode("utf-8", "replace").strip()
        raise _not_front_end(http_url, text, "not UTF-8 text") from None
    value: object = text
    if text.startswith('"'):
        try:
            value = load_json(text, f"{http_url}{ROUTE}", NotAFrontEndError)
        except NotAFrontEndError:
            raise _not_front_end(http_url, text, "not a JSON string") from None
    if not isinstance(value, str):
        raise _not_front_end(http_url, text, "not a string")
    if value == "" and text.startswith('"'):
        return None  # a source checkout's front end: it does not know its release
    value = value.strip()
    if not value or len(value) > RELEASE_CHARS:
        raise _not_front_end(http_url, text, f"not a release of 1 to {RELEASE_CHARS} characters")
    try:
        parse_version(value)
    except LMCacheVersionError:
        raise _not_front_end(http_url, text, "not a PEP 440 version") from None
    return value


def _not_front_end(http_url: str, text: str, why: str) -> NotAFrontEndError:
    return NotAFrontEndError(
        f"{http_url} is not an LMCache MP front end: GET {ROUTE} answered '{shown(text, 80)}' "
        f"({why}; an LMCache MP server's HTTP front end answers its release as a JSON "
        "string)"
    )


class _Deadline(Exception):
    """The whole exchange took longer than its deadline."""


def _get(url: str, timeout: float) -> tuple[int, bytes]:
    """``GET url``: the status and at most ``_MAX_BODY + 1`` bytes of the body, within
    ``timeout`` seconds for the whole exchange (connect, request, headers, body), not per read:
    a server that trickles bytes is cut off at the deadline (a watchdog shuts the socket)."""
    parts = urllib.parse.urlsplit(url)
    conn_cls = (
        http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    )
    deadline = time.monotonic() + timeout
    conn = conn_cls(parts.hostname or "", parts.port, timeout=timeout)
    fired = threading.Event()

    def cut() -> None:
        fired.set()
        sock = conn.sock
        if sock is not None:
            with contextlib.suppress(OSError):  # already closed
                sock.shutdown(socket.SHUT_RDWR)  # wakes the blocked read at once

    watchdog = threading.Timer(timeout, cut)
    watchdog.daemon = True
    watchdog.start()
    try:
        conn.request("GET", parts.path or "/", headers={"Accept": "application/json"})
        response = conn.getresponse()
        body = response.read(_MAX_BODY + 1)
        status = response.status
    except (HTTPException, OSError, ValueError):
        if fired.is_set() or time.monotonic() >= deadline:
            raise _Deadline from None
        raise
    finally:
        watchdog.cancel()
        conn.close()
    if fired.is_set():
        raise _Deadline
    return status, body


def fetch_release(http_url: str, *, timeout: float = HTTP_TIMEOUT) -> str | None:
    """The LMCache release the server behind ``http_url`` reports, or ``None`` when its front end
    has no such route (404: a release before 0.4.5, proved an LMCache front end by its ``GET
    /``, :func:`_is_lmcache_root`) or does not know its release (``""``).

    Raises :class:`MPServerURLError` for a URL that is not a front end's
    (``http://HOST:PORT``), :class:`NotAFrontEndError` when the answer is not a release string
    (:func:`release_of_reply`) or is a 404 from a server whose ``GET /`` is not LMCache's, and
    :class:`MPServerError` when the front end cannot be reached, or does not complete the
    exchange, within ``timeout`` seconds in total (each of the two requests, after a 404).
    """

    url = _route_url(http_url)
    hint = (
        "HINT: give the server's --http-host/--http-port as http://HOST:PORT, or leave "
        "http_urls out to skip the release check"
    )
    try:
        status, body = _get(url, timeout)
    except _Deadline:
        raise MPServerError(
            f"the LMCache MP HTTP front end at {http_url} did not answer GET {ROUTE} within "
            f"{timeout:g} s (the deadline covers the whole exchange; a server that sends its "
            f"answer a few bytes at a time is cut off).\n{hint}"
        ) from None
    except (HTTPException, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or exc
        raise MPServerError(
            f"cannot reach the LMCache MP HTTP front end at {http_url} within {timeout:g} s "
            f"({type(exc).__name__}: {reason}) to read its release.\n{hint}"
        ) from None
    if status == 404:
        if _is_lmcache_root(http_url, timeout):
            return None  # LMCache 0.4.1 ... 0.4.4: a front end without the route
        raise NotAFrontEndError(
            f"{http_url} is not an LMCache MP front end (HTTP 404 on GET {ROUTE}, and GET "
            f"{ROOT_ROUTE} does not answer as LMCache's HTTP front end does: "
            f'{{"service": "{ROOT_SERVICE}"}}).\nHINT: give the URL of the LMCache MP server\'s '
            "HTTP front end (its --http-host/--http-port)"
        )
    if status != 200:
        raise MPServerError(
            f"the LMCache MP HTTP front end at {http_url} answered GET {ROUTE} with HTTP "
            f"{status}; its release cannot be read"
        )
    if len(body) > _MAX_BODY:
        raise NotAFrontEndError(
            f"{http_url} is not an LMCache MP front end: GET {ROUTE} answered more than "
            f"{_MAX_BODY} bytes, not a release string"
        )
    return release_of_reply(body, http_url)


def _is_lmcache_root(http_url: str, timeout: float) -> bool:
    """Whether ``GET /`` at ``http_url`` answers as every LMCache MP front end does (200 and a
    JSON object whose ``service`` is :data:`ROOT_SERVICE`). Anything else, an error included,
    proves nothing: ``False``."""
    try:
        status, body = _get(check_url(http_url).rstrip("/") + ROOT_ROUTE, timeout)
    except (_Deadline, HTTPException, OSError, ValueError):
        return False
    if status != 200 or len(body) > _MAX_BODY:
        return False
    try:
        value = load_json(body, f"{http_url}{ROOT_ROUTE}", NotAFrontEndError)
    except NotAFrontEndError:
        return False
    return isinstance(value, dict) and value.get("service") == ROOT_SERVICE


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
