"""A wiring made a diagram with the composition API (``graph/compose.py``), bottom-up.

The diagram grows one occurrence at a time, in an order where producers come first: a
wiring routes the values made so far (the input, copied, and unread outputs) to the next
generator and the rest past it, and ``use`` gives the occurrence weights of its own. So every
member is an ordinary diagram: it checks, draws, compiles and compares like source text.
"""
from __future__ import annotations

from ..graph.box import Kind
from ..graph import compose as C
from ..graph.diagram import Diagram
from .space import X, Generator, Wiring, canonical


def build(w: Wiring, gens: list[Generator], name: str) -> Diagram:
    """The diagram of a wiring: input the stream, output occurrence ``root``'s value."""
    program = gens[0].defn.program
    stream = gens[0].ins[0]
    order = w.topological()
    last_read = _last_reads(w, order)
    d = C.identity([stream], program=program)
    held: list[tuple] = [X]  # the value on each output wire of d, in order
    for step, k in enumerate(order):
        g, srcs = w.occurrences[k]
        gen = gens[g]
        keep = [v for v in held if last_read.get(v, -1) > step]  # still read later (or the output)
        picks = [held.index(s) for s in srcs] + [held.index(v) for v in keep]
        types = [_type(v, w, gens, stream) for v in held]
        route = C.wiring(types, picks, program=program)
        rest = C.identity([_type(v, w, gens, stream) for v in keep], program=program)
        d = C.then(C.then(d, route), C.tensor(C.use(gen.defn), rest))
        held = [(k, p) for p in range(len(gen.outs))] + keep
    final = C.wiring([_type(v, w, gens, stream) for v in held], [held.index(w.root)], program=program)
    d = C.then(d, final)
    d.name = name
    d.input_names = ["x"]
    return d


def _last_reads(w: Wiring, order: list[int]) -> dict:
    """For each value, the last step (position in ``order``) that reads it; the output
    is read after the last step."""
    last: dict = {}
    for step, k in enumerate(order):
        for s in w.occurrences[k][1]:
            last[s] = step
    last[w.root] = len(order)
    return last


def _type(v: tuple, w: Wiring, gens: list[Generator], stream):
    if v == X:
        return stream
    k, p = v
    return gens[w.occurrences[k][0]].outs[p]



def wiring_of(d: Diagram, gens: list[Generator]) -> Wiring | None:
    """The wiring a diagram is, read back (the inverse of :func:`build`), in canonical
    numbering; ``None`` where ``d`` is not a member: one input and one output, every box a
    use of one of the generators, every box feeding the output."""
    index = {g.name: k for k, g in enumerate(gens)}
    if len(d.inputs) != 1 or len(d.outputs) != 1:
        return None
    boxes = list(d.boxes())
    if any(d.record(b).kind is not Kind.DIAGRAM or d.record(b).op not in index or d.record(b).simd for b in boxes):
        return None
    pos = {b: k for k, b in enumerate(boxes)}

    def src(wire: int):
        if wire == d.inputs[0]:
            return X
        b = d.producer(wire)
        return None if b is None else (pos[b], d.box_outputs(b).index(wire))

    occ = [(index[d.record(b).op], tuple(src(w) for w, _ in d.box_inputs(b))) for b in boxes]
    root = src(d.outputs[0])
    if root is None or root == X or any(s is None for _, srcs in occ for s in srcs):
        return None
    w = canonical(occ, root)
    return w if w.size == len(occ) else None  # a box the output does not read: not a member


__all__ = ["build", "wiring_of"]
