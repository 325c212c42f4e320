"""Boxes by kind and asymptotic cost of ``d.expand()``: the :class:`Shape` algebra of the fold.

How a definition's boxes land in the expansion (``graph/expand.py``):

- each box of its body becomes one box, except a ``diagram`` box that is not a ``scan`` or a
  ``repeat``, which is replaced by the boxes of its callee (a repeat's body counts t times in
  cost, as the compiler runs it: never unrolled here);
- an inlined box whose output ignores one of the box's SIMD indices (a copy-SIMD input
  passed straight through, a learnable tensor) is broadcast by one ``reindex`` box, and so
  is an output of the top diagram whose axes come out of order;
- a box sits only in those enclosing SIMD boxes that its inputs depend on ("tightening").

The last point is what the cost depends on. Per definition we record, for every wire,
*which of the definition's inputs* its enclosing SIMD indices come from (or ``FULL``: every
enclosing index, after a broadcast), and which axes it carries in what order; a caller
turns the callee's inputs into its own wires. The cost of a definition is a set of
monomials per such dependency, multiplied by the caller's SIMD dimensions where used.
"""
from __future__ import annotations

import itertools
from collections import Counter
from typing import Any, Iterable, Iterator, Mapping

from ..graph.box import Box, Kind
from ..graph.diagram import Diagram
from ..graph.hypergraph import per_graph_cache, repeated
from ..graph.types import Dim
from ..syntax.records import Mutable, field
from .fold import Algebra, Site, fold
from .monomials import Monomial, monomials, multiply, prune

FULL = None  # a wire inside every enclosing SIMD box (the labels of a broadcast)
Labels = Any  # FULL, or a frozenset of the definition's input positions
# the order of a wire's own (non-context) axes: ("p", order) for a wire made in the body,
# ("i", j, g) for a view of input j whose axis v is the wire's axis g[v]
Ints = tuple


# -- monomials ------------------------------------------------------------------------------

_dim_monos: dict[Dim, frozenset] = {}


_dims_monos: dict[tuple, frozenset] = {}


def _of_dims(dims: Iterable[Dim]) -> frozenset:
    """The monomials of a product of dimensions, those no other one covers."""
    key = tuple(dims)
    hit = _dims_monos.get(key)
    if hit is None:
        if len(_dims_monos) > 100_000:  # a bound, not an eviction policy: programs reuse few shapes
            _dims_monos.clear()
        hit = _dims_monos[key] = prune(monomials(list(key)))
    return hit


def _of_dim(dim: Dim) -> frozenset:
    hit = _dim_monos.get(dim)
    if hit is None:
        hit = _dim_monos[dim] = _of_dims([dim])
    return hit


def _times(a: frozenset, b: frozenset) -> frozenset:
    if b == {()}:
        return a
    if a == {()}:
        return b
    return prune(multiply(x, y) for x in a for y in b)


def _substitute(ms: frozenset, sub: Mapping[str, Dim]) -> frozenset:
    """The monomials with each name bound in ``sub`` replaced by its dimension's monomials
    (dimensions are sums and products with non-negative coefficients: nothing cancels)."""
    if not sub:
        return ms
    out: set[Monomial] = set()
    for m in ms:
        acc = frozenset({()})
        rest: list[tuple[str, int]] = []
        for n, p in m:
            if n in sub:
                for _ in range(p):
                    acc = _times(acc, _of_dim(sub[n]))
            else:
                rest.append((n, p))
        keep = tuple(rest)
        out.update(multiply(x, keep) for x in acc)
    return prune(out)


def _add(items: dict, key: Labels, ms: frozenset) -> None:
    """Collect monomials under a dependency (pruned once the body is done: ``_Summary.shape``)."""
    if ms:
        items.setdefault(key, set()).update(ms)


def _join(a: Labels, b: Labels) -> Labels:
    return FULL if a is FULL or b is FULL else a | b


# -- structure: counts and cost of one instance of a definition --------------------------

class Shape(Mutable, frozen=False):
    """What one use of a definition expands to, whatever the SIMD boxes around it."""

    counts: Counter  # expanded boxes by kind
    outs: list[tuple[Labels, Ints]]  # per output: where its enclosing indices come from, its axes
    time: dict  # Labels -> monomials (in the definition's own dimension names)
    memory: dict  # Labels -> monomials of its wires
    serial: int = field(default_factory=lambda: next(_serials))  # tells a recomputed summary apart


_serials: Iterator[int] = itertools.count()


def _local(d: Diagram, w: int, axes: tuple) -> list[Dim]:
    """``d.local_in_type`` of a port read from (wire, axes)."""
    return [dim for _, dim in sorted((a, dim) for a, dim in zip(axes, d.wire_type(w)) if isinstance(a, int))]


