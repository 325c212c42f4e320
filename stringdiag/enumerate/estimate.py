"""How big the space is and how long it would take, said before the work starts.

The ordered wirings are counted exactly up to bound 4, and further while the next bound is
predicted to hold at most ``LISTED`` wirings (it grows about five-fold a step): a rule on the
counts, not on the CPU time spent, so that the estimate of one space is the same on an idle
machine and a busy one; above that the count is extrapolated with
the last growth ratio, so it is an estimate, not a bound. The time is the count times the
CPU time of one wiring, measured on a sample of the largest wirings counted (its symmetry
orbit, and each rule tried at each match when there are rules, else its member built, plus
listing it), scaled by size. It is CPU time, so the load of the moment does not swing it;
on a busy machine the wall clock runs longer.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from .build import build
from .reading import Reading
from .space import generators, wirings
from .stages import neighbours
from .symmetry import orbit

LISTED = 4000  # ordered wirings listed at most at one bound before extrapolating (past EXACT)
EXACT = 4  # bounds always counted exactly
SAMPLE = 4


@dataclass(frozen=True)
class Estimate:
    counts: tuple[int, ...]  # ordered wirings with at most 1, 2, ... occurrences (counted or extrapolated)
    counted: int  # the bounds up to this one were counted exactly
    per_wiring: float  # seconds per wiring of the largest size counted

    def ordered(self, bound: int) -> int:
        return self.counts[bound - 1]

    def exact(self, bound: int) -> bool:
        return bound <= self.counted

    def seconds(self, bound: int) -> float:
        return self.ordered(bound) * self.per_wiring * max(1.0, bound / self.counted)

    def largest_within(self, budget: float) -> int:
        fit = [b for b in range(1, len(self.counts) + 1) if self.seconds(b) <= budget]
        return max(fit, default=0)


def estimate(defns, reading: Reading, rules=()) -> Estimate:
    gens, stream = generators(defns)
    counts: list[int] = []
    spent, last = 0.0, []
    for n in range(1, reading.max + 1):
        if n > EXACT and counts and counts[-1] * _ratio(counts) > LISTED:
            break
        t = time.process_time()
        last = list(wirings(gens, stream, n, reading.copy, reading.once))
        spent += time.process_time() - t
        counts.append(len(last))
    counted = len(counts)
    while len(counts) < reading.max:
        counts.append(round(counts[-1] * _ratio(counts)))
    sample = sorted(last, key=lambda w: -w.size)[:SAMPLE]
    t = time.process_time()
    for w in sample:  # what each wiring costs: its symmetry orbit, its rewrites, its member built
        orbit(w, gens, reading)
        if rules:
            neighbours(w, gens, tuple(g.name for g in gens), list(rules), counted, {})
        else:
            build(w, gens, "w")
    per = (time.process_time() - t) / max(1, len(sample))
    per += spent / max(1, sum(counts[:counted]))  # listing it
    return Estimate(tuple(counts), counted, per)


def _ratio(counts: list[int]) -> float:
    return counts[-1] / counts[-2] if len(counts) > 1 and counts[-2] else 6.0


__all__ = ["Estimate", "estimate"]
