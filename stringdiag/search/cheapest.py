"""``stringdiag optimize``: the cheapest form of a diagram reachable by equalities (≡) within a
bound, written as a derivation from it that ``derive --verify`` checks.

A cost is read from the analyses ``info`` prints: time or memory as monomials in the
dimensions (``analysis/complexity.py``), or the number of learnable parameters. To order
diagrams the monomials are evaluated with every sequence dimension at ``SEQ`` and every fixed
one at ``FIXED`` (the sizes are stated in the output: an order, not a measurement). The search
is best-first on that cost over the same steps as ``derive --find`` without reductions, and
keeps the cheapest diagram it met; equal costs prefer fewer steps.
"""
from __future__ import annotations

import heapq
import itertools
import time
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Callable

from ..analysis.combine import cost_monomials
from ..analysis.complexity import Complexity, analyse, seq_names
from ..analysis.monomials import dominant
from ..derive.derivation import Derivation, load_derivation
from ..errors import DiagError
from ..graph.diagram import Diagram
from ..graph.iso import canonical_hash
from .engine import Bounds
from .moves import rule_moves, structural_moves
from .session import DiagramRef, Session

SEQ, FIXED = 4096, 64  # the sizes at which costs are compared


class Cost(str, Enum):
    TIME = "time"
    MEMORY = "memory"
    PARAMS = "params"


def cost(d: Diagram, kind: Cost) -> float:
    """The diagram's cost at the comparison sizes."""
    if kind is Cost.PARAMS:
        from ..analysis.parameters import parameter_count

        names = {n for w in d.wires() for dim in d.wire_type(w) for n in dim.names()}
        return float(parameter_count(d, {n: FIXED for n in names}, "linear"))
    time_, memory = cost_monomials(d)
    seq = seq_names(d)
    ms = dominant(set(time_ if kind is Cost.TIME else memory))
    return float(sum(_value(m, seq) for m in ms))


def _value(m, seq: set[str]) -> float:
    out = 1.0
    for name, power in m:
        out *= float(SEQ if name in seq else FIXED) ** power
    return out


@dataclass
class Optimised:
    start: Diagram
    best: Diagram
    steps: tuple[str, ...]
    before: float
    after: float
    states: int
    seconds: float
    text: str
    derivation: Derivation | None
    refused: str = ""

    def complexities(self) -> tuple[Complexity, Complexity]:
        return analyse(self.start), analyse(self.best)


def optimize(source: str, kind: Cost, out: Path, bounds: Bounds,
             progress: Callable[[int, float], None] | None = None) -> Optimised:
    """Search from ``source`` (``FILE.diag:NAME``) for the cheapest ≡ form; write and check it."""
    session = Session(DiagramRef.parse(source), None, out, bounds.max_boxes)
    t0, tie = time.process_time(), itertools.count()
    start = session.start
    best = (cost(start, kind), 0, start, ())
    frontier: list[tuple] = [(best[0], 0, next(tie), start, ())]
    seen, states = {canonical_hash(start)}, 0
    while frontier and states < bounds.max_states and time.process_time() - t0 <= bounds.time_budget:
        c, _, _, cur, steps = heapq.heappop(frontier)
        states += 1
        if progress is not None:
            progress(states, best[0])
        if (c, len(steps)) < best[:2]:
            best = (c, len(steps), cur, steps)
        if len(steps) >= bounds.max_steps:
            continue
        moves = itertools.chain(rule_moves(session.runner, cur, False, bounds.max_boxes, bounds.without),
                                structural_moves(cur, bounds.max_boxes))
        for mv in moves:
            key = canonical_hash(mv.diagram)
            if key not in seen:
                seen.add(key)
                heapq.heappush(frontier, (cost(mv.diagram, kind), len(steps) + 1, next(tie), mv.diagram,
                                          steps + (mv.text,)))
    seconds = time.process_time() - t0
    note = (f"Found by stringdiag optimize --cost {kind.value} in {seconds:.1f} CPU s ({states} states): "
            f"{cost(start, kind):.3g} -> {best[0]:.3g} at every sequence dimension {SEQ}, every fixed one {FIXED}.")
    text = session.text(list(best[3]), note)
    out.write_text(text)
    result = Optimised(start, best[2], best[3], cost(start, kind), best[0], states, seconds, text, None)
    try:
        result.derivation = load_derivation(out, verify=True, max_boxes=max(bounds.max_boxes, 10_000))
    except DiagError as e:
        result.refused = e.message
    return result


__all__ = ["Cost", "cost", "optimize", "Optimised", "SEQ", "FIXED"]
