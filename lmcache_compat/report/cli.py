"""The ``lmcache-compat`` command line.

Each command imports its own modules when it runs, so a command pays only for what it uses.
Every failure is one line on stderr, ``lmcache-compat COMMAND: error: ...``, never a traceback
(usage errors too, with a close match for a misspelt command or option); output that the
terminal cannot encode is escaped. Each command's ``--help`` lists its exit statuses, read
from :data:`lmcache_compat.report.statuses.COMMAND_STATUSES`, and ``docs/cli.md`` is that help.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence

from lmcache_compat import __version__
from lmcache_compat.errors import (
    LMCacheCompatError,
    LMCacheVersionError,
    NotInMatrixError,
    SourceNotFoundError,
)
from lmcache_compat.report.config_commands import add_config_parser

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up time)
if TYPE_CHECKING:
    from typing import Any, NoReturn, TextIO

    from lmcache_compat.report.diff import ReleaseView

__all__ = ["EXAMPLES", "build_parser", "command_parsers", "main"]

PROG = "lmcache-compat"
#: One example per command, shown at the end of its ``--help``.
EXAMPLES: dict[str, tuple[str, ...]] = {
    "doctor": (
        "lmcache-compat doctor",
        "lmcache-compat doctor --json --mp-server http://HOST:PORT",
    ),
    "scan": ("lmcache-compat scan ./lmcache-VERSION-py3-none-any.whl --json",),
    "matrix": ("lmcache-compat matrix --markdown",),
    "grid": ("lmcache-compat grid --vllm VERSION", "lmcache-compat grid --engine sglang"),
    "diff": ("lmcache-compat diff OLD NEW --fail-on-breaking",),
    "releases": ("lmcache-compat releases '>=VERSION' --distinct --role mp --format tox",),
    "config": ("lmcache-compat config check config.yaml --lmcache VERSION",),
    "config check": ("lmcache-compat config check config.yaml --lmcache VERSION",),
    "config migrate": ("lmcache-compat config migrate config.yaml --to VERSION -o new.yaml",),
    "config mp-flags": ("lmcache-compat config mp-flags --from OLD --to NEW -- --port 6555",),
}


#: What -q and -v do, per command ("": every other command).
_VERBOSITY_HELP: dict[str, tuple[str, str]] = {
    "doctor": (
        "print only the verdicts and the next steps",
        "print everything doctor found (the capability table and the configuration block even "
        "without LMCache)",
    ),
    "": ("print only the answer (no notes on stderr)", "print everything the command found"),
}


class UsageError(Exception):
    """A command line the parser refuses: ``prog`` and the one-line ``message``."""

    def __init__(self, prog: str, message: str) -> None:
        super().__init__(message)
        self.prog, self.message = prog, message


class _Formatter(argparse.HelpFormatter):
    """argparse's help, with the description and epilog laid out as written: paragraphs are
    filled, an indented line is kept (an example), and a status line (``  3    meaning``) is
    wrapped under its meaning."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        import re  # lazy: only help pays for it
        import textwrap  # lazy: only help pays for it

        out: list[str] = []
        prose: list[str] = []

        def flush() -> None:
            if prose:
                out.append(
                    textwrap.fill(
                        " ".join(prose), width, initial_indent=indent, subsequent_indent=indent
                    )
                )
                prose.clear()

        for line in text.splitlines():
            status = re.match(r"(\s+\d+\s+)\S", line)
            if not line.strip():
                flush()
                out.append("")
            elif not line.startswith(" "):
                prose.append(line.strip())
            elif status is None:
                flush()
                out.append(indent + line)
            else:
                flush()
                hang = indent + " " * len(status.group(1))
                out.append(
                    textwrap.fill(line, width, initial_indent=indent, subsequent_indent=hang)
                )
        flush()
        return "\n".join(out)


