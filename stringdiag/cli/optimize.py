"""``stringdiag optimize FILE.diag:NAME --cost time|memory|params``: the cheapest form reachable by
equalities within a bound, written as a ``.deriv`` and checked (``stringdiag/search/cheapest.py``)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .derive_find import DEFAULT_MAX_BOXES, DERIVATION, well_formed
from .options import integer, number
from .outputs import checked

HELP = "find the cheapest equivalent form of a diagram (≡ rules only) and write the derivation to it"
EXAMPLES = """\
stringdiag optimize stringdiag:gallery/recurrent.diag:RetentionRecurrent --cost memory --write chunked.deriv
stringdiag optimize stringdiag:gallery/scores.diag:MultiplicativeAttention --cost time --max-states 50"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("diagram", metavar="FILE.diag:NAME")
    p.add_argument("--cost", choices=["time", "memory", "params"], default="time",
                   help="what to make smallest (time and memory as info reports them; params: learnable "
                        "parameters); compared with sequence dimensions at 4096 and fixed ones at 64")
    p.add_argument("--write", metavar="OUT.deriv", default=None, type=DERIVATION,
                   help="where the derivation goes (default NAME_optimized.deriv here)")
    p.add_argument("--without", action="append", default=[], metavar="RULE", help="a rule not to use (repeatable)")
    p.add_argument("--max-steps", type=integer(1, 50), default=6, metavar="N", help="longest chain (default 6)")
    p.add_argument("--time-budget", type=number(0.0), default=60.0, metavar="SECONDS",
                   help="CPU seconds of search (default 60)")
    p.add_argument("--max-states", type=integer(1), default=2_000, metavar="N",
                   help="diagrams taken from the frontier at most (default 2,000)")
    p.add_argument("--max-boxes", type=integer(1), default=DEFAULT_MAX_BOXES, metavar="N",
                   help=f"skip diagrams of more boxes (default {DEFAULT_MAX_BOXES})")


def run(args: argparse.Namespace) -> int:
    from ..search.engine import Bounds
    from ..search.cheapest import FIXED, SEQ, Cost, optimize

    well_formed([args.diagram])
    name = args.diagram.rpartition(":")[2]
    out = Path(checked("--write", DERIVATION, args.write or f"{name}_optimized.deriv"))  # before the search
    bounds = Bounds(args.max_steps, args.time_budget, args.max_boxes, args.max_states, False, frozenset(args.without))
    from tqdm import tqdm

    with tqdm(desc="optimizing", unit=" states", file=sys.stderr, disable=not sys.stderr.isatty(), leave=False) as bar:
        o = optimize(args.diagram, Cost(args.cost), out, bounds, lambda n, c: bar.update(1))
    if o.derivation is None:
        print(f"the checker refused the chain the search proposed ({o.refused}); wrote it to {out}")
        return 1
    before, after = o.complexities()
    print(o.derivation.heading())
    print(o.derivation.table())
    what = {"time": "time", "memory": "memory", "params": "parameters"}[args.cost]
    print(f"{what}: {o.before:.4g} -> {o.after:.4g} at sequence dimensions {SEQ}, fixed ones {FIXED} "
          f"({len(o.steps)} steps; {o.states} states in {o.seconds:.1f} CPU s)")
    print(f"info's cost before: time O({before.time}), memory O({before.memory})")
    print(f"info's cost after:  time O({after.time}), memory O({after.memory})")
    print(f"wrote {out}")
    return 0
