"""Which fixed dimensions a diagram uses, and how: as an axis of some wire (a width, which a
recipe may size by a rule of its own, as App. C sizes every width in a head by the head's),
or only as a count (a generic argument such as a window or a number of global tokens, a repeat
count, a size inside a constant), which no width rule may size. The same uses as the
lowering's check that every fixed dimension has a size (lower.lower.Lowering._check_dims).

The uses are those of the diagram with every definition it uses opened (scanned cells and
``repeat`` boxes stay boxes, as ``expand`` leaves them), found without opening it: each
definition's body is read once, in its own names, and a caller places a callee's names with its
generics bound. Linear in the source, however many times the definitions nest (the expansion
of 21 definitions each using the next twice has 2^20 boxes)."""
from __future__ import annotations

from typing import Mapping

from ..syntax.records import Record
from .box import Kind
from . import constants
from .diagram import Diagram
from .hypergraph import per_graph_cache
from .types import Dim, DimKind


class DimUse(Record):
    widths: tuple[str, ...]   # fixed dimensions some wire has as an axis, in declaration order
    counts: tuple[str, ...]   # fixed dimensions used only as generic arguments or repeat counts


class _Names(Record):
    """The dimension names one definition's expansion mentions, in its own names."""

    wires: frozenset = frozenset()   # as an axis of a wire
    others: frozenset = frozenset()  # as a generic argument, a repeat count, a size in a constant

    def bound(self, sub: Mapping[str, Dim]) -> "_Names":
        return _Names(bound_names(self.wires, sub), bound_names(self.others, sub))


def fixed_dims_used(diagram: Diagram) -> DimUse:
    """The fixed dimensions of ``diagram`` with every definition it uses opened."""
    prog = diagram.program
    if prog is None:
        return DimUse((), ())
    found = _names(diagram)
    order = list(prog.dims) + (list(prog.prelude.dims) if prog.prelude else [])

    def fixed(names: set[str]) -> tuple[str, ...]:
        kept = [n for n in names if (decl := prog.lookup_dim(n)) is not None and decl.kind is DimKind.FIXED]
        return tuple(sorted(kept, key=lambda n: (order.index(n) if n in order else len(order), n)))

    return DimUse(fixed(found.wires), fixed(found.others - found.wires))


def dims_named(diagram: Diagram) -> frozenset:
    """Every dimension name ``diagram`` mentions, whatever its kind, its definitions opened."""
    found = _names(diagram)
    return found.wires | found.others


@per_graph_cache(reentry=_Names())  # a definition cannot use itself; guard anyway
def _names(d) -> _Names:
    """What ``d`` mentions, its definition boxes opened (each definition read once: cached)."""
    wires = {n for w in d.wires() for dim in d.wire_type(w) for n in dim.names()}
    others: set[str] = set()
    for b in d.boxes():
        node = d.record(b)
        if node.kind is Kind.DIAGRAM and node.ref is not None and not node.scan and node.repeat is None:
            inner = _names(node.ref).bound(dict(node.generics))  # opened: the box itself is gone
            wires |= inner.wires
            others |= inner.others
            continue
        others |= {n for _, dim in node.generics for n in dim.names()}
        if node.kind is Kind.CONST:  # a size inside a constant: r / n
            others |= {n for dim in constants.dims_in(node.value) for n in dim.names()}
        if node.repeat is not None:
            others |= node.repeat.count.names()
    return _Names(frozenset(wires), frozenset(others))


def bound_names(names: frozenset, sub: Mapping[str, Dim]) -> frozenset:
    """Names of a callee seen from its caller: its generics replaced by what they are bound to."""
    if not sub or not names & sub.keys():
        return names
    return frozenset(m for n in names for m in (sub[n].names() if n in sub else (n,)))


__all__ = ["DimUse", "fixed_dims_used", "dims_named", "bound_names"]
