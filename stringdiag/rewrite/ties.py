"""One rule step at one match: the splice (``dpo.py``), then its weight sets checked on the
graph floor (``graph/stepsets.py``: a tie carried into definition boxes, the refusals of a step
that would split one weight set in two, the sets moved into a new loop cell), given what the
rule says as plain data (the boxes a reduction fills). The derive floor classifies the result
(≡ or ⇒); the step's diagram goes down the floors from here and is not passed back up.
"""
from __future__ import annotations

from ..syntax.records import Record, field

from ..graph.box import Box, Kind
from ..graph.diagram import Diagram
from ..graph.stepsets import Fill, enclosed, refuse_outside, tied
from ..graph.weights import WeightKey
from .dpo import rewrite
from .occurrence import Match
from .rule import EQUATION, Rule


class Spliced(Record):
    """A rule applied at one match: the result, whether the match tied weight sets (then the
    step is a reduction whatever the rule), what it did to weights (for the step's note),
    each untouched box of the diagram before with its id in the result (None: the same ids),
    and the weight sets the step renamed (the result's name -> the name before: ``enclosed``)."""

    diagram: Diagram
    tied: bool
    note: str
    kept: dict[int, int] | None = None
    correspond: dict[WeightKey, WeightKey] = field(default_factory=dict)


def splice(cur: Diagram, rule: Rule, match: Match) -> Spliced:
    """The rule at ``match``: the splice, then (on the graph floor) a reduction's filled holes
    checked against ``cur`` and each tied group checked to be one set wherever it is used.
    The note joins what the tie did and a scan's cell's inputs reordered (``match.order``)."""
    fills = filled(rule, match)
    out = rewrite(cur, match)
    refuse_outside(cur, fills, f"rule '{rule.name}'")
    done = tied(cur, out, match.ties)
    return Spliced(done.diagram, bool(match.ties), "; ".join(filter(None, [done.note, match.order])), done.kept,
                   enclosed(cur, done.diagram))


def refuse_partial_fill(cur: Diagram, rule: Rule, match: Match) -> None:
    """A reduction's filled holes at ``match``: each of their weight sets used only by the
    matched boxes that fill it (a set inside a matched definition box counts as that box)."""
    refuse_outside(cur, filled(rule, match), f"rule '{rule.name}'")


def filled(rule: Rule, match: Match) -> list[Fill]:
    """The target's boxes that a reduction fills at ``match`` (none for an equation), read off
    the rule and the match alone."""
    holes = {h for h, how in rule.specialised.items() if how != "itself"} if rule.kind != EQUATION else set()
    if not holes:
        return []
    fills = []
    for pb, tb in match.boxes.items():
        pn = match.pattern.record(pb)
        inside = _holes_inside(pn, holes)
        direct = pn.op in holes and (pn.var or pn.kind.is_hole)
        if direct or inside:
            fills.append(Fill(tb, pn.op if direct else min(inside), frozenset(inside)))
    return fills


def _holes_inside(node: Box, names: set[str]) -> set[str]:
    """The holes ``names`` a pattern's definition box holds, at any depth (rule sides are small)."""
    if node.kind is not Kind.DIAGRAM or node.var or node.cell or node.ref is None:
        return set()
    found = set()
    for b in node.ref.boxes():
        inner = node.ref.record(b)
        if inner.op in names and inner.kind.is_hole:
            found.add(inner.op)
        found |= _holes_inside(inner, names)
    return found


__all__ = ["Spliced", "splice", "refuse_partial_fill", "filled"]
