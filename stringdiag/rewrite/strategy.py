"""Strategies: where to apply a rule. For now one, everywhere at once (``rewrite_all``),
which the normal forms of ``derive/normal.py`` and a derivation's ``everywhere`` step use."""
from __future__ import annotations

from ..graph.diagram import Diagram
from ..graph.gcpause import gc_paused
from .dpo import rewrite
from .match import Index, Matcher, iter_matches, pattern


def rewrite_all(target: Diagram, rule, reverse: bool = False, limit: int | None = None) -> tuple[Diagram, int]:
    """Apply the rule at every match found in ``target`` (matches that overlap one already
    rewritten, or that it invalidated, are skipped; new boxes are not searched again).

    Returns the new diagram and the number of rewrites. One copy of the target, one index,
    and a local re-check of each match before it is applied: linear in the target.
    """
    with gc_paused():
        out = target.copy()
        ix = Index(out)
        matches = list(iter_matches(out, rule, reverse, index=ix, limit=limit))
        done = 0
        checker = Matcher(pattern(rule, reverse), ix)
        for m in matches:
            if checker.recheck(m):
                rewrite(out, m, index=ix, in_place=True)
                done += 1
    return out, done


__all__ = ["rewrite_all"]
