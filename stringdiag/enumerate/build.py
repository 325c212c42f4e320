"""A wiring made a diagram with the composition API (``graph/compose.py``), bottom-up.

The diagram grows one occurrence at a time, in an order where producers come first: a
wiring routes the values made so far (the input, copied, and unread outputs) to the next
generator and the rest past it, and ``use`` gives the occurrence weights of its own. So every
member is an ordinary diagram: it checks, draws, compiles and compares like source text.
"""
from __future__ import annotations

from ..graph import compose as C
from ..graph.diagram import Diagram
from .space import X, Generator, Wiring


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


__all__ = ["build"]
