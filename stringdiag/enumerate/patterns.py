"""A rule side read as a pattern over wirings: a quick test that it cannot match a member.

Building a member as a diagram and running the engine's matcher on it costs milliseconds; most
members hold no occurrence of a reduction's larger side. When every box of a rule side is a use
of a defined diagram, the side is a small wiring pattern, and a match in the built diagram is
in particular a map of its boxes to occurrences of the same generators, port for port, each
wire of the side to one value of the member. :func:`may_match` looks for such a map; only where
one exists is the engine asked (it decides, with every condition of its own). The test is
necessary, never sufficient: distinct inputs of the side may meet one value, and what else
reads an inner wire is not looked at.
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import permutations, product

from ..graph.box import Kind
from ..graph.diagram import Diagram
from .space import X, Generator, Wiring


@dataclass(frozen=True)
class Shape:
    """The side's boxes: (generator name, sources), a source ``("in", i)`` for its ``i``-th
    input or ``(box, port)`` for another box's output."""

    boxes: tuple[tuple[str, tuple], ...]


def shape(d: Diagram) -> Shape | None:
    """The side as a :class:`Shape`; ``None`` when some box is not a plain use of a diagram."""
    boxes = list(d.boxes())
    if not boxes or any(d.record(b).kind is not Kind.DIAGRAM or d.record(b).simd for b in boxes):
        return None
    pos = {b: k for k, b in enumerate(boxes)}

    def src(wire: int):
        if wire in d.inputs:
            return ("in", d.inputs.index(wire))
        b = d.producer(wire)
        return None if b is None else (pos[b], d.box_outputs(b).index(wire))

    out = tuple((d.record(b).op, tuple(src(w) for w, _ in d.box_inputs(b))) for b in boxes)
    return None if any(s is None for _, srcs in out for s in srcs) else Shape(out)


def may_match(s: Shape, w: Wiring, gens: list[Generator]) -> bool:
    """Is there a map of the side's boxes to distinct occurrences of ``w`` of the same
    generators that keeps every wire one value?"""
    names = [gens[g].name for g, _ in w.occurrences]
    choices = [[k for k, n in enumerate(names) if n == op] for op, _ in s.boxes]
    for image in product(*choices):
        if len(set(image)) == len(image) and _consistent(s, w, image):
            return True
    return False


def _consistent(s: Shape, w: Wiring, image: tuple[int, ...]) -> bool:
    bound: dict[int, tuple] = {}
    for (_, srcs), k in zip(s.boxes, image):
        for q, src in enumerate(srcs):
            have = w.occurrences[k][1][q]
            if src[0] == "in":
                if bound.setdefault(src[1], have) != have:
                    return False
            elif have == X or have != (image[src[0]], src[1]):
                return False
    return True


__all__ = ["Shape", "shape", "may_match"]
