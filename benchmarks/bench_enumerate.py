"""How the space of mechanisms and the time to enumerate it grow with the bound.

For the five generators of gallery/anatomy.diag: the wirings alone (found, canonical, the
composite test), and the whole pipeline (members built as diagrams, confirmed distinct by
the engine's hash, reduced by rules/absorb.rules and rules/merge.rules). Median of repeats;
run with the machine otherwise idle (torch is not involved).

    python benchmarks/bench_enumerate.py [--max 7] [--repeats 3]
"""
from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import stringdiag
from stringdiag.enumerate.space import generators, is_composite, wirings
from stringdiag.enumerate.stages import enumerate_space
from stringdiag.rewrite.rule import load_rules

ROOT = Path(__file__).resolve().parents[1]
NAMES = ["AttPrep", "AttApply", "LinAttPrep", "LinAttApply", "ConcatFF"]


def timed(fn, repeats: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--max", type=int, default=7)
    ap.add_argument("--full-max", type=int, default=5, help="largest bound for the whole pipeline")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    prog = stringdiag.load(ROOT / "gallery" / "anatomy.diag")
    defns = [prog[n] for n in NAMES]
    gens, stream = generators(defns)
    rules = load_rules(ROOT / "rules" / "absorb.rules") + load_rules(ROOT / "rules" / "merge.rules")
    print(f"{'max':>3}  {'raw':>7}  {'not-comp':>8}  {'wirings s':>9}  {'reduced':>7}  {'pipeline s':>10}")
    last = None
    for n in range(1, args.max + 1):
        t_w, (raw, nc) = timed(lambda: _wirings(gens, stream, n), args.repeats)
        red, t_p = "", ""
        if n <= args.full_max:
            tp, space = timed(lambda: enumerate_space(defns, n, rules), 1 if n == args.full_max else args.repeats)
            red, t_p = str(space.stages[-1].count), f"{tp:.3f}"
        grow = f"  x{raw / last:.1f} members" if last else ""
        print(f"{n:>3}  {raw:>7}  {nc:>8}  {t_w:>9.3f}  {red:>7}  {t_p:>10}{grow}")
        last = raw


def _wirings(gens, stream, n):
    ws = list(wirings(gens, stream, n))
    return len(ws), sum(not is_composite(w, gens, stream) for w in ws)


if __name__ == "__main__":
    main()
