"""Helpers shared by the subcommands."""
from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Callable

from ..errors import DiagError, shown

if TYPE_CHECKING:  # the graph layer (networkx, lark) is imported when a file is read, not to parse a command line
    from ..graph.diagram import Diagram
    from ..graph.decls import Program

Report = Callable[[DiagError, str], None]


def to_stderr(e: DiagError, severity: str = "error") -> None:
    print(e.render(severity), file=sys.stderr)


def load_reporting(path: str, report: Report = to_stderr) -> Program:
    """Load a file, reporting its warnings (to stderr unless told otherwise)."""
    from ..elaborate.loader import load

    prog = load(path)
    for w in prog.warnings:
        report(w, "warning")
    return prog


def diagnostic(e: DiagError, severity: str, file: str) -> dict:
    """An error or warning as ``--json`` gives it; ``file`` when it has no position of its own."""
    pos = e.pos
    return {"file": shown(pos.file) if pos else file, "line": pos.line if pos else None,
            "col": pos.col if pos else None,
            "severity": severity, "message": e.message}


def print_json(data) -> None:
    """``--json``: one document on stdout, as every command writes it."""
    import json  # (here: a command's start reads no JSON)

    print(json.dumps(data, indent=2))


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
