"""SIMD context: the indices a match runs inside (heads, layers, a query index).

Target boxes may carry more SIMD labels than the pattern's. The extra ones are linked to the
wire axes they index, and linked labels are one index, a *slot*, shared through the matched
wires; the rewrite prepends the slots to the boxes it inserts, so a rule written without
SIMD applies inside any SIMD box.
"""
from __future__ import annotations

from ..graph.types import Dim
from .conditions import iterates_once
from .index import Index
from .view import LOCAL, Perm


class Slots:
    """The context labels of a match's boxes and the wire axes they index, merged by
    union-find into slots, numbered in the order the pattern's boxes first iterate them."""

    def __init__(self, links: tuple):
        self.parent: dict = {}
        self.number: dict = {}  # root -> slot
        for a, b in links:
            ra, rb = self.find(a), self.find(b)
            if ra != rb:
                self.parent[ra] = rb

    def find(self, x):
        parent = self.parent
        root = x
        while parent.get(root, root) != root:
            root = parent[root]
        while parent.get(x, x) != root:
            parent[x], x = root, parent[x]
        return root

    def count(self, boxes: list[int], ctx: dict[int, tuple[str, ...]]) -> bool:
        """Number the slots; ``False`` when a box would iterate one slot twice."""
        for tb in boxes:
            roots = [self.find(("b", tb, lab)) for lab in ctx[tb]]
            if not iterates_once(roots):
                return False
            for r in roots:
                self.number.setdefault(r, len(self.number))
        return True

    def shown(self, ix: Index, ctx: dict[int, tuple[str, ...]]) -> tuple[list, dict]:
        """Each slot's name and dimension, and each matched box's slots in its SIMD order."""
        slots: list[tuple[str, Dim]] = [("", Dim.const(0))] * len(self.number)
        box_slots = {}
        for tb, labs in ctx.items():
            dims = dict(ix.view(tb).labels)
            display = (ix.d.record(tb).display or {})
            box_slots[tb] = ks = tuple(self.number[self.find(("b", tb, lab))] for lab in labs)
            for lab, k in zip(labs, ks):
                if not slots[k][0]:  # a contraction's local axis is shown by its dimension
                    slots[k] = (display.get(lab) or (lab if not lab.startswith(LOCAL) else (dims[lab].name or "c")),
                                dims[lab])
        return slots, box_slots

    def axes(self, w: int, perm: Perm, n: int) -> tuple:
        """The context axes of a boundary wire of ``n`` axes, as ``(axis, slot)``."""
        out = []
        for q in range(n):
            r = self.find(("w", w, q)) if q not in perm else None
            if r is not None and r in self.number:
                out.append((q, self.number[r]))
        return tuple(out)


__all__ = ["Slots"]
