"""Translating an MP server command line from one LMCache release to another.

:func:`translate_mp_flags` parses the flags with the source release's own flag table (read
statically: :mod:`~lmcache_compat.upstream.mp_flags_scan`) and follows each flag release by
release: kept where the next release has it (a value its choices no longer take is mapped by
:data:`FLAG_MOVES`, or refused), renamed where :data:`FLAG_MOVES` says so, otherwise lost. With
``keep_defaults`` a flag whose default changed on the way is written out with the source's
default, so the server behaves as it did. Anything the target cannot do is the one-line reason
of an :class:`~lmcache_compat.errors.MPFlagsError` (``allow_loss`` drops it with a note instead);
a flag the target requires and the command line cannot give is always an error.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lmcache_compat.config.schema import FlagSpec, ReleaseSchema, load_schemas, release_schema
from lmcache_compat.errors import MPFlagsError
from lmcache_compat.upstream.locations import MP_COMMANDS

__all__ = ["FLAG_MOVES", "FlagMove", "FlagTranslation", "GroupMove", "translate_mp_flags"]


@dataclass(frozen=True, slots=True)
class FlagMove:
    """A flag of one release that the next release spells differently (``new`` ``None``: no
    replacement). The release is not written: the move applies where ``old`` is gone, or is
    hidden or deprecated in the next release. ``new == old`` with ``values``: only the values
    were renamed (applied to a value the next release's choices no longer take)."""

    old: str
    new: str | None
    evidence: str
    values: Mapping[str, str] = field(default_factory=dict)
    hint: str | None = None
    #: The commands it concerns (empty: every command that has the flag).
    commands: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class GroupMove:
    """Flags that changed meaning together in one command, applied where ``when_gone`` is no
    longer one of its flags."""

    command: str
    when_gone: str
    renames: Mapping[str, str]
    evidence: str


#: MP flag moves, each read from the diff of two consecutive releases (or code that says so).
FLAG_MOVES: tuple[FlagMove, ...] = (
    FlagMove(
        "--cpu-buffer-size",
        "--l1-size-gb",
        "the diff: the CPU buffer in GB became the L1 memory in GB (distributed/config.py)",
    ),
    FlagMove(
        "--disable-lazy-alloc",
        "--no-l1-use-lazy",
        "the diff: lazy allocation became --l1-use-lazy (on by default)",
    ),
    FlagMove(
        "--service-instance-id",
        "--instance-id",
        "both help texts: the OTel resource attribute service.instance.id of the server",
    ),
    FlagMove(
        "--transfer-mode",
        "--supported-transfer-mode",
        "both help texts: the STORE/RETRIEVE (gpu) and PREPARE/COMMIT (non_gpu) paths",
    ),
    FlagMove(
        "--supported-transfer-mode",
        "--supported-transfer-mode",
        "the help texts: gpu is STORE/RETRIEVE (lmcache_driven), non_gpu is PREPARE/COMMIT "
        "(engine_driven)",
        values={"gpu": "lmcache_driven", "non_gpu": "engine_driven"},
    ),
    FlagMove(
        "--coordinator-l2-event-reporting",
        "--coordinator-event-reporting",
        "code: the old flag is kept hidden and warns that it is deprecated",
    ),
    FlagMove(
        "--coordinator-l2-event-flush-interval",
        "--coordinator-event-flush-interval",
        "code: the old flag is kept hidden and warns that it is deprecated",
    ),
    FlagMove(
        "--blend-chunk-size",
        "--chunk-size",
        "the diff of the coordinator command: the blend chunk size became the chunk size",
        commands=("cli_coordinator",),
    ),
    FlagMove(
        "--l2-prefetch-max-in-flight",
        None,
        "its help text: deprecated and ignored",
        hint="use --l2-prefetch-inflight-watermark (a fraction, not a count)",
    ),
)

#: Flags that changed meaning together.
GROUP_MOVES: tuple[GroupMove, ...] = (
    GroupMove(
        "http_server",
        "--zmq-port",
        {
            "--host": "--http-host",
            "--port": "--http-port",
            "--zmq-host": "--host",
            "--zmq-port": "--port",
        },
        "the diff: http_server's --host/--port became the ZMQ bind (the MP server's own flags) "
        "and the HTTP bind moved to --http-host/--http-port; --zmq-host/--zmq-port are gone",
    ),
)


@dataclass(frozen=True, slots=True)
class Given:
    """One flag of a command line: its table key, the option string written, its values."""

    key: str
    option: str
    values: tuple[str, ...] = ()
    #: Renamed to a spelling the release reached so far cannot say yet.
    pending: bool = False


@dataclass(frozen=True)
class FlagTranslation:
    """The target release's command line, and what changed on the way."""

    argv: tuple[str, ...]
    source: str
    target: str
    command: str
    changes: tuple[str, ...] = ()
    #: What the target cannot do (dropped; only with ``allow_loss``).
    lost: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "target": self.target,
            "command": self.command,
            "argv": list(self.argv),
            "changes": list(self.changes),
            "lost": list(self.lost),
        }


