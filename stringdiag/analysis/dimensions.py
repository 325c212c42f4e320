"""The dimensions a compiled module needs sizes for: the names algebra of the fold."""
from __future__ import annotations

from typing import Iterable

from ..graph.box import Kind
from ..graph.constants import dims_in
from ..graph.diagram import Diagram
from ..graph.hypergraph import repeated
from .fold import Algebra, Site, fold

Needs = dict  # dimension name -> the definition that mentions it (whose program declares it)


def _mentioned(x: Diagram) -> Iterable[str]:
    """The dimension names a body's wires, SIMD boxes, sums, generics' values and constants mention."""
    for w in x.wires():
        for dim in x.wire_type(w):
            yield from sorted(dim.names())
    for b in x.boxes():
        node = x.record(b)
        for _, dim in (*node.simd, *node.summed, *node.generics):
            yield from sorted(dim.names())
        if repeated(node):
            yield from sorted(node.count.names())
        if node.kind is Kind.CONST:  # s * total / r
            for dim in dims_in(node.value):
                yield from sorted(dim.names())


class NamesAlgebra(Algebra[Needs, Needs]):
    """Per definition, the names it and its callees mention, less its own generics (whoever
    uses it binds them), except for ``top``, whose generics the module needs."""

    def __init__(self, top: Diagram):
        self.top = top

    def start(self, x: Diagram) -> Needs:
        return dict.fromkeys(_mentioned(x), x)

    def call(self, acc: Needs, x: Diagram, site: Site, callee: Needs) -> None:
        for n, owner in callee.items():
            acc.setdefault(n, owner)

    def finish(self, acc: Needs, x: Diagram) -> Needs:
        bound = () if x is self.top else x.generics
        return {n: owner for n, owner in acc.items() if n not in bound}


def dimensions(d: Diagram) -> dict[str, Diagram]:
    """Every dimension the compiled module of ``d`` needs a size for (those of ``d``'s own
    wires first), each with the definition that mentions it, whose program declares it.

    A definition's generics are bound by whoever uses it, so they are not needed, except
    the top diagram's own. Scanned bodies count (the compiler lowers them too)."""
    return fold(d, NamesAlgebra(d))[id(d.graph)]
