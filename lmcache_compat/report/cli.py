"""The ``lmcache-compat`` command line.

Each command imports its own modules when it runs (``# lazy: start-up time``), so a command
pays only for what it uses. Exit statuses are one table, :data:`STATUSES` (the README's table
is rendered from it), and :data:`EXIT_STATUS` maps each error to one. Every failure is one line
on stderr, never a traceback; output that the terminal cannot encode is escaped, never a crash.
An output error is never read as a verdict: a reader that closes the pipe early ends the
command quietly with 141 (128 + SIGPIPE, as Unix tools do), and a write that fails (a full disk)
is one line and 7.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lmcache_compat import __version__
from lmcache_compat.errors import (
    LMCacheCompatError,
    LMCacheVersionError,
    NotInMatrixError,
    SourceNotFoundError,
)
from lmcache_compat.report.config_commands import add_config_parser
from lmcache_compat.report.statuses import PIPE_CLOSED, WRITE_FAILED, exit_status

if TYPE_CHECKING:
    from lmcache_compat.report.diff import ReleaseView

__all__ = ["main"]


def _print_json(data: object) -> None:
    print(json.dumps(data, indent=2))


def _doctor(args: argparse.Namespace) -> int:
    from lmcache_compat.report.doctor import doctor_report, mp_servers_report  # lazy: start-up time
    from lmcache_compat.report.doctor_text import format_doctor  # lazy: start-up time

    report = doctor_report()
    if args.mp_server:  # a running MP server's release, from its HTTP front end
        report = report.with_servers(mp_servers_report(args.mp_server, report.lmcache))
    data = report.to_json()
    mismatch = any(s.get("matches") is False for s in report.servers)
    if args.json:
        _print_json(data)
    else:
        print(format_doctor(data))
    return 1 if report.verdict == "broken" or mismatch else 0


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

        data = scan(target, vllm_native=native).to_json()
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
    from lmcache_compat.upstream.matrix import load_matrix  # lazy: start-up time
    from lmcache_compat.upstream.sglang_grid import load_sglang_grid  # lazy: start-up time

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
        if tier.vllm != args.vllm:
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

    from lmcache_compat.report.diff import ReleaseView  # lazy: start-up time
    from lmcache_compat.upstream.matrix import load_matrix  # lazy: start-up time
    from lmcache_compat.upstream.scanner import scan  # lazy: start-up time

    if os.path.lexists(spec) or Path(spec).suffix in (".whl", ".gz", ".tgz"):
        return ReleaseView.from_scan(scan(spec))
    try:
        return ReleaseView.from_row(load_matrix().row(spec))
    except (NotInMatrixError, LMCacheVersionError) as exc:
        raise SourceNotFoundError(f"{spec}: not a file or directory, and {exc}") from None


def _diff(args: argparse.Namespace) -> int:
    from lmcache_compat.report.diff import diff_releases  # lazy: start-up time

    d = diff_releases(_resolve_side(args.old), _resolve_side(args.new))
    if args.json:
        _print_json(d.to_json())
    else:
        print(d.format())
    return 1 if args.fail_on_breaking and d.breaking else 0


def build_parser() -> argparse.ArgumentParser:

    parser = argparse.ArgumentParser(
        prog="lmcache-compat",
        description="One stable API over every LMCache release: diagnostics and tools.",
        epilog=__doc__.split("\n\n", 1)[1] if __doc__ else None,
    )
    parser.add_argument("--version", action="version", version=f"lmcache-compat {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

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
        "(its sha256 is a row's; then the answer is that row, and nothing is parsed)",
    )
    scan.set_defaults(func=_scan)

    matrix = sub.add_parser("matrix", help="the shipped capabilities of every LMCache release")
    fmt = matrix.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true")
    fmt.add_argument("--markdown", action="store_true")
    matrix.set_defaults(func=_matrix)

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
    gfmt.add_argument("--json", action="store_true")
    gfmt.add_argument("--markdown", action="store_true")
    grid.set_defaults(func=_grid)

    diff = sub.add_parser(
        "diff",
        help="what changed between two releases: moves, methods, parameters, types, capabilities",
    )
    diff.add_argument("old", help="a version in the matrix, or a wheel/sdist/directory")
    diff.add_argument("new", help="a version in the matrix, or a wheel/sdist/directory")
    diff.add_argument("--json", action="store_true")
    diff.add_argument(
        "--fail-on-breaking",
        action="store_true",
        help="exit 1 when a change breaks existing callers",
    )
    diff.set_defaults(func=_diff)

    from lmcache_compat.report import releases  # lazy: start-up time (the command's module)

    releases.add_parser(sub)
    add_config_parser(sub)
    return parser


def _escape_output() -> None:
    """Never crash on output the terminal cannot encode (``PYTHONIOENCODING=ascii``)."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")


def main(argv: Sequence[str] | None = None) -> int:
    _escape_output()
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    if getattr(args, "target", None) and getattr(args, "vllm_native_path", None):
        parser.error("give the vLLM path after --vllm-native, or as TARGET, not both")
    if args.command == "grid" and args.vllm and (args.sglang or args.engine == "sglang"):
        parser.error("--vllm and --sglang (or --engine sglang) cannot be combined")
    try:
        code: int = args.func(args)
        sys.stdout.flush()  # an output error surfaces here, not at interpreter exit
    except LMCacheCompatError as exc:
        print(f"lmcache-compat {args.command}: error: {_one_line(str(exc))}", file=sys.stderr)
        return exit_status(exc)
    except BrokenPipeError:  # `lmcache-compat scan | head`: stop quietly
        _discard_stdout()
        return PIPE_CLOSED
    except OSError as exc:
        if not _is_output_error(exc):
            raise
        _discard_stdout()
        reason = exc.strerror or type(exc).__name__
        print(f"lmcache-compat {args.command}: cannot write the output: {reason}", file=sys.stderr)
        return WRITE_FAILED
    return code


def _is_output_error(exc: OSError) -> bool:
    """A failed write to standard output (the only stream the commands write to)."""
    return exc.filename is None and exc.errno is not None


def _discard_stdout() -> None:
    """Point standard output at the null device, so the interpreter's final flush of what is
    still buffered cannot fail a second time (a traceback at exit)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # no file descriptor (a test's capture): nothing to flush
        pass


def _one_line(text: str) -> str:
    return " ".join(text.split())


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
