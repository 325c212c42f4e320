"""``stringdiag derive --find FILE.diag:A FILE.diag:B``: search for a derivation from A to B,
write it as a ``.deriv``, and check it as ``derive --verify`` does (``stringdiag/search/``)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..errors import DiagError
from .options import UsageError, integer, number
from .outputs import checked, file_of

DERIVATION = file_of("a derivation", ".deriv")

def well_formed(refs: list[str]) -> None:
    """Each ``FILE.diag:NAME`` argument of a search is of that form, before any file is read: one
    that is not is a command line that cannot be right (status 2)."""
    from ..search.session import malformed

    for ref in refs:
        if (why := malformed(ref)) is not None:
            raise UsageError(why)


DEFAULT_MAX_BOXES = 400  # a search visits many diagrams: smaller than derive's 10,000


def add_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("searching (--find)")
    g.add_argument("--find", nargs=2, metavar=("FILE.diag:A", "FILE.diag:B"),
                   help="search for a derivation from A to B and write it (--write); its answer is always "
                        "a checked derivation")
    g.add_argument("--write", metavar="OUT.deriv", default=None, type=DERIVATION,
                   help="where the found derivation goes (default A_to_B.deriv here)")
    g.add_argument("--reductions", action="store_true",
                   help="also take reductions (⇒): rules one way and specialisations the target suggests")
    g.add_argument("--without", action="append", default=[], metavar="RULE",
                   help="a rule not to use (repeatable): a proof of that rule must not assume it")
    g.add_argument("--max-steps", type=integer(1, 50), default=6, metavar="N", help="longest chain (default 6)")
    g.add_argument("--time-budget", type=number(0.0), default=60.0, metavar="SECONDS",
                   help="CPU seconds of search (default 60)")
    g.add_argument("--max-states", type=integer(1), default=5_000, metavar="N",
                   help="diagrams taken from the frontier at most (default 5,000)")


def run(args: argparse.Namespace) -> int:
    """Search, write, read back; 0 when a checked derivation was found, else an error (status 1)
    after the closest form reached."""
    from ..search.engine import Bounds
    from ..search.find import closest_difference, find, has_abstract_box

    if args.files:
        raise UsageError("derive --find takes the two diagrams, not .deriv files")
    if args.output:
        raise UsageError("derive --find writes a .deriv (--write); draw it afterwards with derive -o")
    a, b = args.find
    out = Path(checked("--write", DERIVATION, args.write or f"{_stem(a)}_to_{_stem(b)}.deriv"))  # before the search
    bounds = Bounds(args.max_steps, args.time_budget, args.max_boxes or DEFAULT_MAX_BOXES, args.max_states,
                    args.reductions, frozenset(args.without))
    with _bar() as bar:
        found = find(a, b, out, bounds, verify=True, progress=lambda n, d: bar.update(1) or bar.set_postfix(closest=d))
    o = found.outcome
    if found.found:
        d = found.derivation
        print(d.heading())
        print(d.table())
        n = sum(s.verified is not None for s in d.steps)
        print(f"found in {o.seconds:.1f} CPU s ({_plural(o.states, 'state')}); verified numerically: "
              f"{n} equalit{'y' if n == 1 else 'ies'}")
        print(f"wrote {out}")
        return 0
    if found.refused:
        raise DiagError(f"the search proposed a chain that the checker refused ({found.refused}); wrote it to {out}")
    print(f"the closest form reached is {o.closest.distance} boxes apart from the target, after "
          f"{_plural(len(o.closest.steps), 'step')}: {'; '.join(o.closest.steps) or '(the start)'}")
    print(closest_difference(found, a, b, out))
    print(f"wrote those steps to {out}")
    hint = "" if args.reductions or not has_abstract_box(a) else (
        "; the start has an abstract box, and specialising it is a ⇒ step, tried only with --reductions")
    raise DiagError(f"no derivation found within the bound: {o.why} ({_plural(o.states, 'state')}, "
                    f"{o.seconds:.1f} CPU s){hint}")


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def _stem(ref: str) -> str:
    return ref.rpartition(":")[2] or "diagram"


def _bar():
    from tqdm import tqdm

    return tqdm(desc="searching", unit=" states", file=sys.stderr, disable=not sys.stderr.isatty(), leave=False)
