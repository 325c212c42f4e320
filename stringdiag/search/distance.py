"""How far one diagram is from another, for ordering a search: the boxes of the two (every
definition opened) counted by what they compute — kind, name (a product by its numbers of
factors and summed indices), ports (not SIMD depth: isomorphism ignores a product's unused
labels) — and the size of the difference of the two counts.

Zero for isomorphic diagrams, but not only for them: it guides, the canonical hash and the
isomorphism check decide.
"""
from __future__ import annotations

from collections import Counter

from ..graph.box import Kind
from ..graph.diagram import Diagram
from ..graph.expand import expand


def profile(d: Diagram) -> Counter:
    """The boxes of the opened diagram, counted by label."""
    flat = expand(d)
    out: Counter = Counter()
    for b in flat.boxes():
        r = flat.record(b)
        name = r.op if r.kind is not Kind.CONTRACT else f"{len(flat.box_inputs(b))}x{len(r.summed)}"
        out[(r.kind.value, name, len(flat.box_inputs(b)), len(flat.box_outputs(b)))] += 1
    return out


def distance(a: Counter, b: Counter) -> int:
    """Boxes of one count that the other lacks, both ways."""
    return sum(((a - b) + (b - a)).values())


def missing(a: Counter, b: Counter) -> Counter:
    """The labels ``b`` has more of than ``a``."""
    return b - a


__all__ = ["profile", "distance", "missing"]