def _option_index(flags: Mapping[str, FlagSpec]) -> dict[str, tuple[str, bool]]:
    """option string -> (table key, negated)."""
    out: dict[str, tuple[str, bool]] = {}
    for key, spec in flags.items():
        for option in spec.options:
            out[option] = (key, False)
        for option in spec.negated:
            out[option] = (key, True)
    return out


def parse_flags(argv: Sequence[str], flags: Mapping[str, FlagSpec], where: str) -> list[Given]:
    """``argv`` read against a release's flag table (``--flag value``, ``--flag=value``,
    switches, ``nargs``); anything else is an :class:`MPFlagsError`."""
    index = _option_index(flags)
    out: list[Given] = []
    i = 0
    while i < len(argv):
        token = argv[i]
        option, _, inline = token.partition("=") if token.startswith("--") else (token, "", "")
        if option not in index:
            kind = "a flag" if token.startswith("-") else "an argument"
            raise MPFlagsError(f"{token!r} is not {kind} of {where}")
        key, negated = index[option]
        spec = flags[key]
        i += 1
        if negated or spec.is_switch:
            if inline:
                raise MPFlagsError(f"{option} of {where} takes no value")
            out.append(Given(key, option))
            continue
        if inline or "=" in token:
            out.append(Given(key, option, (inline,)))
            continue
        many = spec.nargs in ("*", "+") or isinstance(spec.nargs, int)
        values: list[str] = []
        while i < len(argv) and not (argv[i].startswith("--") and argv[i] != "--"):
            values.append(argv[i])
            i += 1
            if not many or (isinstance(spec.nargs, int) and len(values) == spec.nargs):
                break
        if not values and spec.nargs not in ("*", "?"):
            raise MPFlagsError(f"{option} of {where} needs a value")
        out.append(Given(key, option, tuple(values)))
    return out


def _command(schema: ReleaseSchema, command: str) -> Mapping[str, FlagSpec]:
    flags = schema.mp_commands.get(command)
    if flags is None:
        have = ", ".join(schema.mp_commands) or "none"
        raise MPFlagsError(
            f"LMCache {schema.version} has no {command} MP command line (it has: {have})"
        )
    return flags


def _moves_for(command: str) -> dict[str, FlagMove]:
    return {m.old: m for m in FLAG_MOVES if not m.commands or command in m.commands}


@dataclass
class _Walk:
    command: str
    changes: list[str]
    lost: list[str]

    def step(
        self, given: Given, a: ReleaseSchema, b: ReleaseSchema, forward: bool, last: bool
    ) -> Given | None:
        """``given`` (a flag of ``a``'s command line) as ``b`` spells it. A rename whose new
        spelling ``b`` cannot say yet stays pending while ``b`` is not the ``last`` release."""
        old_flags, new_flags = _command(a, self.command), _command(b, self.command)
        moves = _moves_for(self.command)
        if not forward:
            moves = {m.new: m for m in moves.values() if m.new is not None}
        for group in GROUP_MOVES:
            gone_now = group.when_gone in old_flags and group.when_gone not in new_flags
            back_now = group.when_gone in new_flags and group.when_gone not in old_flags
            if group.command == self.command and (gone_now if forward else back_now):
                renames = group.renames if forward else {v: k for k, v in group.renames.items()}
                if given.key in renames:
                    new = renames[given.key]
                    self.changes.append(f"{b.version}: {given.option} -> {new} ({group.evidence})")
                    return Given(new, new, given.values)
                return given
        index = _option_index(new_flags)
        move = moves.get(given.key)
        renamed = move is not None and move.new != move.old
        if given.option in index:
            key = index[given.option][0]
            spec = new_flags[key]
            if not (renamed and (spec.hidden or spec.deprecated)):
                return self._values(Given(key, given.option, given.values), spec, b, forward)
        if given.pending:
            if last:
                self.lost.append(f"{given.option}: LMCache {b.version} cannot say it either")
                return None
            return given
        if move is None:
            gone = "removed" if forward else "not yet a flag"
            self.lost.append(f"{given.option}: {gone} in LMCache {b.version}, no replacement")
            return None
        target = move.new if forward else move.old
        if target is None:
            hint = f"; {move.hint}" if move.hint else ""
            self.lost.append(f"{given.option}: {move.evidence} in LMCache {b.version}{hint}")
            return None
        self.changes.append(f"{b.version}: {given.option} -> {target} ({move.evidence})")
        if target not in index:
            if last:
                self.lost.append(
                    f"{given.option}: it became {target}, which LMCache {b.version} cannot say"
                )
                return None
            return Given(given.key, target, given.values, pending=True)
        key = index[target][0]
        return self._values(Given(key, target, given.values), new_flags[key], b, forward)

    def _values(
        self, given: Given, spec: FlagSpec, b: ReleaseSchema, forward: bool
    ) -> Given | None:
        if not spec.choices or not given.values:
            return given
        choices = {str(c) for c in spec.choices}
        values_move = _moves_for(self.command).get(given.key)
        mapping = dict(values_move.values) if values_move and values_move.new == given.key else {}
        if not forward:
            mapping = {v: k for k, v in mapping.items()}
        out = []
        for value in given.values:
            if value in choices:
                out.append(value)
            elif value in mapping and mapping[value] in choices:
                out.append(mapping[value])
                self.changes.append(f"{b.version}: {given.option} {value} -> {mapping[value]}")
            else:
                self.lost.append(
                    f"{given.option} {value}: LMCache {b.version} takes only "
                    f"{', '.join(sorted(choices))}"
                )
                return None
        return Given(given.key, given.option, tuple(out))

    def follow(self, given: list[Given], rows: list[ReleaseSchema], forward: bool) -> list[Given]:
        for i, (x, y) in enumerate(itertools.pairwise(rows)):
            last = i == len(rows) - 2
            given = [g for g in (self.step(g, x, y, forward, last) for g in given) if g]
        return given


