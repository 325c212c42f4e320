"""``stringdiag lsp``: the language server, over stdin and stdout, for an editor to start."""
from __future__ import annotations

import argparse
import logging
import sys

from ..errors import DiagError

HELP = "run the language server (diagnostics, hover, go to definition, completion) over stdio, for an editor"
EXAMPLES = """\
stringdiag lsp"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--stdio", action="store_true", help="speak over stdin and stdout (the only transport; "
                   "accepted because editors pass it)")


def run(args: argparse.Namespace) -> int:
    try:
        from .language_server import server
    except ImportError as e:
        raise DiagError(f"the language server needs pygls ({e.name} is not installed): "
                        "pip install 'stringdiag[lsp]'") from None
    quiet_log()
    server().start_io()
    return 0


class OneLine(logging.Formatter):
    """A log record as one line, an exception as its message: the editor shows the server's
    standard error as its log, where a traceback (pygls logs one for a message that is not JSON,
    which has no id to answer) says nothing a user can act on."""

    def format(self, record: logging.LogRecord) -> str:
        text = record.getMessage()
        if record.exc_info and record.exc_info[1] is not None:
            text = f"{text}: {record.exc_info[1]}"
        return f"stringdiag lsp: {record.levelname.lower()}: {text}"


def quiet_log() -> None:
    """pygls's warnings and errors on standard error, one line each (see :class:`OneLine`)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(OneLine())
    log = logging.getLogger("pygls")
    log.addHandler(handler)
    log.setLevel(logging.WARNING)
    log.propagate = False
