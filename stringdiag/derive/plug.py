"""Plugging an input in where a hidden state was: App. B.1's one rewiring (Khatri et al.
(2024): "one rewiring step that involves a structural change, in which we plug inputs into
what were originally the hidden states passed into the RNN-decoder cells"; Sec. 3.1:
"Feeding in the encoder input itself as the queries obtains self-attention").

``plug x into Init``: the wire ``w`` (named, or the one output of the box named) holds one
state, copied to every step of a decoder whose loop has become a SIMD box over positions
``t``. After the step, step ``i`` reads row ``i`` of the input ``x`` ([n, ...], rows of
``w``'s type) in its place: every box downstream of ``w`` is done once per position ``i``
(a SIMD index over ``n`` put around it), where a broadcast over ``t`` was, position ``i``
is read, and ``t`` becomes ``n``. What made ``w`` and the inputs nothing reads any more go.

The boundary changes (``[s, d], [t, e] -> [t, d]`` becomes ``[s, d] -> [s, d]``), so this
is neither an equation nor a reduction: the step is marked ``≠`` and says what changed.
"""
from __future__ import annotations

from collections.abc import Callable

from ..errors import DiagError
from ..graph.box import Kind
from ..graph.clusters import SimdFrame
from ..graph.diagram import Diagram
from ..graph.multigraph import descendants
from ..graph.resize import resized
from ..graph.types import Dim, show_type
from .steps import REWIRE, Outcome, drop_dead


def plug(cur: Diagram, name: str, into: str, is_seq: Callable[[str], bool]) -> Outcome:
    """Row ``i`` of the input ``name`` where every decoder step read the state ``into``
    (``is_seq``: whether a dimension is a sequence length, the only kind the step renames)."""
    x, w = _input(cur, name), _state(cur, into)
    n, row = cur.wire_type(x)[0], cur.wire_type(x)[1:]
    if cur.wire_type(w) != row:
        raise DiagError(f"a row of '{name}' is {show_type(row)} but '{into}' is {show_type(cur.wire_type(w))}")
    cone = _cone(cur, w)
    positions = {cur.wire_type(o)[0] for o in cur.outputs if o in cone and cur.wire_type(o)}
    if not positions:
        raise DiagError(f"no output of the diagram is made step by step from '{into}': nothing to plug into")
    sub = {p.name: n for p in positions if p != n and p.name is not None and is_seq(p.name)}
    out = resized(cur, sub) if sub else cur.copy()
    _lift(out, x, w, cone, n)
    _splice_identities(out, cone)
    dropped = _drop_unread(out)
    said = ", ".join(f"{k} := {v}" for k, v in sub.items())
    gone = f"; no longer read: {', '.join(dropped)}" if dropped else ""
    return Outcome(out, REWIRE, f"a boundary change, not a reduction: {cur.signature().split(' : ')[1]} becomes "
                                f"{out.signature().split(' : ')[1]}" + (f" ({said})" if said else "") + gone)


def _input(d: Diagram, name: str) -> int:
    if name not in d.input_names:
        raise DiagError(f"'{name}' is not an input of the diagram (its inputs: {', '.join(d.input_names)})")
    x = d.inputs[d.input_names.index(name)]
    if not d.wire_type(x):
        raise DiagError(f"'{name}' is a scalar: it has no rows to plug in, one per step")
    return x


def _state(d: Diagram, name: str) -> int:
    """The wire named ``name``, or the one output of the one box named ``name``."""
    wires = [w for w in d.wires() if d.wire_label(w) == name]
    boxes = [b for b in d.boxes() if d.record(b).op == name]
    if len(wires) == 1:
        return wires[0]
    if len(boxes) == 1 and len(d.box_outputs(boxes[0])) == 1:
        return d.box_outputs(boxes[0])[0]
    found = f"{len(wires)} wires and {len(boxes)} boxes" if wires or boxes else "no wire or box"
    raise DiagError(f"{found} named '{name}': name the state, a wire or the box making it")


def _cone(d: Diagram, w: int) -> set[int]:
    return descendants(d.graph, w) | {w}


def _lift(d: Diagram, x: int, w: int, cone: set[int], n: Dim) -> None:
    """Every box downstream of ``w`` once per position; ``w`` read from ``x``'s rows (where
    ``w`` is an output of the diagram, the output is ``x``: the state, once per position)."""
    d.outputs[:] = [x if o == w else o for o in d.outputs]
    for b in [b for b in d.topological_boxes() if b in cone]:
        node = d.record(b)
        label = _broadcast(d, b, cone, n)
        if label is None:
            taken = {lab for lab, _ in node.simd} | {lab for lab, _ in node.summed}
            label = next(c for c in ("i", "i'", "i''", "p", "q") if c not in taken)
            d.update(b, simd=((label, n), *node.simd), display={**(node.display or {}), label: label},
                      clusters=(SimdFrame(("plug", 0), label, n, False), *node.clusters))
            for o in d.box_outputs(b):
                d.update(o, type=(n, *d.wire_type(o)))
        for port, (v, axes) in enumerate(d.box_inputs(b)):
            if v in cone:
                d.rewire(b, port, x if v == w else v, (label, *axes))


def _broadcast(d: Diagram, b: int, cone: set[int], n: Dim) -> str | None:
    """The index of a broadcast over the positions (a reindex copying one state to every
    step): there, the step reads its own position instead."""
    node = d.record(b)
    if node.kind is not Kind.REINDEX:
        return None
    used = {a for _, axes in d.box_inputs(b) for a in axes}
    free = [lab for lab, dim in node.simd if dim == n and lab not in used]
    return free[0] if free else None


def _splice_identities(d: Diagram, cone: set[int]) -> None:
    """A reindex that now hands its input on unchanged is no box at all."""
    for b in [b for b in list(d.boxes()) if b in cone and d.record(b).kind is Kind.REINDEX]:
        (v, axes), = d.box_inputs(b)
        (o,) = d.box_outputs(b)
        if tuple(axes) != tuple(lab for lab, _ in d.record(b).simd) or d.wire_type(v) != d.wire_type(o):
            continue
        d.replace_uses(o, v)
        d.remove_box(b)


def _drop_unread(d: Diagram) -> list[str]:
    """Boxes nothing reads, then inputs nothing reads: they leave the diagram."""
    drop_dead(d)
    dropped = []
    for k in reversed(range(len(d.inputs))):
        w = d.inputs[k]
        if not d.consumers(w) and w not in d.outputs:
            dropped.append(d.input_names[k])
            del d.inputs[k], d.input_names[k]
            d.remove_wire(w)
    return dropped[::-1]


__all__ = ["plug"]
