"""Same-run ratios by CPU time, for the benchmarks that print the speed table.

The machine these run on is shared (other jobs, a niced study): wall time measures the
neighbours, CPU time (``time.process_time``: this process, torch at one thread) the work. Two
callables are timed in interleaved rounds, each first in turn, each round long enough to read
the clock well; a figure is the median over rounds, a ratio the median of the rounds' ratios.
"""
from __future__ import annotations

import statistics
import sys
import time
from dataclasses import dataclass
from typing import Callable

MIN_ROUND = 0.02  # CPU seconds a timing of one side lasts at least (calls repeated to reach it)


@dataclass(frozen=True)
class Pair:
    """Per-call CPU seconds of a measured side and its reference (medians), and the median ratio."""
    mine: float
    ref: float
    ratio: float
    rounds: int


def cpu(fn: Callable[[], object], calls: int) -> float:
    """CPU seconds per call of ``calls`` calls."""
    t = time.process_time()
    for _ in range(calls):
        fn()
    return (time.process_time() - t) / calls


def calls_for(fn: Callable[[], object]) -> int:
    """How many calls make one timing last :data:`MIN_ROUND` (after two warm-up calls)."""
    fn()
    one = max(cpu(fn, 1), 1e-6)
    return max(1, int(MIN_ROUND / one + 0.999))


def pair(mine: Callable[[], object], ref: Callable[[], object], rounds: int = 5) -> Pair:
    """``mine`` against ``ref``, interleaved over ``rounds`` rounds, each first in turn."""
    n_mine, n_ref = calls_for(mine), calls_for(ref)
    a, b = [], []
    for r in range(rounds):
        if r % 2:
            b.append(cpu(ref, n_ref))
            a.append(cpu(mine, n_mine))
        else:
            a.append(cpu(mine, n_mine))
            b.append(cpu(ref, n_ref))
    ratio = statistics.median(x / y for x, y in zip(a, b))
    return Pair(statistics.median(a), statistics.median(b), ratio, rounds)


def row(figure: str, reference: str, now: str, goal: str, held: bool | None) -> None:
    """One row of the speed table, printed as soon as it is measured."""
    verdict = "-" if held is None else ("met" if held else "NOT met")
    print(f"| {figure} | {reference} | {now} | {goal} | {verdict} |", flush=True)
    sys.stdout.flush()


def header() -> None:
    print("| figure | reference, same run | now | goal | verdict |\n|---|---|---|---|---|", flush=True)
