"""A rule's scanned cell in the other forms a user may write the same loop in.

A scan carries its state at port 0 and reads its per-step inputs at ports 1..; which per-step input
is which, which per-step output is which, and the order of the state's axes (``S[k, d]`` or
``S[d, k]``) are the user's choice and do not change the function. A rule writes one choice. Here
the rule's side is rewritten into each other choice (:func:`cell_forms`), each with a sentence
saying which, so that the matcher (reading ports and axes in order) finds the user's scan whatever
they chose, and the derivation's table says which form matched. Each form is a relabelling of the
same side (the same boxes and weights), so a match of it is a match of the rule.
"""
from __future__ import annotations

import itertools
from ..syntax.records import Record
from typing import Iterator

from ..graph.box import Kind
from ..graph.diagram import Diagram

MAX_FORMS = 240  # forms tried per side (inputs of a 5-input cell in every order, state both ways)


class Form(Record):
    """One choice: input ``k`` of the rule's cell is read at port ``ins[k]``, output ``k`` written
    at port ``outs[k]``, the state's axis ``k`` is the rule's axis ``state[k]``, and the initial
    state's producer reads its inputs in the order ``init`` (a product: any order)."""

    ins: tuple[int, ...]
    outs: tuple[int, ...]
    state: tuple[int, ...]
    init: tuple[int, ...]

    def plain(self) -> bool:
        return all(p == tuple(range(len(p))) for p in (self.ins, self.outs, self.state, self.init))


def cell_forms(side: Diagram) -> list[tuple[Diagram, str]]:
    """The side with its (first) scanned cell pattern in every other form, and what each says."""
    scans = [b for b in side.boxes() if side.record(b).cell and side.record(b).ref is not None]
    if not scans:
        return []
    b = scans[0]  # one scanned cell per side (as the shipped rules have)
    out = []
    for form in itertools.islice(_choices(side, b), MAX_FORMS):
        made = _build(side, b, form)
        if made is not None:
            out.append((made, _describe(side.record(b).ref, form)))
    return out


def _choices(side: Diagram, b: int) -> Iterator[Form]:
    cell = side.record(b).ref
    ins = [(0, *p) for p in itertools.permutations(range(1, len(cell.inputs)))]
    outs = [(0, *p) for p in itertools.permutations(range(1, len(cell.outputs)))]
    rank = len(cell.input_types[0])
    states = list(itertools.permutations(range(rank))) if rank <= 3 else [tuple(range(rank))]
    init = _init(side, b)
    inits = list(itertools.permutations(range(len(side.box_inputs(init))))) if init is not None else [()]
    for s, i, o, q in itertools.product(states, inits, outs, ins):  # the input orders vary fastest
        form = Form(q, o, s, i)
        if not form.plain():
            yield form


def _init(side: Diagram, b: int) -> int | None:
    """The box making the scan's initial state, where it is a product (its inputs in any order)."""
    p = side.producer(side.box_inputs(b)[0][0])
    if p is None:
        return None
    node = side.record(p)
    symmetric = node.kind is Kind.CONTRACT or (node.kind is Kind.FIXED and node.op in ("mul", "add"))
    return p if symmetric and len({w for w, _ in side.box_inputs(p)}) > 1 else None


def _build(side: Diagram, b: int, form: Form) -> Diagram | None:
    """The side in ``form``; None where the state's axes cannot be reordered (made by a box with
    local axes, or a final state the side returns)."""
    out = side.copy()
    body = side.record(b).ref.copy()
    if form.init and form.init != tuple(range(len(form.init))):
        init = _init(side, b)
        assert init is not None  # (a form reorders only a product's inputs)
        out.permute_inputs(init, form.init)
    if form.state != tuple(range(len(form.state))):
        if not _turn_state(body, form.state) or side.box_outputs(b)[0] in side.outputs:
            return None
    names = list(body.input_names)
    body.inputs = [body.inputs[form.ins.index(port)] for port in range(len(form.ins))]
    if len(names) == len(form.ins):
        body.input_names = [names[form.ins.index(port)] for port in range(len(form.ins))]
    body.outputs = [body.outputs[form.outs.index(port)] for port in range(len(form.outs))]
    node = out.record(b)._replace(ref=body)
    ins = out.box_inputs(b)
    w0, axes0 = ins[0]
    inv = {old: new for new, old in enumerate(form.state)}
    ins[0] = (w0, tuple(inv[a] if isinstance(a, int) else a for a in axes0))  # the same wire, read turned
    ins = [ins[form.ins.index(port)] for port in range(len(ins))]
    olds = out.box_outputs(b)
    news = [_turned_wire(out, olds[0], form.state, len(out.wire_type(olds[0])) - len(form.state))]
    news += [olds[form.outs.index(port)] for port in range(1, len(olds))]
    out.remove_box(b, outputs=False)
    out.add(node, ins, news, b)  # the same box id: a search seeded with it still holds
    _retire(out, olds[0], news[0], form.state, len(out.wire_type(olds[0])) - len(form.state))
    return out


