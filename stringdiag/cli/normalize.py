"""``stringdiag normalize FILE -d NAME [--rule NAME...] [--rules FILE.rules...]``: rewrite to a fixpoint,
within bounds."""
from __future__ import annotations

import argparse

from .common import load_reporting, pick
from .kinds import rules_file
from .options import positive
from .outputs import picture

HELP = "apply rules everywhere, repeatedly, until nothing changes (or a bound is reached)"
EXAMPLES = """\
stringdiag normalize stringdiag:gallery/attention.diag -d SelfAttention
stringdiag normalize stringdiag:gallery/attention.diag -d SelfAttention --rule assoc --max-rounds 5 -o normal.svg
stringdiag normalize stringdiag:gallery/bahdanau.diag -d BiRNN --rules stringdiag:rules/sequence.rules --rule reverse_twice"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE")
    p.add_argument("-d", "--diagram", metavar="NAME", required=True)
    p.add_argument("--rule", nargs="+", action="extend", metavar="NAME", dest="rule_names",
                   help="rules by name, from rules/ or the --rules files (NAME, or NAME:reversed for an equation "
                        "right to left); default: the laws that remove a loop or a reversal (simd_scan simd_unit "
                        "vanish reverse_twice)")
    p.add_argument("--rules", nargs="+", action="extend", metavar="FILE.rules", type=rules_file,
                   help="more rule files, whose rules --rule may name (before the library's); none by default")
    p.add_argument("--max-rounds", type=positive, default=20, help="rounds of applying every rule (default 20)")
    p.add_argument("--max-boxes", type=positive, default=10_000, metavar="N",
                   help="stop before a round that would make more than N boxes (default 10,000)")
    p.add_argument("-o", "--output", metavar="OUT", type=picture, help="draw the normal form (.svg, .png, .pdf, .dot)")
    p.add_argument("--trace-rules", action="store_true",
                   help="for each rule that does not fire in a round, print why: its closest partial match and the "
                        "box or condition that stopped it")


def run(args: argparse.Namespace) -> int:
    from ..analysis.combine import expanded_box_count
    from ..analysis.complexity import analyse
    from ..derive.normal import normalize

    prog = load_reporting(args.file)
    (d,) = pick(prog, args.diagram)
    from ..derive.normal import DEFAULT_RULES

    result = normalize(d, args.rule_names or DEFAULT_RULES, max_rounds=args.max_rounds, max_boxes=args.max_boxes,
                       log=lambda s: print(s, flush=True), files=args.rules or (), trace=args.trace_rules)
    before, after = analyse(d), analyse(result.diagram)
    print(f"{d.name}: {expanded_box_count(d)} -> {expanded_box_count(result.diagram)} boxes in {result.rounds} round(s), "
          f"{result.rewrites} rewrite(s); {result.stop}")
    print(f"time in the sequence length: O({before.seq_time}) -> O({after.seq_time}); "
          f"memory: O({before.seq_memory}) -> O({after.seq_memory})")
    if args.output:
        from ..render.draw import render  # Graphviz only to draw

        print(f"wrote {render(result.diagram, args.output)}")
    return 0
