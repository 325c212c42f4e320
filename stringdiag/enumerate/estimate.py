"""How big the space is and how long it would take, said before the work starts.

The ordered wirings are counted bound by bound while counting the next bound is cheap
(it grows about five-fold a step); above that the count is extrapolated with the last
growth ratio, so it is an estimate, not a bound. The time is the count times the cost of one
wiring measured here, now, on a sample of the largest wirings counted (built, and each rule
tried at each match when there are rules), scaled by size: the machine's load is in it.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from .build import build
from .reading import Reading
from .space import generators, wirings
from .stages import neighbours

CHEAP = 0.15  # seconds of counting spent at most before extrapolating
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
        if counts and spent + spent * _ratio(counts) > CHEAP:
            break
        t = time.perf_counter()
        last = list(wirings(gens, stream, n, reading.copy, reading.once))
        spent += time.perf_counter() - t
        counts.append(len(last))
    counted = len(counts)
    while len(counts) < reading.max:
        counts.append(round(counts[-1] * _ratio(counts)))
    sample = sorted(last, key=lambda w: -w.size)[:SAMPLE]
    t = time.perf_counter()
    if rules:
        names = tuple(g.name for g in gens)
        for w in sample:
            neighbours(w, gens, names, list(rules), counted, {})
    else:
        for w in sample[:1]:
            build(w, gens, "w")
    per = (time.perf_counter() - t) / max(1, len(sample) if rules else len(last))
    per = max(per, spent / max(1, sum(counts[:counted])))
    return Estimate(tuple(counts), counted, per)


def _ratio(counts: list[int]) -> float:
    return counts[-1] / counts[-2] if len(counts) > 1 and counts[-2] else 6.0


__all__ = ["Estimate", "estimate"]
