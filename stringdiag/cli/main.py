"""The ``stringdiag`` command: check, render and describe ``.diag`` files.

Bad input is reported as ``FILE:LINE:COL: error: MESSAGE`` with the line and a caret,
and the exit status is 1; no traceback is ever shown for the tool's own errors.
"""
from __future__ import annotations

import argparse
import os
import sys

from importlib import import_module
from types import ModuleType

from ..errors import DiagError
from ..version import __version__
from .options import short

# each command is the module stringdiag.cli.NAME (HELP, add_arguments, run), imported only when
# it runs or when the whole list is shown: drawing or compiling costs nothing to `derive`
COMMANDS = ("check", "render", "info", "derive", "normalize", "compile", "train", "enumerate", "study",
            "construct", "taxonomy")


def command(name: str) -> ModuleType:
    return import_module(f"{__package__}.{name}")


class UsageError(Exception):
    """A command line argparse cannot make sense of (reported in one line, exit status 1)."""


class Parser(argparse.ArgumentParser):
    """argparse, but a bad command line is one ``error:`` line and exit status 1, as for bad input."""

    def error(self, message: str):  # type: ignore[override]
        raise UsageError(f"{message} (see '{self.prog} --help')")


def show_defaults(p: argparse.ArgumentParser) -> None:
    """Every option's ``--help`` line ends with its default, unless it has none (None, off,
    empty) or its help already names it."""
    for action in p._actions:
        default, text = action.default, action.help or ""
        empty = default is None or default is False or default == argparse.SUPPRESS or default in ("", [], ())
        if not action.option_strings or empty or "default" in text:
            continue
        shown = ",".join(map(str, default)) if isinstance(default, (list, tuple)) else default
        action.help = f"{text} (default: {shown})".strip()


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The whole parser, or, when ``argv`` names a command, one with only that command's
    options filled in (the others are names, so a misspelt one is still suggested)."""
    wanted = next((a for a in argv if not a.startswith("-")), None) if argv is not None else None
    wanted = wanted if wanted in COMMANDS else None
    p = Parser(prog="stringdiag", description=__doc__.splitlines()[0])
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        if wanted not in (None, name):
            sub.add_parser(name)
            continue
        mod = command(name)
        parser = sub.add_parser(name, help=mod.HELP, description=mod.HELP)
        mod.add_arguments(parser)
        show_defaults(parser)
    return p


def main(argv: list[str] | None = None) -> int:
    try:
        argv = sys.argv[1:] if argv is None else argv
        args = build_parser(argv).parse_args(argv)
    except UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    try:
        return command(args.command).run(args) or 0
    except DiagError as e:
        print(e.render(), file=sys.stderr)
        return 1
    except OSError as e:  # the machine said no (a path we cannot write, a full disk)
        where = f": {short(e.filename)}" if e.filename else ""
        print(f"error: {e.strerror or e}{where}", file=sys.stderr)
        return 1
    except MemoryError:
        print("error: out of memory (choose smaller sizes)", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # a bug in stringdiag, not in the user's file
        if os.environ.get("STRINGDIAG_DEBUG"):
            raise
        print(f"stringdiag: internal error: {type(e).__name__}: {e}\n"
              "(this is a bug in stringdiag; rerun with STRINGDIAG_DEBUG=1 for details)", file=sys.stderr)
        return 3


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
