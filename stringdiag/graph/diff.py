"""What a child diagram changes of its parent: the boxes of the child outside a common
structure the two share, for a family tree's picture (``stringdiag taxonomy``).

The method, simple on purpose (a maximum common subgraph is NP-hard; this is a greedy
approximation of one, grown from the two boundaries):

- a box is known by its *label*: its class and name (``learn Q``, ``fixed where``, a
  product ``contract`` with its number of factors), its SIMD depth, and its number of
  input and output ports;
- the i-th input wires of the two diagrams correspond, and so do the i-th outputs;
- *forward from the inputs*: in topological order, a box of the child whose every input
  wire corresponds to a wire of the parent, port for port, corresponds to the first
  unmatched box of the parent with the same label reading those wires on the same ports
  (a box with no inputs, such as a mask, is matched only backward); its output wires
  then correspond port for port;
- *backward from the outputs*: in reverse topological order, an unmatched box of the
  child that makes a corresponding wire (on the same port) corresponds to the parent's
  box making it if their labels agree; then its input wires correspond port for port;
- *by name*: a learnable or abstract box left unmatched whose label is that of exactly one
  unmatched box of the parent corresponds to it (one name is one function: weight
  sharing is semantics), wherever it sits (past an inserted box, say);

and again from the wires these give, until nothing more corresponds. The changed boxes
are those of the child left unmatched.
"""
from __future__ import annotations

from typing import Hashable

from .box import Kind
from .hypergraph import Hypergraph

def label(d: Hypergraph, b: int) -> tuple:
    """What must agree for two boxes to be the same box in parent and child."""
    i = d.record(b).identity()
    name = i.op if i.kind is not Kind.CONTRACT else len(d.box_inputs(b))
    return i.kind, name, len(i.simd), len(d.box_inputs(b)), len(d.box_outputs(b))


class _Matching:
    def __init__(self, parent: Hypergraph, child: Hypergraph):
        self.parent, self.child = parent, child
        self.boxes: dict[int, int] = {}  # child box -> parent box
        self.wires: dict[int, int] = {}  # child wire -> parent wire

    def pair(self, cb: int, pb: int) -> None:
        self.boxes[cb] = pb
        for cw, pw in zip(self.child.box_outputs(cb), self.parent.box_outputs(pb)):
            self.wires.setdefault(cw, pw)
        for (cw, _ca), (pw, _pa) in zip(self.child.box_inputs(cb), self.parent.box_inputs(pb)):
            self.wires.setdefault(cw, pw)

    def forward(self) -> None:
        child, parent, taken = self.child, self.parent, set(self.boxes.values())
        for cb in child.topological_boxes():
            ins = [w for w, _axes in child.box_inputs(cb)]
            if cb in self.boxes or not ins or any(w not in self.wires for w in ins):
                continue
            want = [self.wires[w] for w in ins]
            for pw_reader, port in parent.consumers(want[0]):
                if pw_reader in taken or port != 0 or label(parent, pw_reader) != label(child, cb):
                    continue
                if [w for w, _axes in parent.box_inputs(pw_reader)] == want:
                    self.pair(cb, pw_reader)
                    taken.add(pw_reader)
                    break

    def backward(self) -> None:
        child, parent, taken = self.child, self.parent, set(self.boxes.values())
        for cb in reversed(child.topological_boxes()):
            if cb in self.boxes:
                continue
            for port, cw in enumerate(child.box_outputs(cb)):
                pw = self.wires.get(cw)
                pb = parent.producer(pw) if pw is not None else None
                if pb is None or pb in taken or label(parent, pb) != label(child, cb) \
                        or parent.box_outputs(pb)[port] != pw:
                    continue
                self.pair(cb, pb)
                taken.add(pb)
                break


    def anchor(self) -> None:
        """A learnable or abstract box is known by its name (two uses of one name are one
        function): one left on each side with the same label correspond, wherever they are."""
        left: dict[Hashable, tuple[list, list]] = {}
        taken = set(self.boxes.values())
        for side, d, skip in ((0, self.child, self.boxes), (1, self.parent, taken)):
            for b in d.boxes():
                if b not in skip and d.record(b).kind.is_hole:  # known by its name alone
                    left.setdefault(label(d, b), ([], []))[side].append(b)
        for cbs, pbs in left.values():
            if len(cbs) == 1 and len(pbs) == 1:
                self.pair(cbs[0], pbs[0])


def changed_boxes(parent: Hypergraph, child: Hypergraph) -> frozenset[int]:
    """The boxes of ``child`` that no box of ``parent`` corresponds to (module docstring)."""
    m = correspondence(parent, child)
    return frozenset(b for b in child.boxes() if b not in m.boxes)


def correspondence(parent: Hypergraph, child: Hypergraph) -> _Matching:
    """The greedy common structure itself: ``boxes`` (child box -> parent box) and ``wires``."""
    m = _Matching(parent, child)
    for cw, pw in zip(child.inputs, parent.inputs):
        m.wires[cw] = pw
    for cw, pw in zip(child.outputs, parent.outputs):
        m.wires.setdefault(cw, pw)
    while True:
        before = len(m.boxes)
        m.forward()
        m.backward()
        m.anchor()
        if len(m.boxes) == before:
            return m
