"""A derivation whose result is not its target: where the two part, said and drawn.

The two are compared opened (definitions inlined), so the first difference (``graph/difference.py``)
names boxes of the opened diagrams; the picture draws the result and the target as written, so each
named box is traced back to the box of the written diagram it came from (itself, or the definition
that holds it). ``derive -o`` then draws the chain with the target as one more picture: the result's
differing box highlighted as a box the next step replaces, the target's as one that step puts in.
"""
from __future__ import annotations

from ..syntax.records import Mutable

from ..errors import DiagError
from ..graph.diagram import Diagram
from ..graph.difference import Difference, difference
from ..graph.expand import expand
from .steps import Changes

NOT_ISO = "≇"  # the relation drawn between the result and a target it is not isomorphic to


class Missed(Mutable, frozen=False):
    """The result of a derivation against its target: the sentence, and the box of each (as written)."""

    text: str
    result_box: int | None
    target_box: int | None


def missed_target(cur: Diagram, target: Diagram) -> Missed | None:
    """None where ``cur`` is ``target`` up to isomorphism (both opened); else where they first part."""
    ours: dict[int, list[int]] = {}
    theirs: dict[int, list[int]] = {}
    mine, other = expand(cur, trace=ours), expand(target, trace=theirs)
    if mine.isomorphic(other):
        return None
    diff: Difference = difference(mine, other)
    return Missed(f"{len(mine)} boxes ({cur.signature()}) against {len(other)} ({target.signature()}), and they are "
                  f"not isomorphic\n{diff.text}", _written(ours, diff.result_box), _written(theirs, diff.target_box))


def _written(trace: dict[int, list[int]], opened: int | None) -> int | None:
    """The box of the written diagram that the opened box ``opened`` came from."""
    if opened is None:
        return None
    return next((b for b, became in trace.items() if opened in became), None)


class TargetMissed(DiagError):
    """A derivation that ran every step but did not reach its target: the steps, the target and
    where they part, so that ``derive -o`` can still draw the chain (an error all the same)."""

    def __init__(self, err: DiagError, derivation, target: Diagram, missed: Missed):
        super().__init__(err.message, err.pos, err.source)
        self.derivation, self.target, self.missed = derivation, target, missed

    def chain(self) -> tuple[list, list, list]:
        """The frames, table rows and changes of the chain with the target drawn last (its
        differing box and the result's highlighted)."""
        deriv, m = self.derivation, self.missed
        caption = f"target {self.target.name}: not isomorphic; " + m.text.splitlines()[-1]
        frames = deriv.frames() + [(caption, NOT_ISO, self.target)]
        rows = deriv.text_rows() + [(f"target {self.target.name}", NOT_ISO, str(len(self.target)), "", "", "",
                                     m.text.splitlines()[-1])]
        marked = Changes(frozenset(b for b in (m.result_box,) if b is not None),
                         frozenset(b for b in (m.target_box,) if b is not None), {})
        return frames, rows, [s.changes for s in deriv.steps] + [marked]


__all__ = ["Missed", "TargetMissed", "missed_target", "NOT_ISO"]
