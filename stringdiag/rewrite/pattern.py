"""A rule side prepared for matching: views, local types, who reads what, a search plan.

The plan places the pattern's boxes so that each one after the anchor is next to one
already placed: its candidates are then the one or two boxes at a port, not the index.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Callable

from ..errors import DiagError
from ..graph.box import Kind
from ..graph.diagram import Diagram
from .index import key
from .view import view

Step = tuple[int, tuple]  # (pattern box, how to find its candidates)


class Pattern:
    """A rule side prepared for matching: views, local types, consumers, a search plan."""

    def __init__(self, side: Diagram, passing: bool = False):
        self.d = side
        self.boxes = side.topological_boxes()
        if not self.boxes:
            raise DiagError(f"'{side.name}' has no boxes, so there is nothing to match", side.pos)
        self.views = {b: view(side, b) for b in self.boxes}
        self.inputs = list(side.inputs)
        self.outputs = list(side.outputs)
        if not passing:  # a cell's body may pass its carry straight through (``cell.py`` checks it)
            self._check_outputs()
        self.vars = frozenset(side.generics)
        self.node = {b: side.record(b) for b in self.boxes}
        self.keys = {b: (None if self.node[b].var or self.node[b].cell
                         else key(self.node[b], len(self.views[b].ins)))
                     for b in self.boxes}
        self.local = {b: self._local_types(b) for b in self.boxes if self.node[b].kind is not Kind.CONTRACT}
        self.produced = {w: (b, p) for b in self.boxes for p, w in enumerate(self.views[b].outs)}
        self.readers: dict[int, list[tuple[int, int]]] = defaultdict(list)
        for b in self.boxes:
            for p, (w, _) in enumerate(self.views[b].ins):
                self.readers[w].append((b, p))
        self.interior = [w for w in self.produced if w not in set(self.outputs)]
        self._plans: dict[int, list[Step]] = {}

    def _check_outputs(self) -> None:
        """An output that is an input no box reads would leave a match without a wire to name."""
        read = {w for v in self.views.values() for w, _ in v.ins}
        for k, w in enumerate(self.outputs):
            if w in self.inputs and w not in read:
                raise DiagError(f"output {k + 1} of '{self.d.name}' is an input that no box reads, so a match "
                                "cannot say which wire it is; use the rule the other way", self.d.pos)

    def _local_types(self, b: int) -> tuple[list, list]:
        v = self.views[b]
        return ([self.d.local_in_type(b, p) for p in range(len(v.ins))],
                [self.d.local_out_type(b, p) for p in range(len(v.outs))])

    def plan(self, anchor: int, count: Callable[[int], int]) -> list[Step]:
        """An order of the boxes: the anchor, then each box next to one already placed
        (its producer first, a single candidate), a fresh anchor only between components."""
        if anchor in self._plans:
            return self._plans[anchor]
        order: list[Step] = [(anchor, ("anchor",))]
        placed = {anchor}
        while len(placed) < len(self.boxes):
            step = self._producer_step(order, placed) or self._consumer_step(order, placed)
            if step is None:  # a new component
                rest = [b for b in self.boxes if b not in placed]
                step = (min(rest, key=count), ("anchor",))
            order.append(step)
            placed.add(step[0])
        self._plans[anchor] = order
        return order

    def _producer_step(self, order: list[Step], placed: set) -> Step | None:
        """The producer of something a placed box reads: found from the wire, one candidate."""
        for b, _ in order:
            for w, _axes in self.views[b].ins:
                pr = self.produced.get(w)
                if pr is not None and pr[0] not in placed:
                    return pr[0], ("producer", w, pr[1])
        return None

    def _consumer_step(self, order: list[Step], placed: set) -> Step | None:
        """Another reader of a wire a placed box touches: found at that wire's port."""
        for b, _ in order:
            v = self.views[b]
            touched = [w for w, _ in v.ins] + list(v.outs)
            for w, (r, port) in ((w, rp) for w in touched for rp in self.readers.get(w, ())):
                if r not in placed:
                    return r, ("consumer", w, port)
        return None


__all__ = ["Pattern", "Step"]
