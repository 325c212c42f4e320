"""How the space of mechanisms and the time to enumerate it grow with the bound.

For the five generators of gallery/anatomy.diag:

1. the wirings alone (found, canonical, the composite test), bound by bound;
2. the whole pipeline (classes up to the declared symmetries, confirmed by VF2; members
   built as diagrams; reduced by rules/absorb.rules and rules/merge.rules) under the
   best-supported reading (``--symmetric ConcatFF --interchangeable LinAttPrep --require
   AttApply,LinAttApply``) at --max 4 and 5, and the old reading (every port ordered,
   nothing required) at --max 5. Each run starts from an empty rewrite cache.

The cases of 2. run interleaved, round by round, beside a reference measured in the same
rounds (the wirings alone at --max 5); each figure is the median CPU time (user + system of
this process: wall time on a shared machine mostly measures the neighbours), each ratio the
median of the per-round ratios to the reference.

    python benchmarks/bench_enumerate.py [--max 6] [--repeats 3]
"""
from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import stringdiag
from stringdiag.enumerate.reading import Reading
from stringdiag.enumerate.space import generators, is_composite, wirings
from stringdiag.enumerate.stages import enumerate_space
from stringdiag.rewrite.rule import load_rules

ROOT = Path(__file__).resolve().parents[1]
NAMES = ["AttPrep", "AttApply", "LinAttPrep", "LinAttApply", "ConcatFF"]
BEST = dict(symmetric=frozenset({"ConcatFF"}), interchangeable=frozenset({"LinAttPrep"}),
            require=("AttApply", "LinAttApply"))


def cpu(fn) -> tuple[float, object]:
    t = time.process_time()
    out = fn()
    return time.process_time() - t, out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--max", type=int, default=6, help="largest bound for the wirings alone")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    prog = stringdiag.load(ROOT / "gallery" / "anatomy.diag")
    defns = [prog[n] for n in NAMES]
    gens, stream = generators(defns)
    rules = load_rules(ROOT / "rules" / "absorb.rules") + load_rules(ROOT / "rules" / "merge.rules")

    print("the wirings alone (ordered ports, only the input copied)")
    print(f"{'max':>3}  {'ordered':>7}  {'not-comp':>8}  {'cpu s':>7}")
    for n in range(1, args.max + 1):
        t, (raw, nc) = cpu(lambda: _wirings(gens, stream, n))
        print(f"{n:>3}  {raw:>7}  {nc:>8}  {t:>7.3f}")

    reference = ("wirings alone, max 5 (reference)", lambda: _wirings(gens, stream, 5)[0])
    cases = [reference,
             ("best-supported, max 4", lambda: _reduced(defns, Reading(4, **BEST), rules)),
             ("best-supported, max 5", lambda: _reduced(defns, Reading(5, **BEST), rules)),
             ("old reading (ordered), max 5", lambda: _reduced(defns, Reading(5), rules))]
    times: dict[str, list[float]] = {label: [] for label, _ in cases}
    counts: dict[str, object] = {}
    for _ in range(args.repeats):
        for label, fn in cases:
            t, counts[label] = cpu(fn)
            times[label].append(t)
    ref = times[reference[0]]
    print(f"\nthe pipeline, {args.repeats} interleaved rounds (median CPU s; ratio to the reference, median of rounds)")
    print(f"{'case':<34}  {'count':>7}  {'cpu s':>7}  {'ratio':>7}")
    for label, _ in cases:
        ratio = statistics.median(t / r for t, r in zip(times[label], ref))
        print(f"{label:<34}  {counts[label]!s:>7}  {statistics.median(times[label]):>7.3f}  {ratio:>6.0f}x")


def _wirings(gens, stream, n):
    ws = list(wirings(gens, stream, n))
    return len(ws), sum(not is_composite(w, gens, stream) for w in ws)


def _reduced(defns, reading, rules) -> int:
    return enumerate_space(defns, reading, rules).stages[-1].count


if __name__ == "__main__":
    main()
