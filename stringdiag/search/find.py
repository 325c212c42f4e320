"""``derive --find``: a derivation from one diagram to another, searched for, written as a
``.deriv`` and then checked by ``derive --verify`` like any other — the search's answer is
always a checked derivation, never a bare claim.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator

from ..derive.derivation import Derivation, load_derivation
from ..errors import DiagError
from ..graph.box import Kind
from ..graph.diagram import Diagram
from ..graph.difference import first_difference
from ..graph.expand import expand
from .distance import distance
from .engine import Bounds, SearchOutcome, search
from .holes import ops, projections, suggestions, trivial
from .moves import Move, rule_moves, structural_moves
from .session import DiagramRef, Session


@dataclass
class Found:
    """The search's outcome and, where it found a chain, the checked derivation."""

    outcome: SearchOutcome
    text: str                      # the .deriv written (the chain, or the closest one)
    derivation: Derivation | None  # the chain as ``derive --verify`` read it back
    refused: str = ""              # the checker's refusal of a chain the search proposed

    @property
    def found(self) -> bool:
        return self.derivation is not None


def moves_of(session: Session, bounds: Bounds) -> Callable[[Diagram, Diagram], Iterator[Move]]:
    """The steps tried from a diagram: suggested specialisations first, then rules, then copies and unfoldings."""
    forms: dict[int, list[Diagram]] = {}

    def moves(cur: Diagram, target: Diagram) -> Iterator[Move]:
        if bounds.reductions:
            if id(target) not in forms:
                forms[id(target)] = target_forms(session, target, bounds)
            read = (suggestions(cur, t) for t in forms[id(target)])
            for line in _once(itertools.chain(*read, projections(cur, target), trivial(cur, target))):
                try:
                    made = session.run(cur, line)
                except DiagError:
                    continue
                yield Move(line, made.relation, made.diagram)
        yield from rule_moves(session.runner, cur, bounds.reductions, bounds.max_boxes, bounds.without)
        yield from structural_moves(cur, bounds.max_boxes)
    return moves


def target_forms(session: Session, target: Diagram, bounds: Bounds, most: int = 12) -> list[Diagram]:
    """The target, and its forms one equation away that have boxes it lacks (``exp`` where it
    has ``softmax``, a product of two projections where it has their rank-one form), the
    ``most`` nearest to the start by box counts: what a hole stood for may show in one of them only. The chain found still ends at the target:
    the forward search takes the equation the other way."""
    keys, theirs = ops(target), ops(session.start)
    near = []
    for k, mv in enumerate(rule_moves(session.runner, target, False, bounds.max_boxes, bounds.without)):
        mine = ops(mv.diagram)
        if mine - keys:  # more of some box: the nearest to the start first
            near.append((distance(mine, theirs), k, mv.diagram))
    return [target] + [d for _, _, d in sorted(near, key=lambda t: t[:2])[:most]]


def _once(lines: Iterable[str]) -> Iterator[str]:
    seen: set[str] = set()
    for line in lines:
        if line not in seen:
            seen.add(line)
            yield line


def find(start: str, target: str, out: Path, bounds: Bounds, verify: bool = True,
         progress: Callable[[int, int], None] | None = None) -> Found:
    """Search from ``start`` to ``target`` (``FILE.diag:NAME`` each), write the ``.deriv`` to
    ``out`` and, where a chain was found, read it back with the checker (``verify``: every
    equality also evaluated by the oracle)."""
    session = Session(DiagramRef.parse(start), DiagramRef.parse(target), out, bounds.max_boxes)
    result = search(session.start, session.goal, moves_of(session, bounds), bounds, progress)
    node = result.found or result.closest
    relation = "⇒" if result.reduction else "≡"
    if result.found is not None:
        note = (f"Found by stringdiag derive --find in {result.seconds:.1f} CPU s ({result.states} states): "
                f"{session.start.name} {relation} {session.goal.name}.")
        text = session.text(list(node.steps), note)
    else:
        note = f"Not found within the bound: the closest form reached ({node.distance} boxes apart) by these steps."
        text = "".join(f"# {line}\n" for line in note.splitlines()) + session.header + \
            "".join(s + "\n" for s in node.steps)
    out.write_text(text)
    if result.found is None:
        return Found(result, text, None)
    try:
        return Found(result, text, load_derivation(out, verify=verify, max_boxes=max(bounds.max_boxes, 10_000)))
    except DiagError as e:
        return Found(result, text, None, e.message)


def closest_difference(found: Found, start: str, target: str, out: Path) -> str:
    """Where the closest form reached first differs from the target."""
    session = Session(DiagramRef.parse(start), DiagramRef.parse(target), out)
    cur = found.outcome.closest.diagram
    return first_difference(expand(cur), expand(session.goal))


def has_abstract_box(ref: str) -> bool:
    """Whether a diagram holds an abstract family: reaching a concrete target from it takes a
    ``specialise`` step, a reduction (⇒) that the search tries only when reductions are allowed."""
    d = expand(Session(DiagramRef.parse(ref), None, Path("unused.deriv")).start)
    return any(d.record(b).kind is Kind.ABSTRACT for b in d.boxes())


__all__ = ["Found", "find", "closest_difference", "has_abstract_box"]