# primitives that read only the entries they return (a pick or a range of an axis; the compiler
# takes them as views; embed one row of its table per id): they cost their output, not their input
READ_WHAT_THEY_GIVE = frozenset({"pick", "narrow", "embed"})
# primitives whose every output entry reads every entry of their last input (a kernel): the
# output times the kernel
WINDOWED = frozenset({"causal_conv"})


def _own_time(d: Diagram, node: Box, ins: list, outs: list) -> frozenset:
    """analyse()'s cost of one box, without the SIMD boxes of its context."""
    simd = [dim for _, dim in node.simd]
    n = len(simd)
    scan = bool(node.scan)
    in_types = [_local(d, w, axes) for w, axes in ins]
    out_types = [list(d.wire_type(w)[n - (1 if scan and p == 0 else 0):]) for p, w in enumerate(outs)]
    if node.kind is Kind.CONTRACT:
        return _of_dims(simd + [dim for _, dim in node.summed] + out_types[0])
    if node.kind is Kind.LEARN:
        return _of_dims(simd + [x for t in in_types for x in t] + [x for t in out_types for x in t])
    if node.kind is Kind.FIXED and node.op in WINDOWED:
        return _of_dims(simd + out_types[0] + in_types[-1])
    acc: set = set()
    read = [] if node.kind is Kind.FIXED and node.op in READ_WHAT_THEY_GIVE else in_types
    for t in read + out_types:
        acc |= _of_dims(simd + t)
    return prune(acc)


class _Summary:
    """One definition's :class:`Shape`, built box by box in the order expand() inlines them."""

    def __init__(self, d: Diagram):
        self.d = d
        self.combined: dict[tuple, frozenset] = {}  # a callee's cost placed in this body, by (cost, generics, SIMD)
        self.counts: Counter = Counter()
        self.time: dict = {}
        self.memory: dict = {}
        self.env: dict[int, tuple[Labels, Ints]] = {}
        for j, w in enumerate(d.inputs):
            self.env[w] = (frozenset({j}), ("i", j, tuple(range(len(d.wire_type(w))))))

    def shape(self) -> Shape:
        return Shape(self.counts, [self.env[w] for w in self.d.outputs],
                     {k: prune(v) for k, v in self.time.items()}, {k: prune(v) for k, v in self.memory.items()})

    def box(self, node: Box, ins: list, outs: list, callee: Shape | None = None) -> None:
        """A box that stays one box; a scan's or a repeat's (``callee``: its body) adds its
        body's cost."""
        d, env = self.d, self.env
        labels: Labels = frozenset()
        for w, _axes in ins:
            labels = _join(labels, env[w][0])
        self.counts[node.kind.value] += 1
        _add(self.time, labels, _own_time(d, node, ins, outs))
        if callee is not None:
            _add_scanned(self.time, self.memory, labels, node, callee)
        for w in outs:
            _add(self.memory, labels, _of_dims(d.wire_type(w)))
            env[w] = (labels, ("p", tuple(range(len(d.wire_type(w))))))

    def inline(self, node: Box, ins: list, outs: list, callee: Shape) -> None:
        """A definition's box, replaced by its body: the callee's summary placed here."""
        d, env, simd = self.d, self.env, node.simd
        self.counts.update(callee.counts)
        index = {lab: k for k, (lab, _) in enumerate(simd)}
        iterated = [frozenset(a for a in axes if isinstance(a, str)) for _w, axes in ins]
        sub = {g: dim for g, dim in node.generics}
        sub_key = tuple(sorted(sub.items(), key=lambda kv: kv[0]))

        def lift(lab: Labels) -> tuple[Labels, frozenset]:
            """A callee's dependency as the caller's, and the box's own SIMD dims it brings."""
            if lab is FULL:
                return FULL, _of_dims([dim for _, dim in simd])
            here: Labels = frozenset()
            used: set = set()
            for k in lab:
                here = _join(here, env[ins[k][0]][0])
                used |= iterated[k]
            return here, _of_dims([dim for label, dim in simd if label in used])

        for items, into in ((callee.time, self.time), (callee.memory, self.memory)):
            for lab, ms in items.items():
                here, extra = lift(lab)
                key = (ms, sub_key, extra)
                placed = self.combined.get(key)
                if placed is None:
                    placed = self.combined[key] = _times(_substitute(ms, sub), extra)
                _add(into, here, placed)
        for o, w in enumerate(outs):
            lab, ints = callee.outs[o]
            axes = _place(lab, ints, ins, iterated, index, len(d.wire_type(w)), env)
            env[w] = self.broadcast(w) if axes is None else (lift(lab)[0], axes)

    def broadcast(self, w: int) -> tuple[Labels, Ints]:
        """An output the box's SIMD indices do not all reach: broadcast by a ``reindex`` box."""
        self.counts["reindex"] += 1
        ms = _of_dims(self.d.wire_type(w))
        _add(self.time, FULL, ms)
        _add(self.memory, FULL, ms)
        return (FULL, ("p", tuple(range(len(self.d.wire_type(w))))))


