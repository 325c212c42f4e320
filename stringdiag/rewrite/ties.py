"""One rule step at one match on one floor: the splice (``dpo.py``), the ties it makes carried
into definition boxes, and the refusals of steps that would split one weight set in two
(``graph/weightuse.py``). The derive floor classifies the result (≡ or ⇒); nothing here climbs
back to it.

Weight sharing is semantics: every box computing with one set is one function. A rule step
touches the boxes of its match; where a set it changes is also used outside the match (at
the top level, or inside a definition box, a scanned cell or a stack), the step would change
some uses of the set and not others, and is refused:

- a tie (a rule naming one process where the target has several sets, ⇒) renames the boxes
  of the tied sets: each group must be one set afterwards, wherever it is used. A definition
  box holding a use of a set the tie renames is opened, as ``unfold`` opens it (≡, weights
  kept), and the use renamed there, so that the tie and ``unfold`` then the tie give one
  verdict and isomorphic results (as ``specialise`` does; what else ``unfold`` opens is only
  opened, ≡); a scanned cell or a stack holding one (which no step opens) makes the tie
  refused, either way;
- a reduction fills holes (Khatri et al. (2024), Definition 3.1: a universal approximator
  specialised to a composite): a filled hole's set must have every use in the match, filled
  there, or the composite would hold here and the approximator elsewhere.
"""
from __future__ import annotations

from ..errors import DiagError
from dataclasses import dataclass, field
from typing import Callable

from ..graph.box import Box, Kind
from ..graph.diagram import Diagram
from ..graph.expand import expand, untouched
from ..graph.weights import WeightKey, tie, weight_key
from ..graph.weightuse import Use, Via, learner_key, uses
from .dpo import rewrite
from .enclosed import enclosed
from .occurrence import Match
from .rule import EQUATION, Rule


@dataclass(frozen=True)
class Spliced:
    """A rule applied at one match: the result, whether the match tied weight sets (then the
    step is a reduction whatever the rule), what it did to weights (for the step's note),
    each untouched box of the diagram before with its id in the result (None: the same ids),
    and the weight sets the step renamed (the result's name -> the name before: ``enclosed.py``)."""

    diagram: Diagram
    tied: bool
    note: str
    kept: dict[int, int] | None = None
    correspond: dict[WeightKey, WeightKey] = field(default_factory=dict)


def splice(cur: Diagram, rule: Rule, match: Match) -> Spliced:
    """The rule at ``match``: a reduction's filled holes checked first, then the splice, then
    each tied group checked to be one set wherever it is used."""
    if rule.kind != EQUATION:
        refuse_partial_fill(cur, rule, match)
    out, note, kept = rewrite(cur, match), match.order, None  # match.order: a scan's cell's inputs reordered
    if match.ties:
        out, note, kept = _tied(cur, out, match)
    return Spliced(out, bool(match.ties), note, kept, enclosed(cur, out))


def _tied(cur: Diagram, out: Diagram, match: Match) -> tuple[Diagram, str, dict[int, int] | None]:
    """The splice ``out`` of a match that ties weight sets, the tie carried into definition
    boxes and checked; its note; the boxes of ``cur`` kept (None: the same ids)."""
    res, trace, opened = tie_inside(out, match.ties)
    refuse_partial_ties(res, match.ties)
    shown = "; ".join(" = ".join(sorted(str(k[-1]) for k in group)) for group in match.ties)
    note = f"ties the weights of {shown}" + (f"; opens {', '.join(sorted(opened))} (where they are used too)"
                                             if opened else "")
    kept = None if trace is None else {b: k for b, k in untouched(out, res, trace).items()
                                       if cur.is_box(b) and cur.record(b).same_process(out.record(b))}
    return res, "; ".join(filter(None, [note, match.order])), kept


def tie_inside(out: Diagram, ties) -> tuple[Diagram, dict[int, list[int]] | None, set[str]]:
    """The tie of ``ties`` made in the definition boxes too: ``out`` (the rewrite, its top-level
    boxes tied) with every definition box holding a use of a set the tie renames opened, as
    ``unfold`` opens it (every use of that definition, at any depth, until none holds one),
    and the opened uses renamed. Returns the diagram, the trace of the boxes of ``out`` (None
    where nothing was opened) and the definitions opened."""
    renamed = tie(out, ties)  # done already at the top level: the renaming, and nothing new
    trace: dict[int, list[int]] | None = None
    opened: set[str] = set()
    while ops := {out.record(u.box).op for k in renamed for u in uses(out, k)
                  if u.nested and u.within[0][1] is Via.DEFINITION}:
        step: dict[int, list[int]] = {}
        out = expand(out, keep=_all_but(frozenset(ops)), trace=step)
        trace = step if trace is None else {b: [m for k in made for m in step.get(k, ())] for b, made in trace.items()}
        tie(out, ties)
        opened |= ops
    return out, trace, opened


def _all_but(ops: frozenset[str]) -> Callable[[Box], bool]:
    """Which definition boxes an expansion keeps closed: all but those of ``ops``."""
    return lambda node: node.op not in ops


def refuse_partial_ties(out: Diagram, ties) -> None:
    """A tie renames the top-level boxes of the tied sets; a box inside a definition box, a
    scanned cell or a stack keeps its set. Checked on the result ``out``: each group must be
    one set there, wherever it is used."""
    for group in ties:
        left = [(k, found) for k in sorted(group, key=repr) if (found := uses(out, k))]
        if len(left) > 1:
            k, where = next(((k, _where(f)) for k, f in left if _where(f)), (left[-1][0], "here"))
            raise DiagError(f"tying the weights of {' and '.join(sorted(str(g[-1]) for g in group))} here would "
                            f"leave the uses of '{k[-1]}' {where} apart: one set of weights split in two")


def refuse_partial_fill(cur: Diagram, rule: Rule, match: Match) -> None:
    """A reduction's filled holes at ``match``: each of their weight sets used only by the
    matched boxes that fill it (a set inside a matched definition box counts as that box)."""
    filled = {h for h, how in rule.specialised.items() if how != "itself"}
    if not filled:
        return
    targets: dict[int, str] = {}  # target box -> the hole it fills
    keys: dict = {}  # weight set -> the hole filled
    for pb, tb in match.boxes.items():
        pn = match.pattern.record(pb)
        inside = _holes_inside(pn, filled)
        direct = pn.op in filled and (pn.var or pn.kind.is_hole)
        if not (direct or inside):
            continue
        targets[tb] = pn.op if direct else min(inside)
        keys.setdefault(weight_key(cur.record(tb)), targets[tb])
        for name in inside:  # a global learnable filled inside: its set is the target's too
            keys.setdefault(learner_key(name), name)
    for key, hole in sorted(keys.items(), key=repr):
        outside = [u for u in uses(cur, key) if key is not None and u.box not in targets]
        if outside:
            u = outside[0]
            by = u.where() if u.nested else f"by '{cur.record(u.box).op}'"
            raise DiagError(f"rule '{rule.name}' specialises '{hole}' here, but its weights ({key[-1]}) are also "
                            f"used {by}, outside the match: specialising one use would split one set of weights "
                            "in two")


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


def _where(found: list[Use]) -> str:
    """Where the first nested use of a set is (``inside 'H' (a definition box)``), else ''."""
    return next((u.where() for u in found if u.nested), "")


__all__ = ["Spliced", "splice", "tie_inside", "refuse_partial_ties", "refuse_partial_fill"]
