"""A box as matching sees it.

Indices are compared by position, never by name, and a contraction's local axes are read
as iterated labels (``y[i] = sum_j a[i, j] * v[j]`` is ``y[i, c] = sum_j a[i, j] * v[j, c]``),
so the two spellings of one contraction match each other.
"""
from __future__ import annotations

from ..syntax.records import Record

from ..graph.box import Kind
from ..graph.diagram import Diagram
from ..graph.types import Dim

LOCAL = "\u00b7"  # label prefix standing for a contraction's local axis k: "·k"
Perm = tuple[int, ...]  # pattern wire axis p -> target wire axis perm[p]


class View(Record):
    """A box with a contraction's local axes turned into iterated labels."""

    labels: tuple[tuple[str, Dim], ...]  # iterated labels, in the order of the output's axes
    summed: tuple[tuple[str, Dim], ...]
    ins: tuple[tuple[int, tuple], ...]   # (wire, axes): a label, or an int (a local axis)
    outs: tuple[int, ...]
    layouts: tuple[tuple, ...]           # per output: its axes, as labels or local ints
    scan: bool


def view(d: Diagram, b: int) -> View:
    """The box ``b`` of ``d`` as matching and rewriting read it."""
    node = d.record(b)
    simd, summed = tuple(node.simd), tuple(node.summed)
    ins, outs = d.box_inputs(b), tuple(d.box_outputs(b))
    if node.kind is Kind.CONTRACT:
        extra = tuple((f"{LOCAL}{k}", dim) for k, dim in enumerate(d.local_out_type(b, 0)))
        ins = [(w, tuple(f"{LOCAL}{a}" if isinstance(a, int) else a for a in axes)) for w, axes in ins]
        labels = simd + extra
        return View(labels, summed, tuple(ins), outs, (tuple(lab for lab, _ in labels),), False)
    scan = bool(node.scan)
    layouts = []
    for port, w in enumerate(outs):
        labs = [lab for lab, _ in simd][: len(simd) - (1 if scan and port == 0 else 0)]
        layouts.append(tuple(labs) + tuple(range(len(d.wire_type(w)) - len(labs))))
    return View(simd, summed, tuple(ins), outs, tuple(layouts), scan)


__all__ = ["LOCAL", "Perm", "View", "view"]