class _Parser(argparse.ArgumentParser):
    """A parser whose errors are :class:`UsageError` (one line, no usage block), with a close
    match for a misspelt choice."""

    #: The command whose exit statuses and example end the help (``""``: the program's);
    #: rendered only when help is asked for, so no other run reads the statuses.
    command: str | None = None

    def error(self, message: str) -> NoReturn:
        raise UsageError(self.prog, _with_suggestion(message))

    def _get_formatter(self) -> argparse.HelpFormatter:
        if _Parser._helping:
            return super()._get_formatter()
        # add_argument checks each metavar with a formatter; at a fixed width argparse does not
        # read the terminal's (shutil, which imports bz2 and lzma): help and usage are
        # formatted at the terminal's width (format_help, format_usage)
        make: Any = self.formatter_class
        formatter: argparse.HelpFormatter = make(prog=self.prog, width=100)
        return formatter

    def format_usage(self) -> str:
        return _Parser._as_help(super().format_usage)

    def format_help(self) -> str:
        if self.epilog is None and self.command is not None:
            self.epilog = _epilog(self.command)
        return _Parser._as_help(super().format_help)

    #: Whether help or usage is being formatted (then at the terminal's width).
    _helping = False

    @staticmethod
    def _as_help(format_text: Callable[[], str]) -> str:
        _Parser._helping = True
        try:
            return format_text()
        finally:
            _Parser._helping = False


def _close(word: str, candidates: Sequence[str]) -> str | None:
    import difflib  # lazy: only a usage error pays for it

    found = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return found[0] if found else None


def _with_suggestion(message: str) -> str:
    """argparse's ``invalid choice`` message with the closest choice named."""
    import re  # lazy: only a usage error pays for it

    found = re.search(r"invalid choice: '?([^' ]*)'? \(choose from (.*)\)", message)
    if found is None:
        return message
    choices = [c.strip(" '\"") for c in found.group(2).split(",")]
    best = _close(found.group(1), choices)
    hint = f"; did you mean {best}?" if best else ""
    head = message[: found.start()]
    return f"{head}invalid choice: {found.group(1)!r}{hint} (choose from {', '.join(choices)})"


