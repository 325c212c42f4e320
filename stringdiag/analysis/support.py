"""Masked attention counted on its mask's support, not as a dense ``n x n`` matrix.

A mask primitive of the prelude whose nonzero entries are few says here how many: the
support of ``window<n, w>`` (|i - j| < w) is O(n·w) entries, that of ``global<n, g>`` (the
rows and columns of the first g positions) O(n·g). Other masks (``causal``: half of n^2)
are dense.

How a mask reaches the cost, in the expanded diagram: the mask wire ``[n, n]`` is read by
``where(e, mk)`` (SIMD over both positions), whose output is -infinity off the support;
softmax's boxes (``amax``, ``sub``, ``exp``, the sum, ``div``) keep it -infinity, then 0; the
contraction ``sum_j a[i, j] v[j]`` multiplies by 0 off it. So the support spreads *forward*
from the mask through the processes that keep off-support entries absorbing
(:data:`KEEPS`: which value, through which ports), while a wire still holds both positions
(its type has n twice). It spreads *backward* too: a box whose outputs hold both positions
and are read only by boxes on the support (the scores ``q k^T``, read only by ``where``)
is needed on the support only. Two masks combined by ``max`` or ``+`` (a window and global
tokens, Longformer) have the union of their supports. A box on the support costs its dense cost with one n^2
replaced by the support (s^2·k -> s·w·k); a wire on it holds that many entries. This is
what the compiler computes for a window (``window_attention``: no s x s matrix) and for global
tokens, alone or beside a window (``window_global_attention``).

Counted on the expansion, so only when a supported mask is reachable (and no ``scan`` is:
its body is costed per step by ``shape.py``); otherwise :func:`sparse_cost` says None. A
``repeat`` stays one box in the expansion: its body is costed as a diagram of its own (on its
mask's support when it has one) and counted once per copy, as ``shape.py`` counts it.
"""
from __future__ import annotations

from typing import Mapping

from ..graph.box import Box, Kind
from ..graph.diagram import Diagram
from ..graph.types import Dim
from ..graph.hypergraph import repeated
from .fold import post_order
from .shape import _of_dims, _own_time, _substitute, _times, cost_monomials
from .monomials import Monomial, covers, prune

# mask primitive -> its generic parameter p: the support of mask<n, p> is O(n·p) entries
SUPPORT: Mapping[str, str] = {"window": "w", "global": "g"}

ZERO, NINF = "0", "-inf"  # what a wire holds off the support
# process -> {(port, value off the support there): value of the output off the support}
KEEPS: Mapping[str, Mapping[tuple, str]] = {
    "where": {(1, ZERO): NINF, (0, NINF): NINF},   # masked: -infinity
    "add": {(0, NINF): NINF, (1, NINF): NINF},
    "sub": {(0, NINF): NINF},
    "div": {(0, NINF): NINF, (0, ZERO): ZERO},      # divided by a positive normaliser or sqrt
    "mul": {(0, ZERO): ZERO, (1, ZERO): ZERO},
    "exp": {(0, NINF): ZERO},
    "amax": {(0, NINF): NINF},
}
REDUCING = (Kind.CONTRACT, Kind.REINDEX)
UNION = ("max", "add")  # of two masks (0 off both supports): the union of their supports  # a product with a factor 0 off the support; a transpose


def _name(dim: Dim) -> str | None:
    """The dimension's name when it is one plain name (``s``), else None."""
    (mono, coeff), = dim.terms if len(dim.terms) == 1 else (((), 0),)
    return mono[0] if coeff == 1 and len(mono) == 1 else None


def reaches_support(d: Diagram) -> bool:
    """Whether a supported mask is used in ``d`` or its definitions (and no ``scan`` is)."""
    nodes = [site.node for _x, _v, body in post_order(d, lambda node: True) for site in body]
    if any(node.scan for node in nodes):
        return False
    return any(node.kind is Kind.FIXED and node.op in SUPPORT for node in nodes)


