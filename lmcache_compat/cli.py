"""The ``lmcache-compat`` command line."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

__all__ = ["main"]


def _doctor(args: argparse.Namespace) -> int:
    from lmcache_compat.doctor import doctor_report, format_doctor

    report = doctor_report()
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(format_doctor(report))
    return 0


def build_parser() -> argparse.ArgumentParser:
    from lmcache_compat import __version__

    parser = argparse.ArgumentParser(
        prog="lmcache-compat",
        description="One stable API over every LMCache release: diagnostics and tools.",
    )
    parser.add_argument("--version", action="version", version=f"lmcache-compat {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    doctor = sub.add_parser(
        "doctor", help="report installed Python/LMCache/vLLM and what the LMCache release offers"
    )
    doctor.add_argument("--json", action="store_true", help="print one JSON object")
    doctor.set_defaults(func=_doctor)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    code: int = args.func(args)
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