def _render(given: list[Given]) -> tuple[str, ...]:
    argv: list[str] = []
    for g in given:
        argv.append(g.option)
        argv.extend(g.values)
    return tuple(argv)


def _literal(value: Any) -> bool:
    return not isinstance(value, dict) and value is not None


def translate_mp_flags(
    argv: Sequence[str],
    source: str | ReleaseSchema,
    target: str | ReleaseSchema,
    command: str = "server",
    *,
    keep_defaults: bool = True,
    allow_loss: bool = False,
) -> FlagTranslation:
    """The flags for ``target``'s MP ``command`` (see :data:`~lmcache_compat.upstream.
    locations.MP_COMMANDS`) that do what ``argv`` does for ``source`` (see the module doc)."""
    a, b = release_schema(source), release_schema(target)
    names = {c.key: c.command for c in MP_COMMANDS}
    where = f"LMCache {a.version}'s {names.get(command, command)}"
    given = parse_flags(argv, _command(a, command), where)
    _command(b, command)
    rows = load_schemas().between(a, b)
    forward = a.parsed_version <= b.parsed_version
    walk = _Walk(command, [], [])
    given = walk.follow(given, rows, forward)
    if keep_defaults:
        given += _pins(a, b, given, walk, rows=rows, forward=forward)
    if walk.lost and not allow_loss:
        raise MPFlagsError(
            f"{where} flags cannot all be said to LMCache {b.version}: " + "; ".join(walk.lost)
        )
    flags = _command(b, command)
    have = {g.key for g in given}
    missing = [k for k, s in flags.items() if s.required and k not in have]
    if missing:
        spelled = [
            k
            + (f" (one of {', '.join(map(str, choices))})" if (choices := flags[k].choices) else "")
            for k in missing
        ]
        raise MPFlagsError(
            f"LMCache {b.version}'s {names.get(command, command)} requires {', '.join(spelled)}, "
            "which the given flags do not set: add it"
        )
    return FlagTranslation(
        _render(given), a.version, b.version, command, tuple(walk.changes), tuple(walk.lost)
    )


def _pins(
    a: ReleaseSchema,
    b: ReleaseSchema,
    given: list[Given],
    walk: _Walk,
    *,
    rows: list[ReleaseSchema],
    forward: bool,
) -> list[Given]:
    """Flags of ``a`` not given whose default differs in ``b`` (followed through the moves):
    written with ``a``'s default, so the server behaves as it did."""
    command = walk.command
    source, target = _command(a, command), _command(b, command)
    have = {g.key for g in given}
    out = []
    for key, old in source.items():
        if old.hidden or not _literal(old.default) or any(g.key == key for g in given):
            continue
        if old.is_switch:
            probe = Given(key, (old.options if old.default else old.negated or ("",))[0])
        elif isinstance(old.default, list):
            continue
        else:
            probe = Given(key, old.options[0], (str(old.default),))
        shadow = _Walk(command, [], [])
        reached = shadow.follow([probe], rows, forward) if probe.option else []
        if not reached or shadow.lost:
            continue
        pin = reached[0]
        new = target[pin.key]
        if pin.key in have or new.hidden or new.default == old.default:
            continue
        if old.is_switch and (not new.is_switch or pin.option not in _option_index(target)):
            continue
        out.append(pin)
        walk.changes.append(
            f"the default of {pin.key} is {new.default!r} in {b.version}, {old.default!r} in "
            f"{a.version}: {' '.join([pin.option, *pin.values])} keeps {a.version}'s"
        )
    return out
