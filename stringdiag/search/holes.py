"""Specialisations the target suggests: for a learnable or abstract box the target lacks, the
part of the target that stands where it stood, written as the body of a ``specialise`` step.

The two diagrams (every definition opened) are aligned by the greedy common structure of
``graph/diff.py``; the hole's wires then name wires of the target, and the boxes of the target
between the images of its inputs and of its output are its body (``printer.py``). A hole whose
body cannot be read off so gets no candidate.
"""
from __future__ import annotations

from collections import Counter
from typing import Iterator

from ..graph.box import Kind
from ..graph.diagram import Diagram
from ..graph.diff import correspondence
from ..graph.expand import expand
from ..elaborate.loader import prelude
from ..graph.types import Dim
from ..graph.weights import weight_key
from .printer import Region, Unwritable, write_body


def _open(d: Diagram) -> Diagram:
    """Every definition of the user's opened; the prelude's kept (a body calls them by name)."""
    return expand(d, keep=frozenset(prelude().defs))


def ops(d: Diagram) -> Counter:
    """The boxes of ``d`` counted as a body may call them (the prelude's kept closed)."""
    flat = _open(d)
    return Counter((flat.record(b).kind, flat.record(b).op, len(flat.box_inputs(b)), len(flat.record(b).summed))
                   for b in flat.boxes())


def holes(cur: Diagram, target: Diagram) -> list[str]:
    """Names of learnable or abstract boxes of ``cur`` that ``target`` does not use."""
    flat_c, flat_t = _open(cur), _open(target)
    theirs = {flat_t.record(b).op for b in flat_t.boxes()}
    return sorted({flat_c.record(b).op for b in flat_c.boxes()
                   if flat_c.record(b).kind.is_hole and flat_c.record(b).op not in theirs})


def suggestions(cur: Diagram, target: Diagram) -> Iterator[str]:
    """``specialise`` lines for the holes of ``cur``, one per hole whose body can be read off."""
    flat_c, flat_t = _open(cur), _open(target)
    names = holes(cur, target)
    if not names:
        return
    m = correspondence(flat_c, flat_t)
    to_target = {pw: cw for cw, pw in m.wires.items()}
    matched = set(m.boxes)  # target boxes with a counterpart
    for name in names:
        use = next(b for b in flat_c.topological_boxes() if flat_c.record(b).op == name)
        written: set[str] = set()
        for out in _outputs(flat_c, flat_t, use, to_target, matched):
            region = _region(flat_c, flat_t, use, to_target, out)
            if region is None:
                continue
            params = [f"x{k}" for k in range(len(region.inputs))]
            try:
                body = write_body(region, params)
            except Unwritable:
                continue
            if body not in written:
                written.add(body)
                yield f"specialise {name}({', '.join(params)}) := {body}"
    yield from kernels(flat_c, flat_t, names, target)


def projections(cur: Diagram, target: Diagram) -> Iterator[str]:
    """A learnable of ``[a + b] -> [a]`` (or ``-> [b]``) specialised to the projection onto
    that part of its input, where ``cur`` has more weight sets of it than the target (the
    cancellations of an approximator reading a concatenation, Khatri et al. (2024), rewrites
    (5) and (6)); once for every set, and once for each one alone (``at WIRE``)."""
    flat_c, flat_t = _open(cur), _open(target)
    sets_t: dict[str, set] = {}
    for b in flat_t.boxes():
        sets_t.setdefault(flat_t.record(b).op, set()).add(weight_key(flat_t.record(b)))
    uses: dict[str, list[int]] = {}
    for b in flat_c.topological_boxes():
        r = flat_c.record(b)
        if r.kind is Kind.LEARN and r.ref is not None and len(r.ref.ins) == len(r.ref.outs) == 1:
            uses.setdefault(r.op, []).append(b)
    for name, bs in sorted(uses.items()):
        keys = {weight_key(flat_c.record(b)) for b in bs}
        if len(keys) <= len(sets_t.get(name, ())):
            continue
        decl = flat_c.record(bs[0]).ref
        if len(decl.ins[0]) != 1 or len(decl.outs[0]) != 1:
            continue
        (whole,), (part,) = decl.ins[0], decl.outs[0]
        rest = whole - part
        if "-" in str(rest):
            continue
        wheres = [""] + sorted({f" at {lab}" for b in bs for w in flat_c.box_outputs(b)
                                if (lab := flat_c.wire_label(w)) is not None})
        for split, pick in ((f"split<{part}, {rest}>", "u"), (f"split<{rest}, {part}>", "v")):
            for at in wheres:
                yield f"specialise {name}(c) := {{ u, v = {split}(c)\n  return {pick} }}{at}"


