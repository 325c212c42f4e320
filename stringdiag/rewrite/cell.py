"""The cells of scans: a rule's cell pattern matched against, and built into, a scanned body.

A ``scan`` box iterates a cell; where the cell is a definition, its body is a diagram of its
own that the box refers to (``ref``). A law of finite iteration (Khatri et al. (2024),
App. A.1.3) says what a loop does by what its cell does inside: a cell that passes its
carry through is a parallel map, a cell that swaps carry and input is a delay. A rule says
so with a *cell pattern*, a ``where diagram`` local to the rule whose body may use the
rule's box variables. The pattern matches a target's cell when it matches the cell's whole
body, port for port up to the order of the factors of a product or the terms of a sum
(:func:`match_cell`, :func:`commuted`: ``k v + S a`` is the cell ``a S + k v``); the other
side's cell is built from its pattern with the variables bound there and the dimensions the
match found (:func:`build_cell`).
"""
from __future__ import annotations

import itertools
import re
from ..syntax.records import Mutable, field
from typing import Callable, Iterator

from ..graph.box import Box, Instance, Kind
from ..graph.diagram import Diagram
from ..graph.expand import substituted
from ..graph.types import Dim
from .occurrence import Match
from .unify import Unifier

# the processes whose inputs may come in any order: a product or a sum is the same in any order
SYMMETRIC = frozenset({"mul", "add"})


class CellMatch(Mutable, frozen=False):
    """A cell pattern's body found as a target cell's whole body."""

    dims: dict[str, Dim] = field(default_factory=dict)       # the pattern's dimension parameters
    bound: dict[str, Box] = field(default_factory=dict)      # box variable -> the target box it is


def match_cell(pat: Diagram, target: Diagram, search: Callable[[Diagram, Diagram], Iterator[Match]]) -> CellMatch | None:
    """The pattern's body as the whole of the target's: every target box matched, the
    pattern's inputs and outputs the target's in order (an output that is an input, passed
    straight through, must be the same input there), the sizes unified. ``search`` finds
    the matches of one body in another (the matcher's, given by it)."""
    if len(pat.inputs) != len(target.inputs) or len(pat.outputs) != len(target.outputs):
        return None
    uni = Unifier(frozenset(pat.generics))
    if not all(uni.unify_types(a, b) for a, b in zip(pat.input_types + pat.output_types,
                                                     target.input_types + target.output_types)):
        return None
    if not _same_passing(pat, target):
        return None
    if len(pat) == 0:
        return CellMatch(dict(uni.sub)) if len(target) == 0 and uni.settle() else None
    if len(pat) == 1 and len(target) > 1:
        return _whole_body(pat, target, uni)
    for form in commuted(pat, symmetric):
        for m in search(form, target):
            if len(m.boxes) != len(target) or m.slots or not _on_boundary(form, target, m):
                continue
            u = uni.copy()
            if all(u.unify(Dim.var(n), d) for n, d in m.dims.items()) and u.settle():
                bound = {n: target.record(tb) for n, tb in m.idents.items() if _is_variable(form, n)}
                return CellMatch(dict(u.sub), bound)
    return None


def symmetric(box: Box) -> bool:
    """A contraction (a product summed) or a fixed product or sum: its inputs in any order."""
    return box.kind is Kind.CONTRACT or (box.kind is Kind.FIXED and box.op in SYMMETRIC)


def commuted(d: Diagram, which: Callable[[Box], bool]) -> Iterator[Diagram]:
    """``d`` once for every order of the inputs of each box ``which`` accepts (``d`` itself
    first): a matcher that reads ports in order then finds a product written in any order.
    A box whose inputs are all one wire (``x * x``) is left as it is."""
    boxes = [b for b in d.boxes() if which(d.record(b)) and len({w for w, _ in d.box_inputs(b)}) > 1]
    for order in itertools.product(*(itertools.permutations(range(len(d.box_inputs(b)))) for b in boxes)):
        if not any(perm != tuple(range(len(perm))) for perm in order):
            yield d
            continue
        form = d.copy()
        for b, perm in zip(boxes, order):
            form.permute_inputs(b, perm)
        yield form


def _whole_body(pat: Diagram, target: Diagram, uni: Unifier) -> CellMatch | None:
    """A pattern cell of one box variable besides its passed carry (``return c, h(c, v)``)
    against a body of many boxes: the variable stands for everything the body computes, the
    body itself with the passed outputs left out, as a definition of its own (its boxes keep
    their weights). The variable must read the cell's inputs in order and make the rest."""
    (b,) = pat.boxes()
    node = pat.record(b)
    if not node.var or [w for w, _ in pat.box_inputs(b)] != list(pat.inputs):
        return None
    made = [k for k, y in enumerate(pat.outputs) if y not in pat.inputs]
    if [pat.outputs[k] for k in made] != pat.box_outputs(b) or not uni.settle():
        return None
    body = target.copy(name=re.sub(r"\W", "", target.name) + "Map")  # a name a derivation can unfold
    body.outputs = [target.outputs[k] for k in made]
    # the cell itself, as a definition: its weights are the loop's (``conditions.same_cell`` gives
    # it the loop's instance), so that no local weight of the body is renamed by the rewrite
    bound = Box(Kind.DIAGRAM, body.name, ref=body, weights=Instance(""))
    return CellMatch(dict(uni.sub), {node.op: bound})


def _same_passing(pat: Diagram, target: Diagram) -> bool:
    """Outputs that are inputs (a carry passed through) are the same inputs in both; an input
    the pattern never reads, the target does not read either."""
    for k, y in enumerate(pat.outputs):
        t = target.outputs[k]
        if y in pat.inputs:
            if t not in target.inputs or target.inputs.index(t) != pat.inputs.index(y):
                return False
        elif t in target.inputs:
            return False
    unread = [j for j, x in enumerate(pat.inputs) if pat.graph.out_degree(x) == 0]
    return all(target.graph.out_degree(target.inputs[j]) == 0 for j in unread)


def _on_boundary(pat: Diagram, target: Diagram, m) -> bool:
    """Each matched input and output of the pattern is the target's of the same number,
    its axes in order."""
    for mine, theirs in ((pat.inputs, target.inputs), (pat.outputs, target.outputs)):
        for k, x in enumerate(mine):
            if x in m.boundary:
                w, perm, ctx = m.boundary[x]
                if w != theirs[k] or perm != tuple(range(len(perm))) or ctx:
                    return False
    return True


def _is_variable(pat: Diagram, name: str) -> bool:
    return any(pat.record(b).var and pat.record(b).op == name for b in pat.boxes())


def build_cell(pat: Diagram, sub: dict[str, Dim], bound: dict[str, Box]) -> Diagram:
    """The cell a rule's other side brings in: its pattern at the match's sizes, each box
    variable the process it was bound to (with that process's weights)."""
    body = substituted(pat, sub)
    for b in list(body.boxes()):
        box = body.record(b)
        if box.var:
            have = bound[box.op]
            body.reset(b, box._replace(kind=have.kind, op=have.op, ref=have.ref, weights=have.weights,
                                       generics=have.generics, var=False))
    return body


__all__ = ["CellMatch", "match_cell", "build_cell", "commuted", "symmetric"]
