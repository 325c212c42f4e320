"""Absorbing an invertible learner into the trainable box that reads it (Khatri et al. (2024),
App. B.1: "If we assume the x box is invertible (a reasonable assumption for learned square
value matrices, say), we may formally absorb it into the trainable box corresponding to keys
matrix"; Sec. 3.1: "split off an invertible learner from the encoder, which may be copied").

``absorb enc into Score as Sim``: ``X``, the position-wise map that makes the wire ``enc``
from one input ``u`` of the diagram (a SIMD feed-forward holding at least one learner), is
read by the trainable box ``R`` (a learner, or a learned matrix applied to ``enc``); the
step makes ``R ∘ X`` one learner ``Sim`` reading ``u``. ``X`` stays for its other readers
(one function: its weights are theirs still) and goes when none is left.

Which relation that is. ``Sim`` specialises to ``R ∘ X`` (with ``X``'s weights), so the
result is never less expressive than the diagram before. Back, ``R ∘ X`` ranges over every
function ``Sim`` does exactly when ``X`` loses nothing: when it is invertible. That is an
assumption about trained weights, which no type can show; the step states it and is marked
``⇔`` (as expressive, given ``X`` invertible), neither an equation nor a reduction.
"""
from __future__ import annotations

from ..errors import DiagError
from ..graph.box import Box, Global, Kind, Local
from ..graph.decls import BoxDecl
from ..graph.diagram import Diagram
from ..graph.multigraph import ancestors, descendants
from ..graph.types import show_type
from ..graph.weights import boxes_by_weights
from ..graph.weightuse import learner_key, nested_uses, used
from .steps import ABSORB, Outcome, drop_dead, wire_named


def absorb(cur: Diagram, wire: str, into: str, learner: BoxDecl | str) -> Outcome:
    """``R ∘ X`` made one learner (``learner``: a declared learnable, or a fresh name)."""
    w = wire_named(cur, wire)
    region, u = _region(cur, w, wire)
    readers, matrix = _readers(cur, w, wire, into)
    out = cur.copy()
    decl = _decl(cur, learner, u, w, readers, matrix)
    for r in readers:
        (_replace_matrix if matrix else _reread)(out, r, w, u, decl)
    if matrix:
        out.remove_box(matrix)
    drop_dead(out, region)  # the map goes once nothing reads what it makes
    what = ", ".join(sorted({cur.record(b).op for b in region if cur.record(b).kind in (Kind.LEARN, Kind.DIAGRAM)}))
    return Outcome(out, ABSORB, f"given the map making {wire} ({what}) invertible: {into} ∘ it is {decl.name}")


def _region(d: Diagram, w: int, name: str) -> tuple[set[int], int]:
    """The boxes that make ``w`` and the one input they read, checked position-wise."""
    g = d.graph
    up = ancestors(g, w)
    inputs = [i for i in d.inputs if i in up]
    if len(inputs) != 1:
        raise DiagError(f"'{name}' is made from {len(inputs)} inputs of the diagram; absorbing needs the map "
                        "from one input")
    u = inputs[0]
    down = descendants(g, u)
    region = {b for b in up & down if d.is_box(b)}
    if not any(d.record(b).kind in (Kind.LEARN, Kind.DIAGRAM) for b in region):
        raise DiagError(f"'{name}' is made without a learner: there is nothing trainable to absorb")
    n = d.wire_type(u)[0]
    if not d.wire_type(w) or d.wire_type(w)[0] != n:
        raise DiagError(f"'{name}' ({show_type(d.wire_type(w))}) is not position by position of its input "
                        f"({show_type(d.wire_type(u))})")
    for b in region:
        _position_wise(d, b, n, region | {u}, name)
    return region, u


def _position_wise(d: Diagram, b: int, n, inside: set[int], name: str) -> None:
    """Box ``b`` of the map reads every position of the map's wires at its own position."""
    node = d.record(b)
    simd = node.simd
    ok = bool(simd) and simd[0][1] == n
    for w, axes in d.box_inputs(b):
        from_map = w in inside or d.producer(w) in inside
        if from_map:
            ok = ok and bool(axes) and axes[0] == simd[0][0]
        elif simd:
            ok = ok and simd[0][0] not in axes
    if not ok:
        raise DiagError(f"'{node.op}' mixes positions on the way to '{name}': only a position-wise map "
                        "(a SIMD feed-forward) can be absorbed")


