"""What one rewrite step does to weight sets, checked on the graph floor. The rewrite floor
(``rewrite/ties.py``) splices a match and hands the result here with what its rule says as
plain data (the boxes that fill holes, the groups of sets a match ties), so a step's diagram
goes down the floors and is not passed back up to be checked.

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
  there, or the composite would hold here and the approximator elsewhere;
- a rewrite that brings in a loop cell (``simd_unit`` read right to left) moves the local sets
  of what the cell holds under the cell's instance (``H#1/L`` becomes ``Unit#1/H#1/L``): the
  same weights under a new name, which the step must report (:func:`enclosed`) so that the
  oracle gives both sides the same weights; such a set must then be used nowhere else.
"""

from typing import Callable, Iterable, NamedTuple, Sequence

from ..errors import DiagError
from .box import Box, Kind
from .diagram import Diagram
from .expand import expand, untouched
from .weights import WeightKey, tie, weight_key, weight_sets
from .weightuse import WeightUse, Holder, learner_key, uses


class Fill(NamedTuple):
    """A box of the target that a reduction fills: the hole it fills there, and the global
    holes filled inside it (a matched definition box holding one)."""

    box: int
    hole: str
    inside: frozenset[str] = frozenset()


class SetsTied(NamedTuple):
    """A splice with its ties carried into definition boxes: the diagram, what was done to its
    weights (for the step's note: the sets tied, the definitions opened to do it), and each
    untouched box before with its id here (None: the same ids)."""

    diagram: Diagram
    note: str = ""
    kept: dict[int, int] | None = None


def refuse_outside(d: Diagram, fills: Sequence[Fill], who: str) -> None:
    """A reduction's filled holes (``who`` names the rule): each of their weight sets used in
    ``d`` only by the boxes that fill it (a set inside a filled definition box counts as that box)."""
    keys: dict[WeightKey, str] = {}  # weight set -> the hole filled
    for fill in fills:
        key = weight_key(d.record(fill.box))
        if key is not None:
            keys.setdefault(key, fill.hole)
        for name in sorted(fill.inside):  # a global learnable filled inside: its set is the box's too
            keys.setdefault(learner_key(name), name)
    targets = {fill.box for fill in fills}
    for key, hole in sorted(keys.items(), key=repr):
        outside = [u for u in uses(d, key) if u.box not in targets]
        if outside:
            u = outside[0]
            by = u.where() if u.nested else f"by '{d.record(u.box).op}'"
            raise DiagError(f"{who} specialises '{hole}' here, but its weights ({key.name}) are also "
                            f"used {by}, outside the match: specialising one use would split one set of weights "
                            "in two")


def tied(before: Diagram, out: Diagram, ties: tuple[frozenset, ...]) -> SetsTied:
    """The splice ``out`` of ``before`` at a match that ties the weight sets ``ties`` (none:
    ``out`` as it is): the tie carried into definition boxes (:func:`tie_inside`) and checked
    (:func:`refuse_partial_ties`)."""
    if not ties:
        return SetsTied(out)
    res, trace, opened = tie_inside(out, ties)
    refuse_partial_ties(res, ties)
    shown = "; ".join(" = ".join(sorted(k.name for k in group)) for group in ties)
    note = f"ties the weights of {shown}" + (f"; opens {', '.join(sorted(opened))} (where they are used too)"
                                             if opened else "")
    kept = None if trace is None else {b: k for b, k in untouched(out, res, trace).items()
                                       if before.is_box(b) and before.record(b).same_process(out.record(b))}
    return SetsTied(res, note, kept)


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
                  if u.nested and u.within[0][1] is Holder.DEFINITION}:
        step: dict[int, list[int]] = {}
        out = expand(out, keep=_all_but(frozenset(ops)), trace=step)
        trace = step if trace is None else {b: [m for k in made for m in step.get(k, ())] for b, made in trace.items()}
        tie(out, ties)
        opened |= ops
    return out, trace, opened


def _all_but(ops: frozenset[str]) -> Callable[[Box], bool]:
    """Which definition boxes an expansion keeps closed: all but those of ``ops``."""
    return lambda node: node.op not in ops


def refuse_partial_ties(out: Diagram, ties: Iterable[Iterable[WeightKey]]) -> None:
    """A tie renames the top-level boxes of the tied sets; a box inside a definition box, a
    scanned cell or a stack keeps its set. Checked on the result ``out``: each group must be
    one set there, wherever it is used."""
    for group in ties:
        left = [(k, found) for k in sorted(group, key=repr) if (found := uses(out, k))]
        if len(left) > 1:
            k, where = next(((k, _where(f)) for k, f in left if _where(f)), (left[-1][0], "here"))
            raise DiagError(f"tying the weights of {' and '.join(sorted(g.name for g in group))} here would "
                            f"leave the uses of '{k.name}' {where} apart: one set of weights split in two")


def _where(found: list[WeightUse]) -> str:
    """Where the first nested use of a set is (``inside 'H' (a definition box)``), else ''."""
    return next((u.where() for u in found if u.nested), "")


def enclosed(before: Diagram, after: Diagram) -> dict[WeightKey, WeightKey]:
    """The renamed sets of ``after`` (a rewrite of ``before`` that kept its untouched boxes'
    ids) -> their names in ``before``; a set moved into a new loop cell while still used
    elsewhere is refused."""
    old = set(before.boxes())
    correspond: dict[WeightKey, WeightKey] = {}
    for b in after.boxes():
        box = after.record(b)
        if b in old or box.kind is not Kind.DIAGRAM or not box.scan or box.instance is None:
            continue
        for key in sorted(weight_sets(box.ref), key=repr):
            if key.is_global or not uses(before, key):
                continue  # a global set keeps its name everywhere; a set new to the diagram is the cell's own
            if key in correspond.values() or uses(after, key):
                raise DiagError(f"the weights '{key.name}' would move into the loop's cell '{box.instance}' and "
                                "stay in use elsewhere too: that splits one set of weights into two")
            correspond[key.renamed(f"{box.instance}/{key.name}")] = key
    return correspond


__all__ = ["Fill", "SetsTied", "refuse_outside", "tied", "tie_inside", "refuse_partial_ties", "enclosed"]
