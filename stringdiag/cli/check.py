"""``stringdiag check FILE...``: parse and type-check."""
from __future__ import annotations

import argparse
import sys

from ..errors import DiagError
from .common import load_reporting

HELP = "type-check .diag files (errors as FILE:LINE:COL)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument("-q", "--quiet", action="store_true", help="print nothing for files that check")


def run(args: argparse.Namespace) -> int:
    status = 0
    for path in args.files:
        try:
            prog = load_reporting(path)
        except DiagError as e:
            print(e.render(), file=sys.stderr)
            status = 1
            continue
        if not args.quiet:
            n = len(prog.own)
            print(f"{path}: ok ({n} diagram{'s' if n != 1 else ''}: {', '.join(prog.own)})")
    return status
