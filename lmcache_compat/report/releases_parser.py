"""The ``lmcache-compat releases`` command line: its parser and choices, apart from the command's
module (:mod:`lmcache_compat.report.releases`), which is imported when the command runs, so
every other command's start-up pays nothing for it."""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (start-up time)
if TYPE_CHECKING:
    import argparse
    from typing import Any

    from lmcache_compat.report.releases import RoleName

__all__ = ["FORMATS", "ROLES", "add_parser"]

ROLES: tuple[RoleName, ...] = ("connector", "mp", "engine")
FORMATS = ("lines", "json", "tox", "github")


def _run(args: argparse.Namespace) -> int:
    from lmcache_compat.report.releases import run  # lazy: the command's module

    return run(args)


def add_parser(sub: Any) -> None:
    """The ``releases`` subcommand of ``lmcache-compat``."""
    p = sub.add_parser(
        "releases", help="the shipped LMCache releases to test against (a tox or CI matrix)"
    )
    p.add_argument(
        "spec",
        nargs="?",
        default="all",
        metavar="SPEC",
        help="all (default), a version, a PEP 440 specifier set, distinct or distinct:ROLE",
    )
    p.add_argument(
        "--distinct",
        action="store_true",
        help="only the releases where the role's surface changes, each with what changed",
    )
    p.add_argument(
        "--role",
        choices=ROLES,
        default=None,
        help="with --distinct: whose surface (default: connector)",
    )
    p.add_argument(
        "--format",
        choices=FORMATS,
        default="lines",
        help="lines (default), json, tox (factors for an env_list) or github (an Actions matrix)",
    )
    p.set_defaults(func=_run)
