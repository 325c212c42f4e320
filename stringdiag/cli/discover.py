"""``stringdiag discover``: rules proposed from small diagrams by their numbers, verified by the
oracle and pruned by derivability from the library (``stringdiag/search/fingerprints.py``)."""
from __future__ import annotations

import argparse
import sys

from .options import UsageError, integer
from .outputs import file_of

# candidate rules checked at most unless --max-candidates says more: about 0.1 s each measured
# (2 cores), so a few minutes; the search for a derivation stops each after 5 s at worst
MAX_CANDIDATES = 2_000
HELP = "propose rules from small diagrams over chosen primitives; keep those verified and not derivable"
EXAMPLES = """\
stringdiag discover --primitives add,mul,max --size 1
stringdiag discover --primitives add,sub,mul,neg,relu --size 2 --write found.rules"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--primitives", default="add,mul,max,neg", metavar="OP,...",
                   help="prelude primitives of scalars to build terms from (default add,mul,max,neg; known: "
                        "add, sub, mul, max, min, neg, exp, relu, tanh, sigmoid)")
    p.add_argument("--size", type=integer(0, 3), default=1, metavar="N",
                   help="boxes per side at most (default 1; 2 takes minutes, 3 is large)")
    p.add_argument("--seed", type=integer(0), default=0, help="the random points of the fingerprints")
    p.add_argument("--prune-states", type=integer(1), default=150, metavar="N",
                   help="states of the search that tries to derive each rule from the library (default 150)")
    p.add_argument("--write", metavar="OUT.rules", default=None, type=file_of("a rule file", ".rules"),
                   help="write the rules kept to this file")
    p.add_argument("--max-candidates", type=integer(1), default=MAX_CANDIDATES, metavar="N",
                   help="refuse, before checking any, more candidate rules than this (default "
                        f"{MAX_CANDIDATES:,}: a few minutes; every primitive at --size 3 proposes over 10,000)")


def run(args: argparse.Namespace) -> int:
    from ..search.engine import Bounds
    from ..search.fingerprints import SECONDS_EACH, discover, rules_file

    prims = [p.strip() for p in args.primitives.split(",") if p.strip()]
    if not prims:
        raise UsageError("--primitives: name at least one")
    bounds = Bounds(max_steps=3, time_budget=SECONDS_EACH, max_boxes=40, max_states=args.prune_states)
    kept, counts = discover(prims, args.size, args.seed, bounds, max_candidates=args.max_candidates,
                            progress=_bar)
    text = rules_file(kept, prims, args.size, counts)
    print(text.split("\n\n")[0])
    for d in kept:
        print(f"  {d.lhs} == {d.rhs}")
    if args.write:
        from ..syntax.source import write_atomic

        write_atomic(args.write, text, what="the rule file")
        print(f"wrote {args.write}")
    return 0


def _bar(pairs: list):
    """The candidates with a progress bar and its time left on stderr (on a terminal only)."""
    from tqdm import tqdm

    print(f"discover: {len(pairs):,} candidate rules to check", file=sys.stderr)
    return tqdm(pairs, desc="checking", unit="rule", file=sys.stderr, leave=False, disable=None)
