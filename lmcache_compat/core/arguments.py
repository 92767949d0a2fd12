"""The argument policy: what happens to an argument the installed release lacks, and the one
function that executes it.

One row per fact, keyed (``ARG.cache_salt``). ``on_older`` says what happens on a release that
does not take the argument: ``map`` (passed in the release's own form), ``emulate`` (the same
result another way), ``drop`` (safe to leave out) or ``error``
(:class:`~lmcache_compat.errors.UnsupportedArgumentError` unless the caller accepts the
downgrade with ``allow={"name"}``). A row tied to a catalog capability takes its first release
and its name from there; the others name them themselves.

:func:`apply` is the policy executed: every mapper (:mod:`lmcache_compat.mp.scheduler_calls`,
:mod:`lmcache_compat.mp.worker_calls`, :mod:`lmcache_compat.mp.config`,
:mod:`lmcache_compat.engine.calls`) hands each argument's row to it once, at construction, and
gets back the step a call runs. Whether a release "takes" an argument is read from meaning, not
shape: an explicit parameter of that name, positional-or-keyword or keyword-only (``**kwargs``
never counts: an old release would swallow and ignore it), and the value is passed by keyword.
``tests/core/test_arguments.py`` drives every row through the generated fakes of the release
just before its first and checks that what happens is what ``on_older`` says.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

from lmcache_compat.core.catalog import Capability
from lmcache_compat.core.roles import ENGINE, MP_SCHEDULER, MP_WORKER
from lmcache_compat.core.signatures import MethodFacts
from lmcache_compat.errors import UnsupportedArgumentError

__all__ = [
    "ARG",
    "ARGUMENTS",
    "Allow",
    "Applied",
    "Argument",
    "Downgrades",
    "apply",
    "normalise_allow",
    "render_arguments_markdown",
]

OnOlder = Literal["map", "emulate", "drop", "error"]
#: What :func:`apply` decided: the release takes it (``pass``), or ``on_older`` (an ``error``
#: the caller allowed is ``allowed``: dropped).
Action = Literal["pass", "map", "emulate", "drop", "error", "allowed"]
#: A step of a call: put the caller's value (if given) into the call's keyword arguments, or
#: refuse it.
Put = Callable[[dict[str, Any], Any], None]
#: What the caller accepts to lose: argument names, or ``True`` for every one.
Allow = frozenset[str] | Literal[True]


@dataclass(frozen=True, slots=True)
class Argument:
    """One row of the argument table."""

    key: str
    #: The member(s) of the release the argument goes to (documentation).
    member: str
    on_older: OnOlder
    #: What the table says, and why a refusal refuses.
    detail: str
    why: str = ""
    capability: Capability | None = None
    first: str | None = None
    #: The name callers use (and pass to ``allow=``); ``None``: the keyword of the row's
    #: capability, else the key (so a name is written once). Read it as :attr:`argument`.
    name: str | None = None

    @property
    def argument(self) -> str:
        """The name callers use and pass to ``allow=``, as errors show it."""
        if self.name is not None:
            return self.name
        keyword = self.capability.spec.keyword if self.capability is not None else None
        return keyword or self.key

    @property
    def since(self) -> str:
        """The first release that takes the argument (the capability's, when tied to one)."""
        if self.capability is not None:
            return self.capability.since
        assert self.first is not None, self.key
        return self.first


_MP_INIT = "LMCacheMP*Adapter.__init__"
_LOOKUP = f"{MP_SCHEDULER.name}.maybe_submit_lookup_request"
_MP_CALLS = "LMCacheMP*Adapter lookups, lock frees, submits"


class _Table:
    """The rows as attributes (``ARG.cache_salt``) and, in order, as an iterable."""

    def __init__(self, rows: Iterable[Argument]) -> None:
        self._rows = tuple(rows)
        for row in self._rows:
            setattr(self, row.key, row)

    def __iter__(self) -> Iterator[Argument]:
        return iter(self._rows)

    def __len__(self) -> int:
        return len(self._rows)

    server_urls: Argument
    several_servers: Argument
    tp_size: Argument
    mq_timeout: Argument
    heartbeat_interval: Argument
    parallel_strategy: Argument
    pp_size: Argument
    dcp_size: Argument
    extra_config: Argument
    enable_kv_events: Argument
    required_chunk_alignment: Argument
    token_ids: Argument
    packed_token_ids: Argument
    cache_salt: Argument
    request_configs: Argument
    reserve_last_token: Argument
    reserve_by_hashes: Argument
    start: Argument
    extra_ranges: Argument
    engine_group_infos: Argument
    layout_hints: Argument
    skip_first_n_tokens: Argument
    block_ids: Argument
    lookup_id: Argument
    pinned_lookup: Argument
    engine_request_configs: Argument
    unpin: Argument
    prefetch: Argument
    broadcast_fn: Argument
    broadcast_required: Argument


C = Capability
ARG = _Table(
    (
        Argument(
            key="server_urls",
            member=f"{MP_SCHEDULER.name}.__init__",
            on_older="map",
            detail="one URL is passed as the string server_url (never split into characters)",
            capability=C.MP_MULTI_SERVER,
        ),
        Argument(
            key="several_servers",
            member=f"{MP_SCHEDULER.name}.__init__",
            on_older="error",
            detail="several URLs: one server only; allow={'server_urls'} connects to the first",
            why="this release talks to one LMCache server",
            capability=C.MP_MULTI_SERVER,
        ),
        Argument(
            key="tp_size",
            member=_MP_INIT,
            on_older="error",
            detail="only with use_mla and tp_size > 1 (it keys MLA caches); otherwise dropped",
            why="MLA caches are keyed by tp_size from 0.4.1 on",
            first="0.4.1",
        ),
        Argument(
            key="mq_timeout",
            member=_MP_INIT,
            on_older="drop",
            detail="timing only: the release uses its built-in behaviour",
            first="0.4.2",
        ),
        Argument(
            key="heartbeat_interval",
            member=_MP_INIT,
            on_older="drop",
            detail="timing only: the release has no heartbeat",
            first="0.4.2",
        ),
        Argument(
            key="parallel_strategy",
            member=_MP_INIT,
            on_older="map",
            detail="world_size/kv_rank are passed (with MLA: divided by tp_size, as vLLM did)",
            capability=C.MP_PARALLEL_STRATEGY,
        ),
        Argument(
            key="pp_size",
            name="pp_size",
            member="ParallelStrategy",
            on_older="error",
            detail="only when pp_size > 1: older releases have no pipeline-parallel layout",
            why="this release has no pipeline-parallel layout",
            capability=C.MP_PARALLEL_STRATEGY,
        ),
        Argument(
            key="dcp_size",
            member="ParallelStrategy",
            on_older="error",
            detail="only when dcp_size > 1: older releases have no decode-context parallelism",
            why="this release has no decode-context parallelism",
            first="0.5.5",
        ),
        Argument(
            key="extra_config",
            member=_MP_INIT,
            on_older="error",
            detail="only when non-empty: the configuration would be ignored",
            why="the configuration would be ignored",
            first="0.4.6",
        ),
        Argument(
            key="enable_kv_events",
            member=f"{MP_WORKER.name}.__init__",
            on_older="drop",
            detail="events are unavailable; get_kv_events() returns []",
            capability=C.MP_KV_EVENTS,
        ),
        Argument(
            key="required_chunk_alignment",
            member=_MP_INIT,
            on_older="error",
            detail="only when given: the server's chunk size would not be negotiated",
            why="the server's chunk size would not be negotiated against the alignment",
            capability=C.MP_CHUNK_ALIGNMENT,
        ),
        Argument(
            key="token_ids",
            member=_LOOKUP,
            on_older="map",
            detail="0.3.13 looks up by block_hashes: the caller's are passed",
            capability=C.MP_LOOKUP_BY_TOKEN_IDS,
        ),
        Argument(
            key="packed_token_ids",
            name="token_ids",
            member=f"{_LOOKUP}, free_lookup_locks, LoadStoreOp",
            on_older="map",
            detail="packed with the release's own pack_token_ids where it takes bytes; "
            "a list of ints before",
            capability=C.MP_PACKED_TOKEN_IDS,
        ),
        Argument(
            key="cache_salt",
            member=_MP_CALLS,
            on_older="error",
            detail="only when non-empty: dropping it would mix tenants' caches",
            why="dropping it would mix tenants' caches",
            capability=C.MP_CACHE_SALT,
        ),
        Argument(
            key="request_configs",
            member=_MP_CALLS,
            on_older="error",
            detail="only when non-empty: the per-request configuration would be ignored",
            why="the configuration would be ignored",
            capability=C.MP_REQUEST_CONFIGS,
        ),
        Argument(
            key="reserve_last_token",
            member=_LOOKUP,
            on_older="emulate",
            detail="token_ids[:-1] is looked up: the same aligned range",
            capability=C.MP_RESERVE_LAST_TOKEN,
        ),
        Argument(
            key="reserve_by_hashes",
            name=C.MP_RESERVE_LAST_TOKEN.spec.keyword,
            member=_LOOKUP,
            on_older="error",
            detail="0.3.13 (block-hash lookups): cannot leave out the last token",
            why="block-hash lookups cannot leave out the last token",
            capability=C.MP_LOOKUP_BY_TOKEN_IDS,
        ),
        Argument(
            key="start",
            member=_LOOKUP,
            on_older="error",
            detail="only when start > 0: the chunks below start would be locked and prefetched "
            "too, and their read locks held until the server's TTL",
            why="the chunks below start would be locked until the server's TTL (free them "
            "with free_lookup_locks(token_ids, 0, start, request_id))",
            capability=C.MP_LOOKUP_START,
        ),
        Argument(
            key="extra_ranges",
            member=f"{MP_SCHEDULER.name}.free_lookup_locks",
            on_older="emulate",
            detail="one free_lookup_locks call per extra range: the same locks freed",
            capability=C.MP_FREE_EXTRA_RANGES,
        ),
        Argument(
            key="engine_group_infos",
            member=f"{MP_WORKER.name}.register_kv_caches",
            on_older="error",
            detail="only with more than one KV cache group; one group is dropped",
            why="this release handles one KV cache group only",
            capability=C.MP_ENGINE_GROUP_INFOS,
        ),
        Argument(
            key="layout_hints",
            member=f"{MP_WORKER.name}.register_kv_caches",
            on_older="drop",
            detail="hints only: the release infers the layout",
            capability=C.MP_LAYOUT_HINTS,
        ),
        Argument(
            key="skip_first_n_tokens",
            member="LoadStoreOp",
            on_older="error",
            detail="only when non-zero: the skipped tokens would be stored or loaded",
            why="the skipped tokens would be stored or loaded",
            first="0.4.1",
        ),
        Argument(
            key="block_ids",
            name="block_ids",
            member="LoadStoreOp",
            on_older="map",
            detail="one KV cache group: flat list[int] <-> [[...]]; several groups: error",
            why="this release has one KV cache group only",
            capability=C.MP_ENGINE_GROUP_INFOS,
        ),
        Argument(
            key="lookup_id",
            member=f"{ENGINE.name}.lookup",
            on_older="map",
            detail="passed as request_id= on 0.3.3; dropped before when pin=False",
            capability=C.ENGINE_LOOKUP_ID,
        ),
        Argument(
            key="pinned_lookup",
            name=C.ENGINE_LOOKUP_ID.spec.keyword,
            member=f"{ENGINE.name}.lookup(pin=True)",
            on_older="error",
            detail="before 0.3.3 a lookup cannot be pinned by id",
            why="a pinned lookup could never be unpinned",
            first="0.3.3",
        ),
        Argument(
            key="engine_request_configs",
            member=f"{ENGINE.name}.lookup/prefetch",
            on_older="error",
            detail="only when non-empty",
            why="the configuration would be ignored",
            capability=C.ENGINE_REQUEST_CONFIGS,
        ),
        Argument(
            key="unpin",
            name="unpin",
            member=f"{ENGINE.name}.lookup_unpin",
            on_older="map",
            detail="lookup_unpin([id]) on 0.3.3-0.3.7; a no-op before 0.3.3 (nothing is pinned "
            "by id)",
            capability=C.ENGINE_SINGLE_UNPIN,
        ),
        Argument(
            key="prefetch",
            member=f"{ENGINE.name}.async_lookup_and_prefetch",
            on_older="map",
            detail="prefetch(tokens) on 0.3.0-0.3.5 (synchronous; lookup_id unused)",
            capability=C.ENGINE_ASYNC_PREFETCH,
        ),
        Argument(
            key="broadcast_fn",
            member="LMCacheEngineBuilder.get_or_create",
            on_older="error",
            detail="given to 0.3.0-0.3.3, which cannot broadcast",
            why="other ranks would not receive the broadcasts",
            first="0.3.4",
        ),
        Argument(
            key="broadcast_required",
            name="broadcast_fn",
            member="LMCacheEngineBuilder.get_or_create",
            on_older="map",
            detail="required from 0.3.5: single-process defaults are passed when not given",
            first="0.3.5",
        ),
    )
)

#: The rows, in table order.
ARGUMENTS: tuple[Argument, ...] = tuple(ARG)


def render_arguments_markdown() -> str:
    """The argument table as Markdown (the documentation's copy is generated from it)."""
    lines = [
        "| argument | member | since | on an older release | detail |",
        "|---|---|---|---|---|",
    ]
    for row in ARGUMENTS:
        lines.append(
            f"| `{row.argument}` | `{row.member}` | {row.since} | {row.on_older} | {row.detail} |"
        )
    return "\n".join(lines) + "\n"


def normalise_allow(allow: Iterable[str] | str | bool) -> Allow:
    """``allow=`` as every adapter takes it, normalised once: a name, names, ``True`` (accept
    every downgrade) or ``False``/``()`` (none). A name no row has is refused (a typo would
    otherwise accept nothing, silently)."""
    if allow is True:
        return True
    if allow is False:
        return frozenset()
    names = frozenset((allow,) if isinstance(allow, str) else allow)
    known = {row.argument for row in ARGUMENTS}
    unknown = sorted(n for n in names if n not in known)
    if unknown:
        raise UnsupportedArgumentError(
            unknown[0],
            f"allow={sorted(names)!r}: {', '.join(map(repr, unknown))} "
            f"{'is' if len(unknown) == 1 else 'are'} not an argument lmcache-compat can "
            f"downgrade; known: {', '.join(sorted(known))}",
        )
    return names


@dataclass(frozen=True, slots=True)
class Downgrades:
    """The caller's permission to drop arguments that change meaning (normalised once by
    :func:`normalise_allow`), and the member errors name."""

    allowed: Allow
    where: str
    version: str | None

    def at(self, where: str) -> Downgrades:
        """The same permission, for another member (error messages name it)."""
        return Downgrades(self.allowed, where, self.version)

    def allows(self, row: Argument) -> bool:
        return self.allowed is True or row.argument in self.allowed

    def error(self, row: Argument) -> UnsupportedArgumentError:
        return UnsupportedArgumentError(
            row.argument,
            f"{self.where} in LMCache {self.version or 'unknown'} cannot take "
            f"{row.argument!r} (first release that can: {row.since}); {row.why}.\n"
            f"HINT: pip install -U 'lmcache>={row.since}', or pass allow={{{row.argument!r}}} "
            "to accept the downgrade",
        )

    def refuse_unknown_required(self, facts: MethodFacts, filled: Iterable[str]) -> None:
        """Raise (at construction) when the release's method requires a parameter this
        adapter does not fill: a parameter added after the releases lmcache-compat knows, so
        no call could bind."""
        unknown = facts.required_beyond(filled)
        if unknown:
            from lmcache_compat.installation import install_hint  # lazy: only a refusal

            names = ", ".join(repr(n) for n in unknown)
            raise UnsupportedArgumentError(
                unknown[0],
                f"{self.where} in LMCache {self.version or 'unknown'} requires {names}, a "
                "parameter lmcache-compat does not know (newer than every release it was "
                "built for): no call through the adapter could bind.\n"
                f"HINT: {install_hint(upgrade=True)}, or install an LMCache release that "
                "`lmcache-compat doctor` lists",
            )

    def refuse(self, row: Argument) -> None:
        """Raise unless ``row``'s argument may be downgraded (then it is dropped)."""
        if not self.allows(row):
            raise self.error(row)


@dataclass(frozen=True, slots=True)
class Applied:
    """How one argument reaches one release, decided by :func:`apply`: ``put(kwargs, value)``
    runs per call."""

    row: Argument
    #: The release's parameter name.
    keyword: str
    action: Action
    put: Put

    @property
    def takes(self) -> bool:
        return self.action == "pass"


def _nothing(kwargs: dict[str, Any], value: Any) -> None:
    """A dropped argument (``drop``, or an ``error`` the caller allowed)."""


def apply(
    row: Argument,
    facts: MethodFacts | None,
    downgrades: Downgrades,
    *,
    keyword: str | None = None,
    given: Callable[[Any], bool] | None = None,
    convert: Callable[[Any], Any] | None = None,
    emulate: Put | None = None,
) -> Applied:
    """The one rule of the argument policy, run once per argument at construction.

    ``facts`` are the release member's (``None``: the release has no such member at all);
    ``keyword`` its parameter name (default: the row's argument). When the release takes it (an
    explicit parameter of that name, positional-or-keyword or keyword-only), ``put`` passes the
    caller's value by keyword, through ``convert`` if given, whenever ``given(value)`` (default:
    the value is truthy: ``None``, ``""``, ``0``, empty mean "not asked for"). Otherwise the
    row's ``on_older`` is executed: ``map`` and ``emulate`` run the mapper's ``emulate`` step
    (required: the release's own form, or the same result another way), ``drop`` drops it,
    ``error`` raises :class:`~lmcache_compat.errors.UnsupportedArgumentError` when given, unless
    the caller allowed the downgrade (then it is dropped).
    """
    name = keyword or row.argument
    if facts is not None and facts.accepts_keyword(name):
        return Applied(row, name, "pass", _passing(name, given, convert))
    if row.on_older in ("map", "emulate"):
        if emulate is None:
            raise TypeError(f"argument row {row.key!r} ({row.on_older}) needs the mapper's step")
        return Applied(row, name, row.on_older, emulate)
    if row.on_older == "drop":
        return Applied(row, name, "drop", _nothing)
    if downgrades.allows(row):
        return Applied(row, name, "allowed", _nothing)
    return Applied(row, name, "error", _refusing(row, downgrades, given))


def _passing(
    name: str, given: Callable[[Any], bool] | None, convert: Callable[[Any], Any] | None
) -> Put:
    if given is None and convert is None:

        def pass_when_given(kwargs: dict[str, Any], value: Any) -> None:
            if value:
                kwargs[name] = value

        return pass_when_given
    asked = given or bool
    change = convert or _same

    def pass_converted(kwargs: dict[str, Any], value: Any) -> None:
        if asked(value):
            kwargs[name] = change(value)

    return pass_converted


def _same(value: Any) -> Any:
    return value


def _refusing(row: Argument, downgrades: Downgrades, given: Callable[[Any], bool] | None) -> Put:
    asked = given or bool

    def refuse_when_given(kwargs: dict[str, Any], value: Any) -> None:
        if asked(value):
            raise downgrades.error(row)

    return refuse_when_given
