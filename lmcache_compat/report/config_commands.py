"""``lmcache-compat config check | migrate | mp-flags``: the command line of
:mod:`lmcache_compat.config`.

Each command imports what it needs when it runs (``# lazy: start-up time``). Reading YAML needs
PyYAML (``pip install 'lmcache-compat[config]'``); without it the command says so in one line and
exits 8. ``check`` exits 1 when anything would be ignored
(a value dropped, or a load that fails), ``migrate`` when a key is left that the target will
not read, ``mp-flags`` when a flag cannot be said to the target.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up time)
if TYPE_CHECKING:
    from typing import Any

    from lmcache_compat.config.check import Finding

__all__ = ["add_config_parser", "format_findings"]


def _print_json(data: object) -> None:
    print(json.dumps(data, indent=2))


def format_findings(findings: list[Finding], file: str | None) -> list[str]:
    """One block per finding: where, what, and the fix."""
    lines = []
    for f in findings:
        if f.source == "env":
            where = f"env {f.key}"
        else:
            where = f"{file or 'file'}:{f.line}: {f.key}" if f.line else f.key
        lines.append(f"  {where}: {f.kind.upper()} ({f.effect}): {f.detail}")
        lines.append(f"      fix: {f.fix}")
    return lines


def _summary(findings: list[Finding]) -> str:
    lost = sum(1 for f in findings if f.ignored)
    other = len(findings) - lost
    if not findings:
        return "nothing would be ignored, renamed or read differently"
    return f"{lost} ignored or failing, {other} renamed or read differently"


def _check(args: argparse.Namespace) -> int:
    from lmcache_compat.config.check import (  # lazy: start-up time
        check_active,
        check_environment,
        check_file,
    )
    from lmcache_compat.config.schema import schema_for  # lazy: start-up time

    target = schema_for(args.lmcache)
    file: str | None = args.file
    if file is not None:
        findings = check_file(file, target)
        if not args.no_env:
            findings += check_environment(os.environ, target, config_file=True)
    elif args.no_env:
        findings = []
    else:
        file, findings = check_active(os.environ, target)
    if args.json:
        _print_json(
            {
                "lmcache": target.version,
                "schema": target.source,
                "file": file,
                "environment": not args.no_env,
                "findings": [f.to_json() for f in findings],
                "ignored": sum(1 for f in findings if f.ignored),
            }
        )
    else:
        what = [x for x in (file, None if args.no_env else "the LMCACHE_* environment") if x]
        print(f"LMCache {target.version} reading {' and '.join(what) or 'nothing'}:")
        print("\n".join(format_findings(findings, file)) or "  (no findings)")
        print(_summary(findings))
    return 1 if any(f.ignored for f in findings) else 0


def _migrate(args: argparse.Namespace) -> int:
    from lmcache_compat.config.migrate import migrate_file  # lazy: start-up time

    result = migrate_file(
        args.file, args.to, source=args.source, out=args.output, in_place=args.in_place
    )
    plan = result.plan
    if args.json:
        data: dict[str, Any] = dict(plan.to_json())
        data["written"] = result.written
        if result.written is None:
            data["text"] = result.text
        _print_json(data)
    else:
        if result.written is None:
            sys.stdout.write(result.text)
        report = sys.stderr if result.written is None else sys.stdout
        _report(plan, result.written, report, quiet=args.verbosity < 0)
    return 1 if plan.left else 0


def _report(plan: Any, written: str | None, out: Any, *, quiet: bool = False) -> None:
    """What migrate did; ``quiet`` (``-q``): only the keys it left in place (the verdict)."""
    if quiet:
        for x in plan.left:
            print(f"  line {x.line}: {x.key} LEFT IN PLACE: {x.reason}", file=out)
        return
    print(f"migrate from LMCache {plan.source} to {plan.target}", file=out)
    if plan.inferred:
        print(f"  from: {plan.inferred}", file=out)
    for r in plan.rewrites:
        print(f"  line {r.line}: {r.old} -> {r.new}", file=out)
        for source in r.sources:
            print(f"      source: {source}", file=out)
    for x in plan.left:
        print(f"  line {x.line}: {x.key} LEFT IN PLACE: {x.reason}", file=out)
    for note in plan.notes:
        print(f"  note: {note}", file=out)
    for f in plan.findings:
        print(f"  line {f.line}: {f.key}: {f.detail}", file=out)
    if written:
        print(f"wrote {written}", file=out)


def _mp_flags(args: argparse.Namespace) -> int:
    from lmcache_compat.config.mpflags import translate_mp_flags  # lazy: start-up time

    argv = list(args.argv)
    if argv and argv[0] == "--":
        argv = argv[1:]
    result = translate_mp_flags(
        argv,
        args.source,
        args.to,
        args.mp_command,
        keep_defaults=not args.no_keep_defaults,
        allow_loss=args.allow_loss,
    )
    if args.json:
        _print_json(result.to_json())
    else:
        import shlex  # lazy: start-up time

        print(shlex.join(result.argv))
        changes = () if args.verbosity < 0 else result.changes  # -q: only what is lost
        for change in (*changes, *(f"LOST: {x}" for x in result.lost)):
            print(f"  {change}", file=sys.stderr)
    return 1 if result.lost else 0


def add_config_parser(sub: Any) -> None:
    """The ``config`` command and its subcommands, on the top-level subparsers ``sub``."""
    config = sub.add_parser(
        "config",
        help="LMCache configuration across releases: check a file and the environment, "
        "migrate a file, translate MP server flags",
    )
    commands = config.add_subparsers(dest="config_command", metavar="SUBCOMMAND")
    config.set_defaults(func=lambda args: _no_subcommand(config))
    _add_check(commands)
    _add_migrate(commands)
    _add_mp_flags(commands)


def _add_check(commands: Any) -> None:
    check = commands.add_parser(
        "check",
        help="what an LMCache release would ignore, rename or read differently in FILE "
        "(default: the file LMCACHE_CONFIG_FILE names) and the LMCACHE_* environment",
    )
    check.add_argument("file", nargs="?", metavar="FILE", help="a YAML configuration file")
    check.add_argument(
        "--lmcache",
        metavar="VERSION",
        help="the release to check against (default: the installed LMCache; any release of "
        "the shipped data)",
    )
    check.add_argument("--no-env", action="store_true", help="leave the environment out")
    check.add_argument("--json", action="store_true", help="print one JSON object")
    check.set_defaults(func=_check)


def _add_migrate(commands: Any) -> None:
    migrate = commands.add_parser(
        "migrate",
        help="rewrite FILE for another release: renames and safe moves, comments and order kept",
    )
    migrate.add_argument("file", metavar="FILE", help="the YAML configuration file to rewrite")
    migrate.add_argument("--to", required=True, metavar="VERSION", help="the target release")
    migrate.add_argument(
        "--from",
        dest="source",
        metavar="VERSION",
        help="the release FILE was written for (default: inferred when only one release, or "
        "releases that all migrate it the same way, read every key)",
    )
    out = migrate.add_mutually_exclusive_group()
    out.add_argument("-o", "--output", metavar="OUT", help="write here (atomically)")
    out.add_argument("--in-place", action="store_true", help="overwrite FILE (atomically)")
    migrate.add_argument("--json", action="store_true", help="print the plan as JSON")
    migrate.set_defaults(func=_migrate)


def _add_mp_flags(commands: Any) -> None:
    flags = commands.add_parser(
        "mp-flags",
        help="translate an MP server command line from one release to another",
    )
    flags.add_argument(
        "--from",
        dest="source",
        required=True,
        metavar="VERSION",
        help="the release the flags were written for",
    )
    flags.add_argument("--to", required=True, metavar="VERSION", help="the target release")
    flags.add_argument(
        "--command",
        dest="mp_command",
        default="server",
        help="which command line: server, http_server, cli_server, cli_coordinator, "
        "memory_orchestrator (default: server)",
    )
    flags.add_argument(
        "--no-keep-defaults",
        action="store_true",
        help="do not write out flags whose default changed (by default they keep the source "
        "release's behaviour)",
    )
    flags.add_argument(
        "--allow-loss",
        action="store_true",
        help="drop what the target cannot do (listed as LOST) instead of failing",
    )
    flags.add_argument("--json", action="store_true", help="print one JSON object")
    flags.add_argument(
        "argv",
        nargs=argparse.REMAINDER,
        metavar="-- FLAGS",
        help="the MP server's flags, after --",
    )
    flags.set_defaults(func=_mp_flags)


def _no_subcommand(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2
