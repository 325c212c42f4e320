"""How big the space is and how long it would take, said before the work starts.

The ordered wirings are counted exactly up to bound 4, and further while the next bound is
predicted to hold at most ``LISTED`` wirings (it grows about five-fold a step): a rule on the
counts, not on the CPU time spent, so that the estimate of one space is the same on an idle
machine and a busy one; above that the count is extrapolated from the last growth ratios
(:func:`_ratio`), so it is an estimate, not a bound.

The time is the real pipeline's: every stage (listing, symmetry classes, composites, the
reduction, the members built) run on the same space at a small bound, the largest whose
ordered wirings number at most ``SAMPLE`` (chosen by the counts, so again load-independent),
and its CPU time per ordered wiring scaled to the bound asked: times the count, times
``(bound / sampled) ** GROWTH``, the cost of one wiring growing with its size. ``GROWTH`` was
fit to the anatomy spaces (at bounds 5 and 6 the estimate of the generators alone came within
12 % of the CPU time measured, of every port ordered with the rules within 12 %, of the
best-supported reading with the rules 40 % over, at 7 too). It is CPU
time, so the load of the moment does not swing it; on a busy machine the wall clock runs longer.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from .reading import Reading
from .space import generators, wirings
from .stages import Work, enumerate_space

LISTED = 4000  # ordered wirings listed at most at one bound before extrapolating (past EXACT)
EXACT = 4  # bounds always counted exactly
SAMPLE = 200  # ordered wirings at most in the space the pipeline is timed on
GROWTH = 1.25  # the cost of one wiring grows as (bound / sampled) ** GROWTH


@dataclass(frozen=True)
class Estimate:
    counts: tuple[int, ...]  # ordered wirings with at most 1, 2, ... occurrences (counted or extrapolated)
    counted: int  # the bounds up to this one were counted exactly
    per_wiring: float  # seconds of the whole pipeline per ordered wiring at bound ``sampled``
    sampled: int = 1  # the bound the pipeline was timed at

    def ordered(self, bound: int) -> int:
        return self.counts[bound - 1]

    def exact(self, bound: int) -> bool:
        return bound <= self.counted

    def seconds(self, bound: int) -> float:
        return self.ordered(bound) * self.per_wiring * max(1.0, bound / self.sampled) ** GROWTH

    def largest_within(self, budget: float) -> int:
        fit = [b for b in range(1, len(self.counts) + 1) if self.seconds(b) <= budget]
        return max(fit, default=0)


def estimate(defns, reading: Reading, rules=(), confirm: bool = False) -> Estimate:
    """The counts, and the pipeline timed on the largest small space (``confirm``: with the
    VF2 confirmation, as ``Work.confirm``)."""
    gens, stream = generators(defns)
    counts: list[int] = []
    for n in range(1, reading.max + 1):
        if n > EXACT and counts and counts[-1] * _ratio(counts) > LISTED:
            break
        counts.append(sum(1 for _ in wirings(gens, stream, n, reading.copy, reading.once)))
    counted = len(counts)
    while len(counts) < reading.max:
        counts.append(round(counts[-1] * _ratio(counts)))
    k = max([n for n in range(1, counted + 1) if counts[n - 1] <= SAMPLE], default=1)
    t = time.process_time()
    enumerate_space(defns, reading.but(max=k), rules, work=Work(confirm=confirm))
    per = (time.process_time() - t) / max(1, counts[k - 1])
    return Estimate(tuple(counts), counted, per, k)


def _ratio(counts: list[int]) -> float:
    """The next bound's growth: the last ratio, times how much it grew on the ratio before
    (at most doubled): the counts grow faster than geometrically, more so where outputs may be
    copied (anatomy's best-supported reading 6, 3.8, 4.7, 4.8, 5.5, 5.8; copying every value
    7, 8, 10.8, 16.1, 22.8)."""
    if len(counts) < 2 or not counts[-2]:
        return 6.0
    last = counts[-1] / counts[-2]
    if len(counts) < 3 or not counts[-3]:
        return last
    return last * min(2.0, max(1.0, last / (counts[-2] / counts[-3])))


__all__ = ["Estimate", "estimate"]
