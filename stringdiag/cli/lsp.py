"""``stringdiag lsp``: the language server, over stdin and stdout, for an editor to start."""
from __future__ import annotations

import argparse

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
    server().start_io()
    return 0