def kernels(cur: Diagram, target: Diagram, names: list[str], closed: Diagram | None = None) -> Iterator[str]:
    """A similarity of two vectors of one type, written as the dot product of a feature map
    of each, for every map of one input and one output the target uses and ``cur`` does not
    (``elu1``, ``favor``: linear attention's kernels, Katharopoulos et al. (2020); a map of the
    user's is seen in ``closed``, the target as written): the body
    the target suggests when it has moved the map away from where the hole was."""
    ours = {cur.record(b).op for b in cur.boxes()}
    maps = sorted({r.op for t in (target, closed) if t is not None for b in t.boxes()
                   if (r := t.record(b)).kind in (Kind.FIXED, Kind.DIAGRAM) and r.op not in ours
                   and r.op.isidentifier() and len(t.box_inputs(b)) == 1 and len(t.box_outputs(b)) == 1
                   and not r.generics})
    for name in names:
        use = next(b for b in cur.topological_boxes() if cur.record(b).op == name)
        decl = cur.record(use).ref
        if decl is None or len(decl.ins) != 2 or decl.ins[0] != decl.ins[1] or len(decl.ins[0]) != 1 \
                or decl.outs != ((),):
            continue
        for phi in maps:
            yield f"specialise {name}(p, r) := {{ return sum_f {phi}(p)[f] * {phi}(r)[f] }}"


def trivial(cur: Diagram, target: Diagram) -> Iterator[str]:
    """The identity, the zero map and the units for a hole the target lacks: a body that
    equations then remove (``0 * u`` deleted by ``add_zero_mul`` and the discards, ``1 * z`` by
    ``mul_one``), which the target, lacking the hole, cannot show. The zero is written through
    the hole's inputs, as the library's rules read it; ``0`` or ``1`` alone for a constant."""
    flat_c = _open(cur)
    for name in holes(cur, target):
        use = next(b for b in flat_c.topological_boxes() if flat_c.record(b).op == name)
        decl = flat_c.record(use).ref
        if decl is None or len(decl.outs) != 1:
            continue
        ins, out = list(decl.ins), decl.outs[0]
        params = ", ".join(f"x{k}" for k in range(len(ins)))
        for body in _trivial_bodies(ins, out):
            yield f"specialise {name}({params}) := {{ return {body} }}"


def _trivial_bodies(ins: list, out: tuple) -> list[str]:
    if not ins:
        return ["1", "0"] if out == () else []
    same = [k for k, t in enumerate(ins) if t == out]
    bodies = [f"x{same[0]}"] if len(ins) == 1 and same else []
    if same:
        bodies.append(f"0 * x{same[0]}")
    elif out == () and len(ins) == 2 and ins[0] == ins[1] and len(ins[0]) == 1:
        bodies.append("0 * sum_f x0[f] * x1[f]")
    elif out == () and len(ins) == 1 and len(ins[0]) == 1:
        bodies.append("0 * sum_f x0[f]")
    return bodies


def _outputs(cur: Diagram, target: Diagram, use: int, to_target: dict[int, int], matched: set[int],
             most: int = 4) -> list[int]:
    """Where the hole's output may be in the target: its counterpart, or, where it has none,
    the first few outputs of unmatched boxes downstream of its inputs' counterparts, of its type."""
    outs = cur.box_outputs(use)
    if len(outs) != 1:
        return []
    if outs[0] in to_target:
        return [to_target[outs[0]]]
    ins = [w for w, _ in cur.box_inputs(use)]
    if not ins:  # a constant: the target's unmatched boxes that read nothing, of its type
        return [o for b in target.boxes() if b not in matched and not target.box_inputs(b)
                for o in target.box_outputs(b) if target.wire_type(o) == cur.wire_type(outs[0])][:most]
    if not ins or any(w not in to_target for w in ins):
        return []
    want, todo, seen = cur.wire_type(outs[0]), [to_target[w] for w in ins], set()
    found: list[int] = []
    while todo and len(found) < most:
        w = todo.pop(0)
        for b, _ in target.consumers(w):
            if b in seen or b in matched:
                continue
            seen.add(b)
            for o in target.box_outputs(b):
                if target.wire_type(o) == want:
                    found.append(o)
                todo.append(o)
    return found[:most]


def _region(cur: Diagram, target: Diagram, use: int, to_target: dict[int, int], out: int) -> Region | None:
    rec = cur.record(use)
    outs = cur.box_outputs(use)
    if rec.loop is not None:
        return None
    inputs = []
    for w, axes in cur.box_inputs(use):
        if w not in to_target:
            return None
        inputs.append((to_target[w], tuple(a if isinstance(a, str) else None for a in axes)))
    boxes = _between(target, out, {w for w, _ in inputs})
    if boxes is None:
        return None
    n_local = len(cur.wire_type(outs[0])) - len(rec.simd)
    outer_out = tuple(lab for lab, _ in rec.simd) + (None,) * n_local
    back = {str(x): Dim.var(g) for g, x in rec.generics if len(x.names()) == 1 and str(x) in x.names()}
    return Region(target, boxes, inputs, out, outer_out, {k: v for k, v in back.items()})


def _between(d: Diagram, out: int, stops: set[int]) -> list[int] | None:
    """The boxes making ``out`` from the wires ``stops`` (and from nothing), in order; None
    where they read an input of the diagram that is not a stop."""
    found: set[int] = set()
    todo = [out]
    while todo:
        w = todo.pop()
        if w in stops:
            continue
        b = d.producer(w)
        if b is None:
            return None
        if b in found:
            continue
        found.add(b)
        todo.extend(x for x, _ in d.box_inputs(b))
    return [b for b in d.topological_boxes() if b in found]


__all__ = ["holes", "suggestions", "kernels", "projections", "trivial", "ops"]
