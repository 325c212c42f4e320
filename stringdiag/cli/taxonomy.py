"""``stringdiag taxonomy FILE.tax [-o tree.svg] [--verify]``: check a family tree of architectures."""
from __future__ import annotations

import argparse

HELP = "check a family tree of architectures, every edge a derivation; draw it in one picture"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE.tax")
    p.add_argument("-o", "--output", metavar="OUT", help="the tree in one picture (.svg, .png, .pdf, .dot)")
    p.add_argument("--verify", action="store_true",
                   help="also evaluate both sides of every equality of every edge on random inputs (float64)")


def run(args: argparse.Namespace) -> int:
    from ..derive.taxonomy import load_taxonomy
    from ..render.draw import write, write_text
    from ..render.tree import tree, tree_svg

    tax = load_taxonomy(args.file, verify=args.verify)
    print(f"{args.file}: a tree of {len(tax.members)} members rooted at {tax.root}, "
          f"{len(tax.edges)} edges, each checked{' and verified' if args.verify else ''}")
    print(tax.summary())
    if args.output:
        nodes, edges = tax.tree_parts()
        svg = str(args.output).lower().endswith(".svg")  # SVG: wires through frames become stubs
        print(f"wrote {write_text(tree_svg(nodes, edges), args.output) if svg else write(tree(nodes, edges), args.output)}")
    return 0
