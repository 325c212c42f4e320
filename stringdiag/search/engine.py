"""Best-first search for a chain of steps from a start to a target, up to isomorphism.

States are diagrams, hash-consed by the canonical hash of the diagram as it stands (its
definitions closed, so that opening one is a step of its own) and compared with the target
by the canonical hash of the opened diagram, then confirmed by the isomorphism check. The
frontier is ordered by the distance of box counts to the target (``distance.py``) plus half
the steps taken, so that short chains are preferred among equally close ones. Bounded by
steps, CPU time, boxes and states; the closest state reached is kept for the report.
"""
from __future__ import annotations

import heapq
import itertools
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable

from ..graph.diagram import Diagram
from ..graph.expand import expand
from ..graph.iso import canonical_hash
from .distance import distance, profile
from .moves import RED, Move


@dataclass(frozen=True)
class Bounds:
    max_steps: int = 6
    time_budget: float = 60.0  # CPU seconds
    max_boxes: int = 400
    max_states: int = 5_000
    reductions: bool = False
    without: frozenset[str] = frozenset()  # rules not to use (a proof of a rule must not use it)


@dataclass
class Node:
    diagram: Diagram
    steps: tuple[str, ...]
    relations: tuple[str, ...]
    distance: int


@dataclass
class SearchOutcome:
    """What the search found: the chain (``found``) or the closest state (``closest``)."""

    found: Node | None
    closest: Node
    states: int
    seconds: float
    why: str = ""  # why it stopped without finding
    relations: tuple[str, ...] = field(default_factory=tuple)

    @property
    def reduction(self) -> bool:
        return self.found is not None and RED in self.found.relations


Expand = Callable[[Diagram, Diagram], Iterable[Move]]


def search(start: Diagram, target: Diagram, moves: Expand, bounds: Bounds,
           progress: Callable[[int, int], None] | None = None) -> SearchOutcome:
    """A chain of ``moves`` from ``start`` to a diagram isomorphic to ``target``, within ``bounds``."""
    t0 = time.process_time()
    want = profile(target)
    goal_flat = expand(target)
    goal = canonical_hash(goal_flat)
    first = Node(start, (), (), distance(profile(start), want))
    tie = itertools.count()
    frontier = [(_priority(first), next(tie), first)]
    seen = {canonical_hash(start)}
    if _reached(start, goal, goal_flat):
        return SearchOutcome(first, first, 0, time.process_time() - t0)
    closest, states = first, 0
    while frontier:
        if time.process_time() - t0 > bounds.time_budget:
            return SearchOutcome(None, closest, states, time.process_time() - t0, f"the time budget of {bounds.time_budget:g} CPU s spent")
        if states >= bounds.max_states:
            return SearchOutcome(None, closest, states, time.process_time() - t0, f"--max-states {bounds.max_states:,} reached")
        _, _, node = heapq.heappop(frontier)
        states += 1
        if progress is not None:
            progress(states, node.distance)
        if len(node.steps) >= bounds.max_steps:
            continue
        for mv in moves(node.diagram, target):
            if len(mv.diagram) > bounds.max_boxes:
                continue
            key = canonical_hash(mv.diagram)
            if key in seen:
                continue
            seen.add(key)
            child = Node(mv.diagram, node.steps + (mv.text,), node.relations + (mv.relation,),
                         distance(profile(mv.diagram), want))
            if child.distance < closest.distance:
                closest = child
            if _reached(mv.diagram, goal, goal_flat):
                return SearchOutcome(child, child, states, time.process_time() - t0)
            heapq.heappush(frontier, (_priority(child), next(tie), child))
    return SearchOutcome(None, closest, states, time.process_time() - t0,
                   f"every chain of at most {bounds.max_steps} steps tried")


def _priority(n: Node) -> tuple[float, int]:
    return n.distance + 0.5 * len(n.steps), len(n.diagram)


def _reached(d: Diagram, goal: str, goal_flat: Diagram) -> bool:
    flat = expand(d)
    return canonical_hash(flat) == goal and flat.isomorphic(goal_flat)


__all__ = ["Bounds", "Node", "SearchOutcome", "search"]
