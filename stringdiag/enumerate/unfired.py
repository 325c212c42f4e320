"""Why a rule given to ``enumerate --rules`` relates no member (``--trace-rules``).

A rule file is passed to relate members; one that matches none of them reduces nothing, and the
table alone does not say so. Each rule is looked for in the members before the reduction (the
side it is applied from, as the reduction applies it: ``stages.Oriented``); one that matches
nowhere is explained on the member where its closest partial match placed the most pattern boxes
(``rewrite/closest.py``), naming the box or condition that stopped it. Bounded: at most ``LIMIT``
members are looked at per rule.
"""
from __future__ import annotations

from ..rewrite.closest import explain
from ..rewrite.match import find_matches
from .build import build
from .space import generators
from .stages import Oriented, Space

LIMIT = 50  # members a rule is looked for in


def traced(space: Space, defns: list, rules: list, limit: int = LIMIT) -> list[str]:
    """For each rule: on how many members it fires, or why it fires on none (its closest match)."""
    gens, _ = generators(defns)
    stages = [s for s in space.stages if s.name != "reduced"]
    members = stages[-1].members[:limit]
    built = [(m.name, m.diagram if m.diagram is not None else build(m.wiring, gens, m.name)) for m in members]
    lines = []
    for rule in rules:
        o = Oriented.of(rule)  # the side the reduction matches (a reduction's right side, too)
        shown = f"{rule.name}{' (right to left)' if o.reverse else ''}"
        fired = [name for name, d in built if find_matches(d, o.pattern, limit=1)]
        if fired:
            lines.append(f"{shown}: fires on {len(fired)} of the {len(built)} members looked at")
            continue
        if not built:
            lines.append(f"{shown}: no member to look at")
            continue
        whys = [(name, d, explain(d, o.pattern)) for name, d in built]
        name, d, why = max(whys, key=lambda t: len(t[2].placed))  # the first of the closest
        summary = why.summary(o.pattern, d, more="")
        lines.append(f"{shown}: fires on none of the {len(built)} members looked at; closest on {name}:\n  "
                     + summary.replace("\n", "\n  "))
    return lines


__all__ = ["traced", "LIMIT"]