def _readers(d: Diagram, w: int, name: str, into: str) -> tuple[list[int], int | None]:
    """The boxes of the weight set ``into`` that read ``w``; for a learned matrix, the
    contractions that apply it (and the box making the matrix)."""
    owners = boxes_by_weights(d)
    sets = {k for k in owners if k.name.split("/")[-1] == into or k.name == into}
    if len(sets) != 1:
        raise DiagError(f"no trainable box '{into}' here" if not sets else
                        f"'{into}' names {len(sets)} weight sets here; absorbing needs one")
    key = sets.pop()
    boxes = owners[key]
    node = d.record(boxes[0])
    if node.kind is not Kind.LEARN:
        raise DiagError(f"'{into}' is not a learner: only a trainable box can take in another")
    inner = nested_uses(d, key)  # the same weights, used where this step does not reach
    if inner:
        raise DiagError(f"'{into}' is also used {inner[0].where()}: absorbing into its uses here would split "
                        "its weights in two")
    if node.ref.ins:
        reading = [b for b in boxes if any(x == w for x, _ in d.box_inputs(b))]
        if not reading:
            raise DiagError(f"'{into}' does not read '{name}': name the trainable box the map's output goes into")
        if len(reading) != len(boxes):
            raise DiagError(f"'{into}' is used {len(boxes)} times and {len(reading)} of them read '{name}': its "
                            "weights would be split in two")
        if not all(_per_position(d, b, w) for b in boxes):
            raise DiagError(f"'{into}' reads '{name}' whole, not position by position: the map cannot pass into it")
        return boxes, None
    if len(boxes) != 1:
        raise DiagError(f"the learned tensor '{into}' is used {len(boxes)} times; absorbing needs one use")
    (m,) = d.box_outputs(boxes[0])
    readers = [b for b, _ in d.consumers(m)]
    if not readers or any(not _applies(d, r, m, w) for r in readers):
        raise DiagError(f"'{into}' is not applied to '{name}' as a matrix (one contraction of the two, position "
                        "by position)")
    return readers, boxes[0]


def _per_position(d: Diagram, b: int, w: int) -> bool:
    """Box ``b`` reads the rows of ``w`` one at a time (its positions are a SIMD index of ``b``)."""
    labels = {lab for lab, _ in d.record(b).simd}
    return all(bool(axes) and axes[0] in labels for x, axes in d.box_inputs(b) if x == w)


def _applies(d: Diagram, c: int, m: int, w: int) -> bool:
    node = d.record(c)
    ins = d.box_inputs(c)
    return (node.kind is Kind.CONTRACT and len(ins) == 2 and {x for x, _ in ins} == {m, w}
            and bool(node.simd) and dict(ins)[w][0] == node.simd[0][0])


def _decl(d: Diagram, learner: BoxDecl | str, u: int, w: int, readers: list[int], matrix) -> BoxDecl:
    """The learner that replaces ``R ∘ X``: its type is ``R``'s with ``u``'s rows for ``w``'s."""
    row = d.wire_type(u)[1:]
    r = d.record(readers[0])
    ins: tuple
    if matrix:
        ins, outs = (row,), (d.wire_type(d.box_outputs(readers[0])[0])[1:],)
    else:
        ins = tuple(row if x == w else t for (x, _), t in zip(d.box_inputs(readers[0]), r.ref.ins))
        outs = r.ref.outs
    if isinstance(learner, str):
        if any(d.record(b).op == learner for b in d.boxes()) or used(d, learner_key(learner)):
            raise DiagError(f"'{learner}' is a box here already: name the new learner otherwise")
        return BoxDecl(learner, "learn", (), ins, outs, None, local=True)
    if learner.box != Kind.LEARN or learner.generics or (learner.ins, learner.outs) != (ins, outs):
        want = ", ".join(show_type(t) for t in ins) + " -> " + ", ".join(show_type(t) for t in outs)
        raise DiagError(f"'{learner.name}' ({learner.signature()}) cannot take the place of {want}")
    if used(d, learner_key(learner.name, learner.local)):  # at any depth: a definition box's too
        raise DiagError(f"'{learner.name}' is used here already: absorbing into it would tie two weight sets")
    return learner


def _learner(decl: BoxDecl, simd, old: Box) -> Box:
    """A learner box of ``decl``, placed where the box ``old`` was (``old``'s other attributes kept)."""
    weights = Local(decl.name) if decl.local else Global(decl.name)
    return old._replace(kind=Kind.LEARN, op=decl.name, simd=simd, display={lab: lab for lab, _ in simd}, ref=decl,
                        weights=weights)


def _reread(out: Diagram, r: int, w: int, u: int, decl: BoxDecl) -> None:
    """The learner ``r`` reads ``u`` where it read ``w``, as the new learner."""
    for port, (x, axes) in enumerate(out.box_inputs(r)):
        if x == w:
            out.rewire(r, port, u, (axes[0], *range(len(out.wire_type(u)) - 1)))
    node = out.record(r)
    out.reset(r, _learner(decl, node.simd, node))


def _replace_matrix(out: Diagram, c: int, w: int, u: int, decl: BoxDecl) -> None:
    """The contraction applying the matrix to ``w`` becomes the learner, applied to ``u``."""
    node = out.record(c)
    label, n = node.simd[0]
    (y,) = out.box_outputs(c)
    out.remove_box(c, outputs=False)
    fresh = Box(Kind.LEARN, "", pos=node.pos, clusters=node.clusters)
    out.add(_learner(decl, ((label, n),), fresh), [(u, (label, *range(len(out.wire_type(u)) - 1)))], [y])


__all__ = ["absorb"]