class ShapeAlgebra(Algebra[_Summary, Shape]):
    """Counts and cost per definition; a definition's :class:`Shape` is kept (per graph)
    while neither it nor the summaries of its callees change."""

    def start(self, x: Diagram) -> _Summary:
        return _Summary(x)

    def box(self, acc: _Summary, x: Diagram, site: Site) -> None:
        acc.box(site.node, site.ins, site.outs)

    def call(self, acc: _Summary, x: Diagram, site: Site, callee: Shape) -> None:
        acc.inline(site.node, site.ins, site.outs, callee)

    def loop(self, acc: _Summary, x: Diagram, site: Site, callee: Shape) -> None:
        acc.box(site.node, site.ins, site.outs, callee)

    def finish(self, acc: _Summary, x: Diagram) -> Shape:
        return acc.shape()

    def definition(self, x: Diagram, body: list[Site], done: Mapping[int, Shape]) -> Shape:
        callees = tuple(done[id(s.node.ref.graph)].serial for s in body if s.node.kind is Kind.DIAGRAM)
        return _cached_shape(x, callees, self, body, done)


@per_graph_cache(key=lambda x, callees, algebra, body, done: callees)
def _cached_shape(x: Diagram, callees: tuple, algebra: ShapeAlgebra, body: list, done: Mapping[int, Shape]) -> Shape:
    """The fold's step for ``x``, kept while the definition and its callees' summaries stay."""
    return Algebra.definition(algebra, x, body, done)


def shape(d: Diagram) -> Shape:
    """The summary of ``d`` as a definition, each reachable definition computed once
    (cached per definition while neither it nor anything it uses changes)."""
    return fold(d, ShapeAlgebra())[id(d.graph)]


def _add_scanned(time: dict, memory: dict, labels: Labels, node: Box, callee: Shape) -> None:
    """A scan runs its body once per step of every SIMD index around it (the scanned one
    included), a repeat once per copy too, and training keeps every step's intermediate
    values: both costs are the body's times the box's SIMD dimensions (and count)."""
    sub = {g: dim for g, dim in node.generics}
    steps = _of_dims([dim for _, dim in node.simd] + ([node.count] if repeated(node) else []))
    for items, into in ((callee.time, time), (callee.memory, memory)):
        body = frozenset().union(*items.values()) if items else frozenset()
        _add(into, labels, _times(_substitute(prune(body), sub), steps))


def _place(lab: Labels, ints: Ints, ins: list, iterated: list, index: dict, r: int, env: dict) -> Ints | None:
    """A callee output's axes seen from the caller (whose wire has ``r`` axes, the box's
    SIMD indices ``index`` first), or None when some are missing (expand's ``_settle``)."""
    n = len(index)
    if ints[0] == "p":
        if lab is not FULL:
            got: set = set()
            for k in lab:
                got |= iterated[k]
            if len(got & index.keys()) < n:
                return None
        return ("p", tuple(range(n)) + tuple(n + x for x in ints[1]))
    _, k, g = ints
    w, axes = ins[k]
    h = tuple(index[a] if isinstance(a, str) else n + g[a] for a in axes)
    if set(h) != set(range(r)):
        return None
    outer = env[w][1]
    if outer[0] == "p":
        return ("p", tuple(h[x] for x in outer[1]))
    return ("i", outer[1], tuple(h[x] for x in outer[2]))


def _canonical_fixes(d: Diagram, s: Shape) -> list[int]:
    """The outputs of the top diagram that expand() reorders with a ``reindex`` box."""
    bad = []
    for w, (_lab, ints) in zip(d.outputs, s.outs):
        order = ints[1] if ints[0] == "p" else ints[2]
        if tuple(order) != tuple(range(len(d.wire_type(w)))):
            bad.append(w)
    return bad


def expanded_counts(d: Diagram) -> Counter:
    """Boxes by kind of ``d.expand()``, without expanding."""
    s = shape(d)
    counts = Counter(s.counts)
    fixes = len(_canonical_fixes(d, s))
    if fixes:
        counts["reindex"] += fixes
    return +counts


def expanded_box_count(d: Diagram) -> int:
    """``len(d.expand())``, without expanding: linear in the source."""
    return sum(expanded_counts(d).values())


def cost_monomials(d: Diagram) -> tuple[frozenset, frozenset]:
    """The (time, memory) monomials of ``d.expand()`` that no other one covers."""
    s = shape(d)
    time: set = set()
    memory: set = set()
    for ms in s.time.values():
        time |= ms
    for ms in s.memory.values():
        memory |= ms
    for w in d.inputs:
        memory |= _of_dims(d.wire_type(w))
    for w in _canonical_fixes(d, s):
        time |= _of_dims(d.wire_type(w))
        memory |= _of_dims(d.wire_type(w))
    return prune(time), prune(memory)