class _Support:
    """Which boxes and wires of the expansion lie on a mask's support, and its size."""

    def __init__(self, flat: Diagram):
        self.flat = flat
        self.wires: dict[int, tuple[str, frozenset, str]] = {}  # wire -> (n, support monomials, value off it)
        self.boxes: dict[int, tuple[str, frozenset]] = {}       # box -> (n, support monomials)
        self.order = flat.topological_boxes()
        for b in self.order:
            self.forward(b)
        for b in reversed(self.order):
            self.backward(b)

    def pair(self, w: int, n: str) -> bool:
        return sum(_name(dim) == n for dim in self.flat.wire_type(w)) >= 2

    def forward(self, b: int) -> None:
        node, flat = self.flat.record(b), self.flat
        if node.kind is Kind.FIXED and node.op in SUPPORT:
            gen = dict(node.generics)
            n = _name(gen.get("n", Dim.const(0)))
            if n is not None:
                self.mark(b, n, _of_dims([gen["n"], gen[SUPPORT[node.op]]]), ZERO)
            return
        ins = [(k, self.wires[w]) for k, (w, _axes) in enumerate(flat.box_inputs(b)) if w in self.wires]
        if not ins:
            return
        if node.op in UNION and len(ins) == len(flat.box_inputs(b)) and all(x[2] == ZERO for _k, x in ins):
            self.mark(b, ins[0][1][0], prune(frozenset().union(*(x[1] for _k, x in ins))), ZERO)
            return
        keeps = KEEPS.get(node.op, {}) if node.kind is Kind.FIXED else {}
        for k, (n, supp, off) in ins:
            out = keeps.get((k, off))
            if out is None and node.kind in REDUCING and (off == ZERO or node.kind is Kind.REINDEX):
                out = off
            if out is not None:
                self.mark(b, n, supp, out)
                return

    def mark(self, b: int, n: str, supp: frozenset, off: str) -> None:
        self.boxes[b] = (n, supp)
        for w in self.flat.box_outputs(b):
            if self.pair(w, n):
                self.wires[w] = (n, supp, off)

    def backward(self, b: int) -> None:
        """Inputs holding both positions that only boxes on the support read are needed
        on the support only, and so is the box that makes them (when that is all it makes)."""
        if b not in self.boxes:
            return
        n, supp = self.boxes[b]
        flat = self.flat
        for w, _axes in flat.box_inputs(b):
            p = flat.producer(w)
            if w in self.wires or p is None or p in self.boxes or w in flat.outputs or not self.pair(w, n):
                continue
            outs = flat.box_outputs(p)
            if all(self.pair(o, n) and o not in flat.outputs
                   and all(c in self.boxes for c, _port in flat.consumers(o)) for o in outs):
                self.boxes[p] = (n, supp)
                for o in outs:
                    self.wires[o] = (n, supp, ZERO)
                self.backward(p)


def _on(ms: frozenset, n: str, supp: frozenset) -> frozenset:
    """Monomials with one n^2 replaced by the support's monomials (n·w)."""
    out: set[Monomial] = set()
    for m in ms:
        powers = dict(m)
        if powers.get(n, 0) < 2:
            out.add(m)
            continue
        powers[n] -= 2
        for s in supp:
            acc = dict(powers)
            for name, p in s:
                acc[name] = acc.get(name, 0) + p
            out.add(tuple(sorted((k, v) for k, v in acc.items() if v)))
    return prune(out)


def sparse_cost(d: Diagram) -> tuple[frozenset, frozenset, set[str]] | None:
    """(time, memory) monomials of ``d``'s expansion with masked attention counted on its
    mask's support, and the names of the support parameters used (``w``); None when no
    supported mask is reachable."""
    if not reaches_support(d):
        return None
    time, memory, bound = _sparse(d)
    return time, memory, set(bound)


def _sparse(d: Diagram) -> tuple[frozenset, frozenset, dict[str, str]]:
    """:func:`sparse_cost`'s figures, with each support parameter the length it is at most
    (``w`` -> ``s``)."""
    flat = d.expand()
    sup = _Support(flat)
    time: set = set()
    memory: set = set()
    bound = {name: n for n, supp in sup.boxes.values() for s in supp for name, _p in s if name != n}
    for b in sup.order:
        node = flat.record(b)
        own = _own_time(flat, node, flat.box_inputs(b), flat.box_outputs(b))
        time |= _on(own, *sup.boxes[b]) if b in sup.boxes else own
        if node.kind is Kind.DIAGRAM and repeated(node):
            body_time, body_memory, body_bound = _stacked(node)
            time |= body_time
            memory |= body_memory
            bound.update(body_bound)
    for w in flat.wires():
        ms = _of_dims(flat.wire_type(w))
        memory |= _on(ms, *sup.wires[w][:2]) if w in sup.wires else ms
    return _within(time, bound), _within(memory, bound), bound


def _stacked(node: Box) -> tuple[frozenset, frozenset, dict[str, str]]:
    """A ``repeat`` box's body, costed on its own mask's support when it has one, times its
    count and SIMD dimensions (training keeps every copy's intermediate values), and the
    support parameters it bounds (``w`` by ``s``)."""
    d = node.ref
    time, memory, bound = _sparse(d) if reaches_support(d) else (*cost_monomials(d), {})
    sub = {g: dim for g, dim in node.generics}
    steps = _of_dims([dim for _, dim in node.simd] + [node.count])
    return _times(_substitute(time, sub), steps), _times(_substitute(memory, sub), steps), bound


def _within(ms: set, bound: Mapping[str, str]) -> frozenset:
    """:func:`prune`, knowing that a support parameter is at most its length (w <= s: a wider
    window is the whole sequence), so s·w·d goes where s^2·d is."""
    kept = prune(ms)

    def widened(m: Monomial) -> Monomial:
        acc: dict[str, int] = {}
        for name, p in m:
            acc[bound.get(name, name)] = acc.get(bound.get(name, name), 0) + p
        return tuple(sorted(acc.items()))

    return frozenset(m for m in kept if not any(o != m and covers(o, widened(m)) for o in kept))
