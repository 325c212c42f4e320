"""The conditions a match must satisfy, each a named function (after Chyp's matcher).

On a candidate box (is this target box the pattern box?):
:func:`same_shape`, :func:`same_scan`, :func:`same_box`, :func:`same_definition`,
:func:`same_locality`, :func:`same_constant`, :func:`same_generics`,
:func:`same_local_types`, :func:`same_cell` (a scan's cell by its body), and ``unify.bind_function`` (one name, one function); once its
labels are placed: :func:`every_label_placed`, :func:`scan_kept`, :func:`context_links`.

On a whole match: ``Unifier.settle`` (sums of dimensions add up), :func:`iterates_once`
(SIMD context), and :func:`holds`: :func:`fed_from_outside`, :func:`glued`,
:func:`convex`. :func:`weight_ties` does not reject: it marks a match that would tie
weights, a reduction, which ``find_matches`` returns only when asked.

Each is looked up by name when it is used, so a test can lift one and show the match it stops.
"""
from __future__ import annotations

from typing import Any

from ..graph.box import Box, Instance, Kind, Local
from ..graph.diagram import Diagram
from ..graph.iso import definition_key
from ..graph.weights import weight_key
from .index import Index
from .unify import Unifier
from .view import View


# -- a candidate box ------------------------------------------------------------------------
def same_shape(pv: View, tv: View) -> bool:
    """A box is a function of its ports: the target box has the pattern box's inputs,
    outputs and summed indices, and at least its iterated labels (the rest are context)."""
    return (len(pv.ins) == len(tv.ins) and len(pv.outs) == len(tv.outs) and len(pv.summed) == len(tv.summed)
            and len(tv.labels) >= len(pv.labels))


def same_scan(pv: View, tv: View) -> bool:
    """A scan is a sequential loop carrying a state; the SIMD box of the same function is
    parallel and computes something else."""
    return pv.scan == tv.scan


def same_box(pn: Box, tn: Box) -> bool:
    """Typing of the box: a box variable stands for any process (never a contraction or a
    constant); otherwise the same kind of box and, for a process, the same name. A repeat box
    is t copies of its definition: only a repeat of the same count and sharing matches it."""
    if (pn.repeat or tn.repeat) and pn.identity().loop != tn.identity().loop:
        return False
    if pn.var:
        return tn.kind.is_process
    if pn.cell:
        return tn.kind is Kind.DIAGRAM
    return pn.kind is tn.kind and (not pn.kind.is_process or pn.op == tn.op)


def same_definition(pn: Box, tn: Box) -> bool:
    """A definition is told by its content, not its name: two files may each define a ``Sq``
    and mean different things."""
    if pn.kind is not Kind.DIAGRAM or pn.var or pn.cell or pn.ref is tn.ref:
        return True
    return definition_key(pn.ref) == definition_key(tn.ref)


def same_locality(pn: Box, tn: Box) -> bool:
    """A local learnable is fresh in each instance of its definition, a global one is one set
    of weights everywhere: one name, two kinds of function."""
    return pn.kind is not Kind.LEARN or pn.var or isinstance(pn.weights, Local) == isinstance(tn.weights, Local)


def same_constant(pn: Box, tn: Box, uni: Unifier) -> bool:
    """A constant is its value, up to the rule's dimension variables (``sqrt(k)``)."""
    return pn.kind is not Kind.CONST or uni.unify_value(pn.value, tn.value)


def same_generics(pn: Box, tn: Box, uni: Unifier) -> bool:
    """A generic box is one function per size (``ones<s>``, a definition ``<n>``): its generic
    dimensions unify, even those its port types do not show (a cell pattern's, by its body:
    :func:`same_cell`)."""
    if pn.var or pn.cell:
        return True
    pg, tg = tuple(pn.generics), tuple(tn.generics)
    return [g for g, _ in pg] == [g for g, _ in tg] and all(uni.unify(a, b) for (_, a), (_, b) in zip(pg, tg))


def same_local_types(local: tuple[list, list], t: Diagram, tb: int, uni: Unifier) -> bool:
    """Typing at the ports, per iteration: the pattern box's local input and output types
    (without SIMD labels) unify with the target box's, binding the rule's dimension variables."""
    ins, outs = local
    return (all(uni.unify_types(lt, t.local_in_type(tb, q)) for q, lt in enumerate(ins))
            and all(uni.unify_types(lt, t.local_out_type(tb, q)) for q, lt in enumerate(outs)))


def same_cell(pn: Box, tn: Box, uni: Unifier, match_body) -> dict[str, Box] | None:
    """A scanned cell pattern (a rule's ``where diagram``) names no definition: it is the
    target cell whose whole body it matches (``cell.match_cell``), and the sizes found there
    are the rule's. Returns the box variables bound inside the cell (name -> the target
    box's attributes; none for any other box), or ``None`` where the cell is not the pattern's.
    ``match_body(pattern body, target body)`` is ``cell.match_cell`` with the search's matcher."""
    if not pn.cell:
        return {}
    cm = match_body(pn.ref, tn.ref)
    if cm is None:
        return None
    mine, theirs = dict(pn.generics), dict(tn.generics)
    for g, dim in cm.dims.items():
        if g in mine and not uni.unify(mine[g], dim.substitute(theirs)):
            return None
    return {name: _owned(node, tn.instance if tn.instance is not None else tn.op) for name, node in cm.bound.items()}


