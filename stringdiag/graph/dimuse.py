"""Which fixed dimensions a diagram uses, and how: as an axis of some wire (a width, which a
recipe may size by a rule of its own, as App. C sizes every width in a head by the head's),
or only as a count (a generic argument such as a window or a number of global tokens, a repeat
count, a size inside a constant), which no width rule may size. The same uses as the
lowering's check that every fixed dimension has a size (lower.lower.Lowering._check_dims)."""
from __future__ import annotations

from dataclasses import dataclass

from .box import Kind
from ..errors import DiagError
from . import constants
from .diagram import Diagram


@dataclass(frozen=True)
class DimUse:
    widths: tuple[str, ...]   # fixed dimensions some wire has as an axis, in declaration order
    counts: tuple[str, ...]   # fixed dimensions used only as generic arguments or repeat counts


def fixed_dims_used(diagram: Diagram) -> DimUse:
    """The fixed dimensions of ``diagram`` with every definition it uses opened (as written when
    it cannot be opened)."""
    prog = diagram.program
    try:
        d = diagram.expand()
    except DiagError:
        d = diagram
    wires: set[str] = set()
    others: set[str] = set()
    for w in d.wires():
        for dim in d.wire_type(w):
            wires |= dim.names()
    for b in d.boxes():
        node = d.record(b)
        for _, dim in node.generics:
            others |= dim.names()
        if node.kind is Kind.CONST:  # a size inside a constant: r / n
            for dim in constants.dims_in(node.value):
                others |= dim.names()
        if node.repeat is not None:
            others |= node.repeat.count.names()
    if prog is None:
        return DimUse((), ())
    order = list(prog.dims) + (list(prog.prelude.dims) if prog.prelude else [])

    def fixed(names: set[str]) -> tuple[str, ...]:
        kept = [n for n in names if (decl := prog.lookup_dim(n)) is not None and decl.kind == "fixed"]
        return tuple(sorted(kept, key=lambda n: (order.index(n) if n in order else len(order), n)))

    return DimUse(fixed(wires), fixed(others - wires))