def command_parsers(
    parser: argparse.ArgumentParser,
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Every command's parser below ``parser``, by its name (``config check``), parents first."""
    for name, sub, _ in _commands(parser):
        yield name, sub


def _commands(
    parser: argparse.ArgumentParser,
) -> Iterator[tuple[str, argparse.ArgumentParser, str]]:
    """:func:`command_parsers`, with each command's one-line help."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            for name, sub in action.choices.items():
                yield name, sub, helps.get(name, "")
                for inner, deeper, text in _commands(sub):
                    yield f"{name} {inner}", deeper, text


def _epilog(command: str) -> str:
    """The exit statuses of ``command`` (``""``: every status, for the program's help) and its
    example."""
    from lmcache_compat.report.statuses import STATUSES, command_statuses  # lazy: help only

    statuses = command_statuses(command) if command else STATUSES
    width = max(len(str(s.code)) for s in statuses) + 2
    lines = ["exit statuses:" if command else "exit statuses (every command):"]
    lines += [f"  {s.code:<{width}}{s.meaning}" for s in statuses]
    examples = EXAMPLES[command] if command else ("lmcache-compat doctor",)
    lines += ["", "example:" if len(examples) == 1 else "examples:"]
    lines += [f"  {line}" for line in examples]
    return "\n".join(lines)


def _finish(parser: argparse.ArgumentParser, width: int | None) -> None:
    """Each command's description (its one-line help), exit statuses and example, and -q/-v."""
    import functools  # lazy: start-up time

    formatter = functools.partial(_Formatter, width=width) if width else _Formatter
    parser.formatter_class = formatter
    for name, sub, text in _commands(parser):
        sub.formatter_class = formatter
        if sub.description is None and text:
            sub.description = text[0].upper() + text[1:] + "."
        if isinstance(sub, _Parser):
            sub.command = name
        if any(isinstance(a, argparse._SubParsersAction) for a in sub._actions):
            continue
        loud = sub.add_mutually_exclusive_group()
        quiet, verbose = _VERBOSITY_HELP.get(name, _VERBOSITY_HELP[""])
        loud.add_argument(
            "-q",
            "--quiet",
            dest="verbosity",
            action="store_const",
            const=-1,
            default=0,
            help=quiet,
        )
        loud.add_argument(
            "-v",
            "--verbose",
            dest="verbosity",
            action="store_const",
            const=1,
            default=0,
            help=verbose,
        )


def _print_json(data: object) -> None:
    print(json.dumps(data, indent=2))


def _doctor(args: argparse.Namespace) -> int:
    from lmcache_compat.report.doctor import doctor_report, mp_servers_report  # lazy: start-up time
    from lmcache_compat.report.doctor.text import format_doctor  # lazy: start-up time

    if args.mp_server:
        # lazy: only --mp-server pays for http.client (and email, which it imports)
        from lmcache_compat.mp.server import check_url

        for url in args.mp_server:  # a malformed URL is a usage error: nothing is gathered
            check_url(url)
    report = doctor_report()
    if args.mp_server:  # a running MP server's release, from its HTTP front end
        report = report.with_servers(mp_servers_report(args.mp_server, report.lmcache))
    data = report.to_json()
    if args.json:
        _print_json(data)
    else:
        from lmcache_compat.inputs import shown  # lazy: start-up time

        # what doctor read (metadata, a front end's reply) may hold control characters: escaped
        print(
            "\n".join(
                shown(line, 1 << 20) for line in format_doctor(data, args.verbosity).splitlines()
            )
        )
    return report.exit_status


def _format_scan(data: Mapping[str, Any]) -> str:
    """The text of ``scan``, from its JSON (a scan's, or the shipped row's)."""
    lines = [
        f"source:          {data['source']}",
        f"LMCache version: {data['lmcache_version'] or 'unknown'}",
    ]
    for key, value in data.items():  # vLLM's vendored copy: ``vllm_version``
        if key.endswith("_version") and key != "lmcache_version":
            package = key[: -len("_version")]
            lines.append(f"{package} version:    {value or 'unknown'}")
    caps: Mapping[str, bool] = data["capabilities"]
    lines.append(f"capabilities:    {', '.join(c for c, v in caps.items() if v) or 'none'}")
    lines.append(f"absent:          {', '.join(c for c, v in caps.items() if not v) or 'none'}")
    if data["missing_classes"]:
        lines.append(f"classes absent:  {', '.join(sorted(data['missing_classes']))}")
    for cls, methods in sorted(data["surfaces"].items()):
        how = data["found_by"].get(cls)
        found = " (not at a known path: found by name)" if how == "search" else ""
        lines.append(f"{cls}: in {data['modules'].get(cls, '?')}{found}")
        lines.extend(f"  {m}({', '.join(params)})" for m, params in methods.items())
    return "\n".join(lines)


def _scan(args: argparse.Namespace) -> int:
    native = args.vllm_native_path is not None
    target = args.target
    if native and args.vllm_native_path:
        target = args.vllm_native_path
    data = None
    if not native and not args.rescan:
        from lmcache_compat.upstream.known import shipped_scan_json  # lazy: start-up time

        data = shipped_scan_json(target)
    if data is None:
        from lmcache_compat.upstream.scanner import scan  # lazy: start-up time

        data = scan(target, vllm_native=native, known_rows=not args.rescan).to_json()
    if args.json:
        _print_json(data)
    else:
        print(_format_scan(data))
    return 0


def _matrix(args: argparse.Namespace) -> int:
    from lmcache_compat.report.tables import matrix_markdown, matrix_text  # lazy: start-up time
    from lmcache_compat.upstream.matrix import load_matrix  # lazy: start-up time

    m = load_matrix()
    if args.json:
        _print_json(
            {
                "releases": [
                    {
                        "version": r.version,
                        "prerelease": r.prerelease,
                        "artifact": r.artifact,
                        **r.scan_json(),
                    }
                    for r in m.rows
                ],
                "since": {c: m.since(c) for c in m.newest.capabilities},
            }
        )
    elif args.markdown:
        print(matrix_markdown(m), end="")
    else:
        print(matrix_text(m), end="")
    return 0


def _sglang_grid(args: argparse.Namespace) -> int:
    from lmcache_compat.report import sglang_tables as tables  # lazy: start-up time
    from lmcache_compat.sglang.known.grid import load_sglang_grid  # lazy: start-up time
    from lmcache_compat.upstream.matrix import load_matrix  # lazy: start-up time

    grid, matrix = load_sglang_grid(), load_matrix()
    only = args.sglang
    if only is not None:
        only = grid.release(only).sglang  # NotInMatrixError / LMCacheVersionError: status 3
    if args.json:
        runs = [grid.run_of(only)] if only is not None else grid.runs
        out: dict[str, object] = {
            "lmcache": grid.lmcache,
            "releases": [
                {
                    "sglang": r.sglang,
                    "key": r.key,
                    "plugin_group": r.plugin_group,
                    "registry": r.registry,
                    "variant": r.variant,
                    "internals": dict(r.internals),
                }
                for r in grid.releases
                if only is None or r.sglang == only
            ],
            "runs": [
                {
                    "first": run.first,
                    "last": run.last,
                    "key": run.key,
                    "releases": list(run.releases),
                    "integration": list(run.integration),
                    "pairs": dict(run.pairs),
                }
                for run in runs
            ],
        }
        if only is not None and grid.release(only).registry:
            out["plugin"] = [
                {"lmcache": span, "plugin": text}
                for span, text in tables.plugin_spans(grid, matrix, only)
            ]
        _print_json(out)
    elif args.markdown:
        print(tables.sglang_grid_markdown(grid, matrix), end="")
    else:
        print(tables.sglang_grid_text(grid, matrix, only), end="")
    return 0


def _grid(args: argparse.Namespace) -> int:
    if args.engine == "sglang" or args.sglang is not None:
        return _sglang_grid(args)
    from lmcache_compat.report.tables import grid_markdown, grid_text  # lazy: start-up time
    from lmcache_compat.upstream.grid import Grid, load_grid  # lazy: start-up time

    grid = load_grid()
    if args.vllm is not None:
        from lmcache_compat.versions import parse_version  # lazy: start-up time

        parse_version(args.vllm)
        tier = grid.leans_on(args.vllm)
        if tier is None:
            raise NotInMatrixError(
                f"vLLM {args.vllm} is older than every measured vLLM ({', '.join(grid.versions)})"
            )
        if tier.vllm != args.vllm and args.verbosity >= 0:
            print(
                f"vLLM {args.vllm} was not measured; showing vLLM {tier.vllm}, the nearest "
                "measured release before it",
                file=sys.stderr,
            )
        grid = Grid([tier], grid.meta)
    if args.json:
        _print_json(
            {
                "meta": grid.meta,
                "vllm": {
                    t.vllm: {
                        "torch": t.torch,
                        "imports": t.imports,
                        "pairs": {
                            v: {k: run.to_json() for k, run in p.connectors.items()}
                            for v, p in t.pairs.items()
                        },
                        "unit_tests": t.unit_tests,
                        "mp": {
                            v: {k: run.to_json() for k, run in p.connectors.items()}
                            for v, p in t.mp.items()
                        },
                        "notes": list(t.notes),
                    }
                    for t in grid.tiers
                },
            }
        )
    elif args.markdown:
        print(grid_markdown(grid), end="")
    else:
        print(grid_text(grid), end="")
    return 0


def _resolve_side(spec: str) -> ReleaseView:
    """A version in the matrix, or a path to scan."""

    from pathlib import Path  # lazy: start-up time

    from lmcache_compat.inputs import shown  # lazy: start-up time
    from lmcache_compat.report.diff import ReleaseView  # lazy: start-up time
    from lmcache_compat.upstream.matrix import load_matrix  # lazy: start-up time
    from lmcache_compat.upstream.scanner import scan  # lazy: start-up time

    if os.path.lexists(spec) or Path(spec).suffix in (".whl", ".gz", ".tgz"):
        return ReleaseView.from_scan(scan(spec))
    try:
        return ReleaseView.from_row(load_matrix().row(spec))
    except (NotInMatrixError, LMCacheVersionError) as exc:
        raise SourceNotFoundError(
            f"{shown(spec, 80)}: not a file or directory, and {exc}"
        ) from None


def _diff(args: argparse.Namespace) -> int:
    from lmcache_compat.report.diff import diff_releases  # lazy: start-up time

    d = diff_releases(_resolve_side(args.old), _resolve_side(args.new))
    if args.json:
        _print_json(d.to_json())
    else:
        print(d.format())
    return 1 if args.fail_on_breaking and d.breaking else 0


def _add_doctor(sub: Any) -> None:
    """``doctor``: the installed pair's verdict and the next step."""
    doctor = sub.add_parser(
        "doctor", help="report installed Python/LMCache/vLLM and what the LMCache release offers"
    )
    doctor.add_argument("--json", action="store_true", help="print one JSON object")
    doctor.add_argument(
        "--mp-server",
        action="append",
        metavar="URL",
        help="HTTP front end of a running LMCache MP server (http://HOST:PORT, its --http-port; "
        "repeatable): report its release and whether it is the installed one (exit 1 if not)",
    )
    doctor.set_defaults(func=_doctor)


def _add_scan(sub: Any) -> None:
    """``scan``: a release's surfaces, read with ast."""
    scan = sub.add_parser(
        "scan",
        help="read a release's sources with ast (never importing it) and report its surfaces",
    )
    scan.add_argument(
        "target",
        nargs="?",
        help="a .whl, an sdist .tar.gz or a source directory (default: the installed lmcache; "
        "with --vllm-native: a vLLM wheel or directory, default the installed vllm)",
    )
    scan.add_argument(
        "--vllm-native",
        dest="vllm_native_path",
        nargs="?",
        const="",
        metavar="PATH",
        help="scan vLLM's vendored lmcache_integration copy (in TARGET or PATH, else the "
        "installed vllm)",
    )
    scan.add_argument("--json", action="store_true", help="print one JSON object")
    scan.add_argument(
        "--rescan",
        action="store_true",
        help="read the files even when TARGET is an artifact the shipped matrix was built from "
        "(its sha256 is a row's), or the installed release's files are a shipped release's "
        "(then the answer is that row, and nothing is parsed)",
    )
    scan.set_defaults(func=_scan)


def _add_matrix(sub: Any) -> None:
    """``matrix``: the shipped capabilities of every release."""
    matrix = sub.add_parser("matrix", help="the shipped capabilities of every LMCache release")
    fmt = matrix.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="print one JSON object")
    fmt.add_argument("--markdown", action="store_true", help="print a Markdown table")
    matrix.set_defaults(func=_matrix)


def _add_grid(sub: Any) -> None:
    """``grid``: the measured engine x LMCache grids."""
    grid = sub.add_parser(
        "grid",
        help="the measured vLLM x LMCache grid (which LMCache works with vLLM X), or with "
        "--engine sglang the sglang x LMCache grid read from every sglang wheel",
    )
    grid.add_argument(
        "--engine", choices=("vllm", "sglang"), default="vllm", help="which engine's grid"
    )
    grid.add_argument("--vllm", metavar="X", help="only vLLM X (or the measured one before it)")
    grid.add_argument(
        "--sglang", metavar="X", help="only sglang X's run, and what the plugin does there"
    )
    gfmt = grid.add_mutually_exclusive_group()
    gfmt.add_argument("--json", action="store_true", help="print one JSON object")
    gfmt.add_argument("--markdown", action="store_true", help="print Markdown tables")
    grid.set_defaults(func=_grid)


def _add_diff(sub: Any) -> None:
    """``diff``: what changed between two releases."""
    diff = sub.add_parser(
        "diff",
        help="what changed between two releases: moves, methods, parameters, types, capabilities",
    )
    diff.add_argument("old", help="a version in the matrix, or a wheel/sdist/directory")
    diff.add_argument("new", help="a version in the matrix, or a wheel/sdist/directory")
    diff.add_argument("--json", action="store_true", help="print one JSON object")
    diff.add_argument(
        "--fail-on-breaking",
        action="store_true",
        help="exit 1 when a change breaks existing callers",
    )
    diff.set_defaults(func=_diff)


def build_parser(width: int | None = None) -> argparse.ArgumentParser:
    """The whole command line; ``width``: the help's width (default: the terminal's)."""
    parser = _Parser(
        prog=PROG,
        description="One stable API over every LMCache release: what the installed LMCache, "
        "vLLM and sglang offer and whether they work together (doctor), and the shipped "
        "data about every release. 'lmcache-compat COMMAND --help' says what a command "
        "does and the exit statuses it gives.",
    )
    parser.command = ""
    parser.add_argument("--version", action="version", version=f"lmcache-compat {__version__}")
    loud = parser.add_mutually_exclusive_group()  # also before the command: -q doctor
    loud.add_argument(
        "-q", "--quiet", dest="top_verbosity", action="store_const", const=-1, help="as COMMAND -q"
    )
    loud.add_argument(
        "-v", "--verbose", dest="top_verbosity", action="store_const", const=1, help="as COMMAND -v"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    for add in (_add_doctor, _add_scan, _add_matrix, _add_grid, _add_diff):
        add(sub)
    from lmcache_compat.report import releases_parser  # lazy: the command's module runs it

    releases_parser.add_parser(sub)
    add_config_parser(sub)
    _finish(parser, width)
    return parser


def _escape_output() -> None:
    """Never crash on output the terminal cannot encode (``PYTHONIOENCODING=ascii``)."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")


class _ClosedStderr:
    """Standard error when the process started without one (``2>&-``: Python's ``sys.stderr``
    is ``None``): notes and help written to it are dropped, never sent to standard output
    (``print(file=None)`` would), and :func:`_say` knows that its line was not written."""

    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; every outcome is an exit status of :data:`STATUSES`. Ctrl-C at any
    point ends it with 130 and no traceback (a file being written is left as it was: writes
    go through a temporary file and an atomic rename). Without a standard error (``2>&-``)
    notes are dropped and the status is the same, except that an error line that cannot be
    written is status 7."""
    closed = sys.stderr is None
    if closed:
        sys.stderr = _ClosedStderr()
    try:
        return _main(argv)
    finally:
        if closed:
            sys.stderr = None


def _main(argv: Sequence[str] | None) -> int:
    command = PROG
    try:
        _escape_output()
        parser = build_parser()
        try:
            args = _parse(parser, argv)
        except UsageError as exc:
            said = _say(f"{exc.prog}: error: {_one_line(exc.message)} (see {exc.prog} --help)")
            return 2 if said else _write_failed()
        if args.command is None:
            parser.print_help(sys.stderr)
            return 2
        command = f"{PROG} {_command_name(args)}"
        return _run(args, command)
    except KeyboardInterrupt:
        from lmcache_compat.report.statuses import INTERRUPTED  # lazy: start-up time

        _say(f"{command}: interrupted")
        return INTERRUPTED


def _write_failed() -> int:
    from lmcache_compat.report.statuses import WRITE_FAILED  # lazy: start-up time

    return WRITE_FAILED


def _command_name(args: argparse.Namespace) -> str:
    """``doctor``, ``config check``: the command ``args`` run."""
    inner = getattr(args, "config_command", None)
    return f"{args.command} {inner}" if inner else str(args.command)


#: Options that make no sense together, beyond the parsers' exclusive groups: (command, test,
#: the one-line refusal).
_CONFLICTS: tuple[tuple[str, str, str], ...] = (
    ("scan", "target_and_native", "give the vLLM path after --vllm-native, or as TARGET, not both"),
    ("grid", "vllm_and_sglang", "--vllm and --sglang (or --engine sglang) cannot be combined"),
    ("releases", "role_without_distinct", "--role needs --distinct (or SPEC distinct:ROLE)"),
)


def _conflict(test: str, args: argparse.Namespace) -> bool:
    if test == "target_and_native":
        return bool(args.target and args.vllm_native_path)
    if test == "vllm_and_sglang":
        return bool(args.vllm and (args.sglang or args.engine == "sglang"))
    return args.role is not None and not args.distinct


def _parse(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """``argv`` parsed; an unknown option is refused by the command's own parser, with the
    closest of its options; options that conflict are refused in one line."""
    args, extras = parser.parse_known_args(argv)
    if args.command is None:
        if extras:
            parser.error(_unknown(parser, extras))
        return args
    name = _command_name(args)
    leaf = dict(command_parsers(parser))[name]
    if extras:
        leaf.error(_unknown(leaf, extras))
    top = getattr(args, "top_verbosity", None)
    if top is not None and hasattr(args, "verbosity"):
        if args.verbosity not in (0, top):
            leaf.error("-q and -v cannot be combined")
        args.verbosity = top
    for command, test, refusal in _CONFLICTS:
        if command == name and _conflict(test, args):
            leaf.error(refusal)
    if name == "releases" and args.role is None:
        args.role = "connector"
    return args


def _unknown(parser: argparse.ArgumentParser, extras: Sequence[str]) -> str:
    options = [o for a in parser._actions for o in a.option_strings]
    hints = []
    for word in extras:
        best = _close(word.split("=", 1)[0], options) if word.startswith("-") else None
        if best is not None:
            hints.append(f"did you mean {best}?" if len(extras) == 1 else f"{word}: {best}?")
    what = "argument" if len(extras) == 1 else "arguments"
    tail = f"; {'; '.join(hints)}" if hints else ""
    return f"unrecognized {what} {' '.join(extras)}{tail}"


def _run(args: argparse.Namespace, command: str) -> int:
    try:
        code: int = args.func(args)
        sys.stdout.flush()  # an output error surfaces here, not at interpreter exit
        sys.stderr.flush()
    except LMCacheCompatError as exc:
        from lmcache_compat.report.statuses import exit_status  # lazy: start-up time

        if not _say(f"{command}: error: {_one_line(str(exc))}"):
            return _write_failed()  # the one line that says what failed is lost: status 7
        return exit_status(exc)
    except BrokenPipeError:  # `lmcache-compat scan | head`: stop quietly
        from lmcache_compat.report.statuses import PIPE_CLOSED  # lazy: start-up time

        _discard_output()
        return PIPE_CLOSED
    except OSError as exc:
        if not _is_output_error(exc):
            raise
        from lmcache_compat.report.statuses import WRITE_FAILED  # lazy: start-up time

        _discard_output(sys.stdout)
        reason = exc.strerror or type(exc).__name__
        _say(f"{command}: cannot write the output: {reason}")
        return WRITE_FAILED
    return code


def _say(line: str) -> bool:
    """One line on standard error; whether it was written (not when standard error is closed,
    ``2>&-``, or cannot be written, ``2>/dev/full``: then the status says it)."""
    if isinstance(sys.stderr, _ClosedStderr):
        return False
    try:
        print(line, file=sys.stderr, flush=True)
    except (OSError, ValueError):
        _discard_output(sys.stderr)
        return False
    return True


def _is_output_error(exc: OSError) -> bool:
    """A failed write to standard output or standard error (the streams the commands write
    to; a file an error names is not one of them)."""
    return exc.filename is None and exc.errno is not None


def _discard_output(*streams: TextIO) -> None:
    """Point ``streams`` (default: standard output and error) at the null device, so the
    interpreter's final flush of what is still buffered cannot fail a second time (a traceback
    at exit)."""
    for stream in streams or (sys.stdout, sys.stderr):
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, stream.fileno())
            os.close(devnull)
        except (OSError, ValueError, AttributeError):  # a test's capture: nothing to flush
            pass


def _one_line(text: str) -> str:
    """An error message on one line, control characters escaped (a message that quotes a
    hostile input cannot drive the terminal)."""
    from lmcache_compat.inputs import shown  # lazy: start-up time

    return shown(" ".join(text.split()), 2000)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
