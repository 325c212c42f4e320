"""``stringdiag derive FILE.deriv [-o chain.svg] [--verify] [--json]``: run and check a derivation."""
from __future__ import annotations

import argparse

from .options import positive
from .outputs import add_tikz_body, need_directory, picture_or_directory

HELP = "check a derivation step by step; print its table, draw its chain of pictures"
EXAMPLES = """\
stringdiag derive stringdiag:gallery/linearize.deriv
stringdiag derive stringdiag:gallery/linearize.deriv --verify -o linearize.svg
stringdiag derive stringdiag:gallery/linearize.deriv -o linearize.html
stringdiag derive stringdiag:gallery/linearize.deriv -o linearize.tex
stringdiag derive stringdiag:gallery/tax_bigbird.deriv stringdiag:gallery/tax_etc.deriv -o chains/
stringdiag derive stringdiag:gallery/linearize.deriv --json
stringdiag derive --find stringdiag:gallery/scores.diag:MultiplicativeAttention stringdiag:gallery/scores.diag:MappedQueryDotAttention --write luong.deriv"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("files", nargs="*", metavar="FILE.deriv")
    p.add_argument("-o", "--output", metavar="OUT", type=picture_or_directory,
                   help="the chain of pictures (.svg, .png, .pdf, .dot; .html: the steps on a slider beside "
                        "the table; .tex: TikZ), or a directory for FILE_STEM.svg; with several files, a directory")
    add_tikz_body(p)
    p.add_argument("--verify", action="store_true",
                   help="also evaluate both sides of every equality on random inputs (float64)")
    p.add_argument("--max-boxes", type=positive, default=None, metavar="N",
                   help="refuse a step that would make a diagram of more than N boxes, before it is done "
                        "(default 10,000)")
    p.add_argument("--explain", action="store_true",
                   help="when a rule does not match, list every candidate box of its closest partial match and "
                        "why each was refused (by default, the first three)")
    p.add_argument("--json", action="store_true",
                   help="print each derivation's step table as JSON (a list of {file, steps, target, rows})")
    from .derive_find import add_arguments as find_arguments

    find_arguments(p)


def run(args: argparse.Namespace) -> int:
    if args.find:
        from .derive_find import run as find, well_formed

        well_formed(args.find)
        return find(args)
    if not args.files:
        from .options import UsageError

        raise UsageError("derive takes FILE.deriv ... (or --find FILE.diag:A FILE.diag:B)")
    if args.output and len(args.files) > 1:
        need_directory(args.output, f"derive draws {len(args.files)} chains")
    found = []
    for path in args.files:
        deriv = _load(args, path)
        if args.json:
            found.append({"file": path, "steps": len(deriv.steps) - 1, "start": deriv.steps[0].diagram.name,
                          "target": deriv.target.name if deriv.target is not None else None, "rows": deriv.rows()})
        else:
            describe(path, deriv, args.verify)
        if args.output:
            for wrote in draw(deriv, path, args.output, args.tikz_body):
                if not args.json:
                    print(f"wrote {wrote}")
        if not args.json:
            print()
    if args.json:
        from .common import print_json  # (here: --json only)

        print_json(found)
    return 0


def _load(args: argparse.Namespace, path: str):
    """The derivation; one that misses its target is still drawn (with ``-o``), the target last and
    where the two part highlighted, before its error is reported."""
    from ..derive.derivation import MAX_DERIVED, load_derivation
    from ..derive.missed import TargetMissed

    try:
        return load_derivation(path, verify=args.verify, max_boxes=args.max_boxes or MAX_DERIVED,
                               explain=args.explain)
    except TargetMissed as e:
        if args.output:
            frames, rows, changes = e.chain()
            for wrote in _save(e.derivation.heading(), frames, rows, changes, path, args.output, args.tikz_body):
                print(f"wrote {wrote} (the chain, the target last, where they part highlighted)")
        raise


def describe(path: str, deriv, verify: bool) -> None:
    """The derivation's head line, its table and what was verified."""
    print(deriv.heading())
    print(deriv.table())
    checked = [s.verified for s in deriv.steps if s.verified is not None]
    if verify and not checked:
        print("verified numerically: no equalities to check")
    elif verify:
        print(f"verified numerically: {len(checked)} equalit{'y' if len(checked) == 1 else 'ies'} "
              f"(largest relative error {max(checked):.1e})")


def draw(deriv, path: str, output: str, tikz_body: bool = False) -> list:
    """The chain into ``output`` (a picture, or FILE_STEM.svg in a directory)."""
    return _save(*deriv.drawn(), path, output, tikz_body)


def _save(heading: str, frames: list, rows: list, changes: list, path: str, output: str, tikz_body: bool) -> list:
    from pathlib import Path

    from ..render.output import save_chain  # Graphviz only to draw
    from .outputs import names_directory

    out = Path(output) / (Path(path).stem + ".svg") if names_directory(output) else Path(output)
    return save_chain(heading, frames, rows, out, tikz_body, changes)
