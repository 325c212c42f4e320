"""Run ``stringdiag discover`` once at a useful size over prelude primitives and write its report:
the rules kept (``benchmarks/discovered.rules``), the counts of each stage and the CPU time
(``benchmarks/discover_report.md``), quoted in docs/derivations.md's section on rules discovered.

    python benchmarks/discover_report.py                       # size 2 over all ten primitives
    python benchmarks/discover_report.py --docs                # ... and into docs/derivations.md
    python benchmarks/discover_report.py --primitives add,mul --size 1
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from stringdiag.search.engine import Bounds
from stringdiag.search.fingerprints import discover, rules_file

ROOT = Path(__file__).resolve().parent.parent
BEGIN, END = "<!-- discover-report: begin -->", "<!-- discover-report: end -->"
QUOTE = "<!-- quoted from: benchmarks/discover_report.md -->"  # before the table: test_docs checks it


def report(prims: list[str], size: int, bounds: Bounds, counts: dict[str, int], kept: list, seconds: float) -> str:
    """The report (Markdown): how it was run, the counts, and each rule kept."""
    head = (f"`stringdiag discover --primitives {','.join(prims)} --size {size} --prune-states {bounds.max_states}` "
            f"(run by `benchmarks/discover_report.py`, {seconds:.0f} CPU s on a 2-core machine shared with other "
            f"work): {counts['terms']} terms, {counts['proposed']} equalities proposed by fingerprint, "
            f"{counts['verified']} verified by the oracle, {counts['derivable']} derived by `derive --find` from the "
            f"library and the rules kept before them (at most {bounds.max_steps} steps, {bounds.max_states} states, "
            f"{bounds.time_budget:g} CPU s each) and pruned, {counts['kept']} kept "
            "(`benchmarks/discovered.rules`), smallest first:")
    rows = ["| rule kept (what `rules/` lacks at this bound) | oracle's largest relative error |", "|---|---|"]
    rows += [f"| `{d.lhs} == {d.rhs}` | {d.error:.1e} |" for d in kept]
    return head + "\n\n" + QUOTE + "\n" + "\n".join(rows) + "\n"


def into_docs(text: str) -> None:
    from search_gallery import splice  # this folder's scripts: run as `python benchmarks/...`

    splice(BEGIN, END, text)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--primitives", default="add,sub,mul,max,min,neg,exp,relu,tanh,sigmoid")
    ap.add_argument("--size", type=int, default=2)
    ap.add_argument("--prune-states", type=int, default=40)
    ap.add_argument("--docs", action="store_true", help="write the report into docs/derivations.md")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(1)
    prims = [p.strip() for p in args.primitives.split(",") if p.strip()]
    bounds = Bounds(max_steps=3, time_budget=5.0, max_boxes=40, max_states=args.prune_states)
    t0 = time.process_time()
    kept, counts = discover(prims, args.size, 0, bounds, log=lambda s: print("kept:", s, file=sys.stderr, flush=True))
    seconds = time.process_time() - t0
    text = report(prims, args.size, bounds, counts, kept, seconds)
    print(text)
    if args.docs:
        (ROOT / "benchmarks" / "discovered.rules").write_text(rules_file(kept, prims, args.size, counts))
        (ROOT / "benchmarks" / "discover_report.md").write_text(text.replace(QUOTE + "\n", ""))
        into_docs(text)


if __name__ == "__main__":
    main()