def _turned_wire(d: Diagram, w: int, perm: tuple[int, ...], lead: int) -> int:
    """A new wire of ``w``'s type with its last axes (after ``lead`` context axes) in ``perm``'s order."""
    if perm == tuple(range(len(perm))):
        return w
    t = d.wire_type(w)
    return d.add_wire(tuple(t[:lead]) + tuple(t[lead + k] for k in perm), name=d.wire_label(w))


def _retire(d: Diagram, old: int, new: int, perm: tuple[int, ...], lead: int) -> None:
    """Every reader of ``old`` reads ``new`` (its last axes in ``perm``'s order), and ``old`` goes."""
    if old == new:
        return
    full = tuple(range(lead)) + tuple(lead + k for k in perm)
    for r, port in d.consumers(old):
        axes = d.box_inputs(r)[port][1]
        d.rewire(r, port, new, tuple(axes[full[k]] for k in range(len(full))))
    d.inputs[:] = [new if x == old else x for x in d.inputs]
    d.outputs[:] = [new if x == old else x for x in d.outputs]
    d.remove_wire(old)


def _turn_state(body: Diagram, perm: tuple[int, ...]) -> bool:
    """The cell with its state's axes in ``perm``'s order, in and out: the input read turned, the
    box making the new state iterating its labels in the new order. False where it cannot be."""
    s, s2 = body.inputs[0], body.outputs[0]
    if s2 != s:
        p = body.producer(s2)
        if p is None or len(body.box_outputs(p)) != 1 or body.local_out_type(p, 0) or body.record(p).scan:
            return False
    new = _turned_wire(body, s, perm, 0)
    _retire(body, s, new, perm, 0)
    if s2 == s:
        return True
    assert p is not None  # (made above, where s2 != s)
    node = body.record(p)
    ins = body.box_inputs(p)
    made = _turned_wire(body, s2, perm, 0)
    body.remove_box(p, outputs=False)
    body.add(node._replace(simd=tuple(node.simd[k] for k in perm)), ins, [made], p)
    _retire(body, s2, made, perm, 0)
    return True


def _describe(cell: Diagram, form: Form) -> str:
    """What the form says, in the rule cell's own names."""
    names = list(cell.input_names) if len(cell.input_names) == len(cell.inputs) else \
        [f"input {k + 1}" for k in range(len(cell.inputs))]
    parts = []
    if form.ins != tuple(range(len(form.ins))):
        parts.append("its inputs in the order (" + ", ".join(names[form.ins.index(p)] for p in range(len(form.ins)))
                     + ")")
    if form.outs != tuple(range(len(form.outs))):
        parts.append("its per-step outputs in the order ("
                     + ", ".join(f"output {form.outs.index(p)}" for p in range(1, len(form.outs))) + ")")
    if form.state != tuple(range(len(form.state))):
        parts.append(f"its state's axes in the order ({', '.join(f'axis {k + 1}' for k in form.state)})")
    if form.init and form.init != tuple(range(len(form.init))):
        parts.append("its initial state's factors in the order ("
                     + ", ".join(f"factor {form.init.index(p) + 1}" for p in range(len(form.init))) + ")")
    return "the rule's cell matched with " + " and ".join(parts)


__all__ = ["Form", "cell_forms", "MAX_FORMS"]
