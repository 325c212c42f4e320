"""``stringdiag derive FILE.deriv [-o chain.svg] [--verify]``: run and check a derivation."""
from __future__ import annotations

import argparse

HELP = "check a derivation step by step; print its table, draw its chain of pictures"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("files", nargs="+", metavar="FILE.deriv")
    p.add_argument("-o", "--output", metavar="OUT", help="the chain of pictures (.svg, .png, .pdf, .dot); "
                   "with several files, a directory")
    p.add_argument("--verify", action="store_true",
                   help="also evaluate both sides of every equality on random inputs (float64)")


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..derive.derivation import load_derivation

    for path in args.files:
        deriv = load_derivation(path, verify=args.verify)
        print(deriv.heading())
        print(deriv.table())
        if args.verify and not any(s.verified is not None for s in deriv.steps):
            print("verified numerically: no equalities to check")
        elif args.verify:
            n = sum(1 for s in deriv.steps if s.verified is not None)
            print(f"verified numerically: {n} equalit{'y' if n == 1 else 'ies'} "
                  f"(largest relative error {max((s.verified for s in deriv.steps if s.verified is not None), default=0):.1e})")
        if args.output:
            from ..render.draw import strip, write, write_text  # Graphviz only to draw

            out = Path(args.output)
            if len(args.files) > 1 or out.is_dir():
                out = out / (Path(path).stem + ".svg")
            # an SVG chain reads top to bottom; other formats are one Graphviz strip, left to right
            svg = out.suffix.lower() == ".svg"
            wrote = write_text(deriv.chain_svg(), out) if svg else write(strip(deriv.frames()), out)
            print(f"wrote {wrote}")
        print()
    return 0
