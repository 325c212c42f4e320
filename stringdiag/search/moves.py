"""The steps a search may take from one diagram, each as the line of a ``.deriv`` that makes it.

Rules of the library and of the files in use, both ways for an equation, at every match the
line can name (``at WIRE, ...``) and ``everywhere``; copying a copied wire; opening a user's
definition; and specialisations the target suggests (``holes.py``). A match that ties weight
sets is a reduction (⇒), offered only where reductions are allowed: weight sharing is
semantics, and no equation may change it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator

from ..derive.derivation import Runner, all_definitions
from ..derive.steps import EQ, RED, apply_everywhere, apply_rule, copy, unfold
from ..elaborate.loader import prelude
from ..errors import DiagError
from ..graph.box import Kind
from ..graph.diagram import Diagram
from ..graph.hypergraph import repeated
from ..rewrite.index import Index
from ..rewrite.match import find_matches, select
from ..rewrite.rule import EQUATION, Rule


@dataclass
class Move:
    """A step found to apply: its ``.deriv`` line, relation and result."""

    text: str
    relation: str
    diagram: Diagram


def rule_moves(runner: Runner, cur: Diagram, reductions: bool, max_boxes: int,
               without: frozenset[str] = frozenset()) -> Iterator[Move]:
    """Every rule (but those ``without``) at every match a line can name, and everywhere
    where it matches twice or more."""
    ix = Index(cur)  # one index of the diagram for every rule: matching does not edit it
    for name, rule in sorted(runner.rules.items()):
        if (rule.kind != EQUATION and not reductions) or name in without:
            continue
        for reverse in (False, True) if rule.kind == EQUATION else (False,):
            yield from _one_rule(cur, ix, name, rule, reverse, reductions, max_boxes)


def _one_rule(cur: Diagram, ix: Index, name: str, rule: Rule, reverse: bool, reductions: bool,
              max_boxes: int) -> Iterator[Move]:
    head = f"apply {name}{' reversed' if reverse else ''}"
    try:
        matches = find_matches(cur, rule, reverse, index=ix, ties=True)
    except DiagError:
        return
    seen: set = set()
    for m in matches:
        if m.targets in seen or (m.ties and not reductions):
            continue
        seen.add(m.targets)
        text = head if len(matches) == 1 else f"{head} at {m.where}"
        if len(matches) > 1 and _named(matches, m) is not m:
            continue  # the line could not name this match
        made = _guard(lambda: apply_rule(cur, rule, m))
        if made is not None and len(made.diagram) <= max_boxes and (reductions or made.relation == EQ):
            yield Move(text, made.relation, _named_as(made.diagram, cur))
    if len(seen) > 1:
        made = _guard(lambda: apply_everywhere(cur, rule, reverse, max_boxes)[0])
        if made is not None and (reductions or made.relation == EQ):
            yield Move(f"{head} everywhere", made.relation, _named_as(made.diagram, cur))


def _named(matches: list, m):
    try:
        return select(matches, m.where)
    except DiagError:
        return None


def _guard(fn: Callable):
    try:
        return fn()
    except DiagError:
        return None


def _named_as(out: Diagram, cur: Diagram) -> Diagram:
    out.name = cur.name
    return out


def structural_moves(cur: Diagram, max_boxes: int) -> Iterator[Move]:
    """Copying a copied wire (≡) and opening a definition of the user's files (≡)."""
    labels: dict[str, int] = {}
    for w in cur.wires():
        if (lab := cur.wire_label(w)) is not None:
            labels[lab] = labels.get(lab, 0) + 1
    for w in cur.wires():
        lab = cur.wire_label(w)
        if lab is None or labels[lab] != 1 or cur.producer(w) is None:
            continue
        if len(cur.consumers(w)) + (w in cur.outputs) >= 2:
            made = _guard(lambda: copy(cur, lab))
            if made is not None and len(made.diagram) <= max_boxes:
                yield Move(f"copy {lab}", made.relation, _named_as(made.diagram, cur))
    shipped = set(prelude().defs)
    names = {cur.record(b).op for b in cur.boxes() if cur.record(b).kind is Kind.DIAGRAM
             and not cur.record(b).scan and not repeated(cur.record(b))}
    for name in sorted(names - shipped):
        made = _guard(lambda: unfold(cur, name, all_definitions(cur)))
        if made is not None and len(made.diagram) <= max_boxes:
            yield Move(f"unfold {name}", made.relation, _named_as(made.diagram, cur))


__all__ = ["Move", "rule_moves", "structural_moves", "EQ", "RED"]
