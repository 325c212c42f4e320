"""Strategies: where to apply a rule. For now one, everywhere at once (``rewrite_all``),
which the normal forms of ``derive/normal.py`` and a derivation's ``everywhere`` step use."""
from __future__ import annotations

from ..errors import DiagError
from ..graph.diagram import Diagram
from ..graph.gcpause import gc_paused
from .dpo import rewrite
from .match import Index, Matcher, iter_matches, pattern


class TooManyBoxes(DiagError):
    """Rewriting at every match would pass a box limit: refused before any rewrite, with the figure."""

    def __init__(self, message: str, boxes: int, limit: int, matches: int):
        super().__init__(message)
        self.boxes, self.limit, self.matches = boxes, limit, matches


def rewrite_all(target: Diagram, rule, reverse: bool = False, limit: int | None = None,
                max_boxes: int | None = None, option: str = "--max-boxes") -> tuple[Diagram, int]:
    """Apply the rule at every match found in ``target`` (matches that overlap one already
    rewritten, or that it invalidated, are skipped; new boxes are not searched again).

    Returns the new diagram and the number of rewrites. One copy of the target, one index,
    and a local re-check of each match before it is applied: linear in the target, and each
    rewrite in what it changes (``index.py``). When the rewrites would make more than
    ``max_boxes`` boxes (each adds the replacement's boxes less the pattern's), :class:`TooManyBoxes`
    is raised once the matches are counted, before any is rewritten.
    """
    with gc_paused():
        out = target.copy()
        ix = Index(out)
        matches = list(iter_matches(out, rule, reverse, index=ix, limit=limit))
        if max_boxes is not None:
            pat, rep = rule.sides(reverse)
            after = len(out) + len(matches) * (len(rep) - len(pat))
            if after > max_boxes:
                raise TooManyBoxes(f"refusing to apply '{rule.name}' at its {len(matches):,} matches: it would make "
                               f"about {after:,} boxes (from {len(out):,}), over {max_boxes:,} ({option})",
                               after, max_boxes, len(matches))
        done = 0
        checker = Matcher(pattern(rule, reverse), ix)
        for m in matches:
            if checker.recheck(m):
                rewrite(out, m, index=ix, in_place=True)
                done += 1
    return out, done


__all__ = ["rewrite_all", "TooManyBoxes"]