def _owned(box: Box, instance: str) -> Box:
    """A box bound inside a loop's cell, named as the loop owns it: weights local to the
    cell are that loop's (``Cell#1/E``), wherever a rewrite moves the box."""
    w = box.weights
    if isinstance(w, Local):
        return box._replace(weights=Local(f"{instance}/{w.param}"))
    if isinstance(w, Instance) and box.kind is Kind.DIAGRAM:  # "": the whole cell, the loop's own weights
        return box._replace(weights=Instance(f"{instance}/{w.path}" if w.path else instance))
    return box


# -- a candidate box, its labels placed ----------------------------------------------------------
def every_label_placed(lam: dict, pdim: dict) -> bool:
    """Every index of the pattern box is sent to an index of the target box: the rewrite
    must know which target index each of the rule's indices is."""
    return len(lam) == len(pdim)


def scan_kept(pv: View, tv: View, lam: dict) -> bool:
    """A scan runs over its last label in order: the pattern's scanned index is the target's
    scanned index, not one of its context indices."""
    return not pv.scan or lam[pv.labels[-1][0]] == tv.labels[-1][0]


def context_links(pv: View, tv: View, tb: int, wires: dict, ctx: tuple) -> tuple | None:
    """SIMD context: an axis of a matched input that the pattern does not read must be one of
    the box's context labels (``ctx``), which the rewrite prepends to what it inserts; any
    other extra axis is data the pattern does not see. Returns the links of the box's context
    labels to wire axes, from which the slots are found, or ``None``."""
    links = []
    for (pw, _), (w, beta) in zip(pv.ins, tv.ins):
        perm = wires[pw][1]
        for q, b in enumerate(beta):
            if q in perm:
                continue
            if not (isinstance(b, str) and b in ctx):
                return None
            links.append((("w", w, q), ("b", tb, b)))
    for w, layout in zip(tv.outs, tv.layouts):
        links += [(("w", w, q), ("b", tb, e)) for q, e in enumerate(layout) if isinstance(e, str) and e in ctx]
    return tuple(links)


def iterates_once(roots: list) -> bool:
    """SIMD context: a matched box iterates each context index (slot) once. Two context
    labels of one box linked through wires to one slot (``x[i, j] * x[k, j]`` read as a
    product of two vectors) would make the rewrite pair the two."""
    return len(set(roots)) == len(roots)


# -- a whole match ----------------------------------------------------------------------------
def fed_from_outside(p: Any, ix: Index, matched: frozenset, wires: dict) -> bool:
    """No input of the match is made by the match: after the rewrite the inserted boxes
    would read their own output, a cycle."""
    t = ix.d
    for x in p.inputs:
        if x in wires:
            pr = t.producer(wires[x][0])
            if pr is not None and pr in matched:
                return False
    return True


def glued(p: Any, ix: Index, matched: frozenset, wires: dict) -> bool:
    """Gluing: a wire inside the pattern (made and read in it, not an output) has no reader
    outside the match and is no output of the target, since the rewrite deletes it."""
    t, outs = ix.d, set(ix.d.outputs)
    for y in p.interior:
        w = wires[y][0]
        if w in outs or t.graph.out_degree(w) != len(p.readers.get(y, ())):
            return False
    return True


def convex(p: Any, ix: Index, matched: frozenset, wires: dict) -> bool:
    """Convexity: no path leaves the match and re-enters it, since the replacement, one
    block, could not sit both before and after the boxes on that path. Searched downstream
    of the match's outputs, only below its highest level."""
    g, level = ix.d.graph, ix.level
    top = max(level[b] for b in matched)
    stack = [c for y in p.outputs if y in wires for c in g.successors(wires[y][0]) if c not in matched]
    seen = set()
    while stack:
        b = stack.pop()
        if b in seen or level[b] >= top:
            continue
        seen.add(b)
        after = [c for w in g.successors(b) for c in g.successors(w)]
        if not matched.isdisjoint(after):
            return False
        stack += after
    return True


def holds(p: Any, ix: Index, matched: frozenset, wires: dict) -> bool:
    """The conditions on where a whole match sits in the target, checked when it is found
    and again before a match found earlier is rewritten."""
    return fed_from_outside(p, ix, matched, wires) and glued(p, ix, matched, wires) and convex(p, ix, matched, wires)


def weight_ties(p: Any, t: Diagram, boxes: dict[int, int]) -> tuple[frozenset, ...]:
    """Weight sets that one name of the pattern binds together: the pattern says one
    function where the target has several sets of weights. Rewriting there ties them,
    an expressivity reduction (⇒), never an equation."""
    sets: dict[Any, set] = {}
    for pb, tb in boxes.items():
        node = p.node[pb]
        if not node.kind.is_process:
            continue
        key = weight_key(t.record(tb))
        if key is not None:  # one set of the pattern (or one box variable): one set here
            sets.setdefault(weight_key(node) or node.op, set()).add(key)
    return tuple(frozenset(s) for s in sets.values() if len(s) > 1)
