"""``stringdiag render FILE [-d NAME] [-o OUT] [--expand]``: draw diagrams."""
from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import DiagError
from ..render.formats import DOCUMENTS, FORMATS
from ..resources import PREFIX
from .common import load_reporting, pick
from .outputs import add_tikz_body, names_directory, picture_or_directory

HELP = "draw diagrams as SVG, PNG, PDF, DOT, an interactive HTML page or TikZ (by the output's extension)"
EXAMPLES = """\
stringdiag render stringdiag:gallery/attention.diag -d SelfAttention -o attention.svg
stringdiag render stringdiag:gallery/attention.diag -o pictures/ --format png
stringdiag render stringdiag:gallery/transformer.diag -d TransformerEncoder -o encoder.html
stringdiag render stringdiag:gallery/attention.diag -d SelfAttention -o attention.tex --tikz-body
stringdiag render stringdiag:gallery/transformer.diag -d TransformerEncoder --expand -o encoder.pdf"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE")
    p.add_argument("-d", "--diagram", metavar="NAME", help="the diagram to draw (default: all of them)")
    p.add_argument("-o", "--output", metavar="OUT", type=picture_or_directory,
                   help="output file (.svg, .png, .pdf, .dot, .html, .tex), or a directory for "
                        "FILE_STEM.NAME.svg: one that "
                        "exists, ends with '/' or has no extension (default: beside FILE)")
    p.add_argument("--expand", action="store_true", help="open every definition used as a box (a repeat of known count into its copies)")
    p.add_argument("--format", choices=sorted({*FORMATS.values(), *DOCUMENTS.values()}), default="svg",
                   help="format when writing into a directory (default: svg)")
    add_tikz_body(p)


def run(args: argparse.Namespace) -> int:
    from ..render.output import save_diagram  # Graphviz only once the file checks

    prog = load_reporting(args.file)
    diagrams = pick(prog, args.diagram)
    # beside FILE, unless FILE is shipped (stringdiag:...): then here, never inside the installed package
    out = Path(args.output) if args.output else Path(".") if args.file.startswith(PREFIX) else Path(args.file).parent
    into_dir = args.output is None or names_directory(args.output)
    if not into_dir and len(diagrams) > 1:
        raise DiagError(f"{args.file} defines {len(diagrams)} diagrams; give -d NAME to draw one into "
                        f"{out}, or -o DIRECTORY for all")
    stem = Path(args.file).stem
    for d in diagrams:
        target = out / f"{stem}.{d.name}{'.expanded' if args.expand else ''}.{args.format}" if into_dir else out
        for path in save_diagram(d, target, expand=args.expand, tikz_body=args.tikz_body):
            print(f"wrote {path}")
    return 0
