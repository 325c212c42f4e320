"""Helpers shared by the subcommands."""
from __future__ import annotations

import sys

from ..errors import DiagError
from ..graph.diagram import Diagram
from ..graph.program import Program, load


def load_reporting(path: str) -> Program:
    """Load a file, printing its warnings to stderr."""
    prog = load(path)
    for w in prog.warnings:
        print(w.render("warning"), file=sys.stderr)
    return prog


def pick(prog: Program, name: str | None) -> list[Diagram]:
    """The named diagram, or every diagram the file defines."""
    if name is None:
        if not prog.own:
            raise DiagError(f"{prog.path} defines no diagrams")
        return list(prog.diagrams.values())
    try:
        return [prog[name]]
    except KeyError as e:
        raise DiagError(e.args[0]) from None
