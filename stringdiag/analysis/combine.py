"""What a diagram's expansion holds, computed per definition and combined, never expanded.

``d.expand()`` inlines every definition, so a file whose definitions each use the previous
one twice expands to ``2^n`` boxes. Everything ``stringdiag info`` and a derivation's table
report about the expansion (boxes by kind, asymptotic cost, learnable boxes, weight sets
and parameter counts) is instead computed once per definition from its own body and the
summaries of the definitions it uses, and combined: linear in the source, not in the
expansion. The results are those of the expansion (``tests/test_info_linear.py`` compares
the two).

How a definition's boxes land in the expansion (``graph/expand.py``):

- each box of its body becomes one box, except a ``diagram`` box that is not a ``scan`` or a
  ``repeat``, which is replaced by the boxes of its callee (a repeat's body counts t times in
  cost, parameters and weight sets, as the compiler runs it: never unrolled here);
- an inlined box whose output ignores one of the box's SIMD indices (a copy-SIMD input
  passed straight through, a learnable tensor) is broadcast by one ``reindex`` box, and so
  is an output of the top diagram whose axes come out of order;
- a box sits only in those enclosing SIMD boxes that its inputs depend on ("tightening").

The last point is what the cost depends on. Per definition we record, for every wire,
*which of the definition's inputs* its enclosing SIMD indices come from (or ``FULL``: every
enclosing index, after a broadcast), and which axes it carries in what order; a caller
turns the callee's inputs into its own wires. The cost of a definition is a set of
monomials per such dependency, multiplied by the caller's SIMD dimensions where used.

Weight sets (``graph/weights.py``): a global learnable box is one set however often it is
used; a local one (declared in a definition's body) is one set per *instance* of that
definition, and two ``diagram`` boxes with the same ``instance`` are one instance.
"""
from __future__ import annotations

import itertools
import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Mapping

from ..graph.box import Box, Kind
from ..graph.budget import bind_generics
from ..graph.constants import dims_in
from ..graph.decls import Approximator
from ..graph.diagram import Diagram
from ..graph.hypergraph import count_value, per_graph_cache, repeated
from ..graph.types import Dim, show_type, substitute_type
from ..errors import DiagError
from .monomials import Monomial, monomials, multiply, prune

FULL = None  # a wire inside every enclosing SIMD box (the labels of a broadcast)
Labels = Any  # FULL, or a frozenset of the definition's input positions
# the order of a wire's own (non-context) axes: ("p", order) for a wire made in the body,
# ("i", j, g) for a view of input j whose axis v is the wire's axis g[v]
Ints = tuple


# -- a definition's body, in the order expand() inlines it ------------------------------

@per_graph_cache
def _body(d: Diagram) -> tuple[int, list[tuple[int, dict, list, list]]]:
    """The graph's version, and (box, node, inputs (wire, axes), output wires) in topological
    order: cached per graph."""
    return d.version(), [(b, d.record(b), d.box_inputs(b), d.box_outputs(b)) for b in d.topological_boxes()]


def _inlined(node: Box) -> bool:
    return node.kind is Kind.DIAGRAM and not node.scan and not repeated(node)


def _copies(node: Box, sizes: Mapping[str, int | None] | None = None) -> int | None:
    """How many times a box runs its body in sequence: a repeat's count (None when it names a
    size not given), else 1."""
    return count_value(node.repeat.count, node.ref.program, sizes or {}) if repeated(node) else 1


def _opened(node: Box) -> bool:
    """A box whose body counts: inlined by ``expand``, or scanned (the compiler runs its
    body once per step, with weights of its own)."""
    return node.kind is Kind.DIAGRAM


Reached = list  # of (definition, version, body), callees first


def _post_order(d: Diagram, through: Callable[[Mapping], bool]) -> Reached:
    """Definitions reachable from ``d`` through boxes ``through`` accepts, callees first."""
    order: Reached = []
    state: dict[int, int] = {}
    stack: list[tuple[Diagram, Any]] = [(d, None)]
    while stack:
        x, done = stack.pop()
        key = id(x.graph)
        if done is not None:
            if state.get(key) != 2:
                state[key] = 2
                order.append((x, *done))
            continue
        if key in state:
            continue
        state[key] = 1
        version, body = _body(x)
        stack.append((x, (version, body)))
        for _b, node, _i, _o in reversed(body):
            if node.kind is Kind.DIAGRAM and through(node) and id(node.ref.graph) not in state:
                stack.append((node.ref, None))
    return order


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
    """Collect monomials under a dependency (pruned once the body is done: ``_shape``)."""
    if ms:
        items.setdefault(key, set()).update(ms)


def _join(a: Labels, b: Labels) -> Labels:
    return FULL if a is FULL or b is FULL else a | b


# -- structure: counts and cost of one instance of a definition --------------------------

@dataclass
class Shape:
    """What one use of a definition expands to, whatever the SIMD boxes around it."""

    counts: Counter  # expanded boxes by kind
    outs: list[tuple[Labels, Ints]]  # per output: where its enclosing indices come from, its axes
    time: dict  # Labels -> monomials (in the definition's own dimension names)
    memory: dict  # Labels -> monomials of its wires
    serial: int = field(default_factory=lambda: next(_serials))  # tells a recomputed summary apart


_serials = itertools.count()


def shape(d: Diagram) -> Shape:
    """The summary of ``d`` as a definition, each reachable definition computed once
    (cached per definition while neither it nor anything it uses changes)."""
    done: dict[int, Shape] = {}
    for x, _version, body in _post_order(d, _opened):
        callees = tuple(done[id(node.ref.graph)].serial for _b, node, _i, _o in body if _opened(node))
        done[id(x.graph)] = _cached_shape(x, callees, body, done)
    return done[id(d.graph)]


@per_graph_cache(key=lambda x, callees, body, done: callees)
def _cached_shape(x: Diagram, callees: tuple, body: list, done: dict) -> Shape:
    """:func:`_shape`, kept while the definition and the summaries of its callees stay."""
    return _shape(x, body, done)


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

    def __init__(self, d: Diagram, done: Mapping[int, Shape]):
        self.d, self.done = d, done
        self.combined: dict[tuple, frozenset] = {}  # a callee's cost placed in this body, by (cost, generics, SIMD)
        self.counts: Counter = Counter()
        self.time: dict = {}
        self.memory: dict = {}
        self.env: dict[int, tuple[Labels, Ints]] = {}
        for j, w in enumerate(d.inputs):
            self.env[w] = (frozenset({j}), ("i", j, tuple(range(len(d.wire_type(w))))))

    def shape(self, body: list) -> Shape:
        for _b, node, ins, outs in body:
            if _inlined(node):
                self.inline(node, ins, outs, self.done[id(node.ref.graph)])
            else:
                self.box(node, ins, outs)
        return Shape(self.counts, [self.env[w] for w in self.d.outputs],
                     {k: prune(v) for k, v in self.time.items()}, {k: prune(v) for k, v in self.memory.items()})

    def box(self, node: Box, ins: list, outs: list) -> None:
        """A box that stays one box (a scan included: its body's cost is added)."""
        d, env = self.d, self.env
        labels: Labels = frozenset()
        for w, _axes in ins:
            labels = _join(labels, env[w][0])
        self.counts[node.kind.value] += 1
        _add(self.time, labels, _own_time(d, node, ins, outs))
        if node.kind is Kind.DIAGRAM:  # a scan or a repeat
            _add_scanned(self.time, self.memory, labels, node, self.done[id(node.ref.graph)])
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
            placed = _place(lab, ints, ins, iterated, index, len(d.wire_type(w)), env)
            env[w] = self.broadcast(w) if placed is None else (lift(lab)[0], placed)

    def broadcast(self, w: int) -> tuple[Labels, Ints]:
        """An output the box's SIMD indices do not all reach: broadcast by a ``reindex`` box."""
        self.counts["reindex"] += 1
        ms = _of_dims(self.d.wire_type(w))
        _add(self.time, FULL, ms)
        _add(self.memory, FULL, ms)
        return (FULL, ("p", tuple(range(len(self.d.wire_type(w))))))


def _shape(d: Diagram, body: list, done: Mapping[int, Shape]) -> Shape:
    return _Summary(d, done).shape(body)


def _add_scanned(time: dict, memory: dict, labels: Labels, node: Box, callee: Shape) -> None:
    """A scan runs its body once per step of every SIMD index around it (the scanned one
    included), a repeat once per copy too, and training keeps every step's intermediate
    values: both costs are the body's times the box's SIMD dimensions (and count)."""
    sub = {g: dim for g, dim in node.generics}
    steps = _of_dims([dim for _, dim in node.simd] + ([node.repeat.count] if repeated(node) else []))
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


# -- dimensions ---------------------------------------------------------------------------

def _mentioned(x: Diagram) -> Iterable[str]:
    """The dimension names a body's wires, SIMD boxes, sums, generics' values and constants mention."""
    for w in x.wires():
        for dim in x.wire_type(w):
            yield from sorted(dim.names())
    for b in x.boxes():
        node = x.record(b)
        for _, dim in (*node.simd, *node.summed, *node.generics):
            yield from sorted(dim.names())
        if repeated(node):
            yield from sorted(node.repeat.count.names())
        if node.kind is Kind.CONST:  # s * total / r
            for dim in dims_in(node.value):
                yield from sorted(dim.names())


def dimensions(d: Diagram) -> dict[str, Diagram]:
    """Every dimension the compiled module of ``d`` needs a size for (those of ``d``'s own
    wires first), each with the definition that mentions it, whose program declares it.

    A definition's generics are bound by whoever uses it, so they are not needed, except
    the top diagram's own. Scanned bodies count (the compiler lowers them too)."""
    needs: dict[int, dict[str, Diagram]] = {}
    for x, _version, body in _post_order(d, _opened):
        names: dict[str, Diagram] = dict.fromkeys(_mentioned(x), x)
        for _b, node, _i, _o in body:
            if _opened(node):
                for n, owner in needs[id(node.ref.graph)].items():
                    names.setdefault(n, owner)
        bound = () if x is d else x.generics
        needs[id(x.graph)] = {n: owner for n, owner in names.items() if n not in bound}
    return needs[id(d.graph)]


# -- weights ----------------------------------------------------------------------------------

Decl = tuple  # (id of the declaring definition's graph, param): a local learnable declaration


@dataclass
class Weights:
    """The learnable boxes one instance of a definition expands to."""

    glob: Counter = field(default_factory=Counter)  # global weight set -> uses
    loc_uses: Counter = field(default_factory=Counter)  # local declaration -> uses
    loc_sets: Counter = field(default_factory=Counter)  # local declaration -> weight sets
    keys: frozenset = frozenset()  # global sets and local declarations reached
    has_local: bool = False
    listed: int = 0  # local weight sets as info lists them: a long stack's copies once (_collapsed)


def _param(node: Box) -> str:
    return node.param


def _segments(body: list) -> dict[int, str]:
    """The instance-path segment expand() gives each diagram box (``H#2``)."""
    seen: dict[str, int] = {}
    segs = {}
    for b, node, _i, _o in body:
        if node.kind is Kind.DIAGRAM:
            seen[node.op] = seen.get(node.op, 0) + 1
            segs[b] = node.instance or f"{node.op}#{seen[node.op]}"
    return segs


def weights(d: Diagram, through: Callable[[Mapping], bool] = _inlined) -> tuple[dict[int, Weights], dict[int, list]]:
    """Per reachable definition (by graph id) its Weights, and its body (``_body``).

    ``through`` says which diagram boxes are opened (inlined ones for ``info``; scanned
    ones too for the compiled module's parameters)."""
    done: dict[int, Weights] = {}
    bodies: dict[int, list] = {}
    for x, _version, body in _post_order(d, through):
        segs = _segments(body)
        w = Weights()
        keys: set = set()
        instances: set = set()
        for b, node, _i, _o in body:
            if node.kind is Kind.LEARN:
                if node.local:
                    decl = (id(x.graph), _param(node))
                    w.loc_uses[decl] += 1
                    w.listed += decl not in w.loc_sets
                    w.loc_sets[decl] = 1
                    keys.add(decl)
                    w.has_local = True
                else:
                    w.glob[_param(node)] += 1
                    keys.add(_param(node))
            elif node.kind is Kind.DIAGRAM and through(node):
                c = done[id(node.ref.graph)]
                t = _copies(node) or 1  # a count of unknown size counted once
                w.glob.update({k: n * t for k, n in c.glob.items()})
                w.loc_uses.update({k: n * t for k, n in c.loc_uses.items()})
                keys |= c.keys
                w.has_local |= c.has_local
                inst = (segs[b], id(node.ref.graph))
                if inst not in instances:
                    instances.add(inst)
                    sets = 1 if node.shared else t
                    w.loc_sets.update({k: n * sets for k, n in c.loc_sets.items()})
                    w.listed += c.listed * (1 if _collapsed(node, c) else sets)
        w.keys = frozenset(keys)
        done[id(x.graph)] = w
        bodies[id(x.graph)] = body
    return done, bodies


def _signature(d: Diagram, b: int, sub: Mapping[str, Dim]) -> str:
    ins = ", ".join(show_type(substitute_type(d.local_in_type(b, k), sub)) for k in range(len(d.box_inputs(b))))
    outs = ", ".join(show_type(substitute_type(d.local_out_type(b, k), sub)) for k in range(len(d.box_outputs(b))))
    ref = d.record(b).ref  # what a learnable box's declaration adds: its approximator, its bounds
    extra = ([ref.via.show()] if getattr(ref, "via", None) else []) + \
        [f"where {', '.join(f'{n} <= {m}' for n, m in ref.bounds)}"] * bool(getattr(ref, "bounds", ()))
    return " ".join([f"{ins} -> {outs}".strip()] + extra)


# at most this many weight sets are listed one by one; beyond, local ones are grouped by declaration
LIST_LIMIT = 1000


def _collapsed(node: Box, callee: Weights) -> bool:
    """A stack listed once for all its copies (``B#1/k<1000000000/F``): one of known count with
    weights of its own whose copies would make more than LIST_LIMIT lines."""
    t = _copies(node) if repeated(node) and not node.shared else None
    return t is not None and t > 1 and t * callee.listed > LIST_LIMIT


def learnables(d: Diagram, limit: int = LIST_LIMIT) -> list[dict]:
    """The learnable boxes of the compiled module (those of ``d.expand()`` and of the bodies
    of its scans): one entry per weight set in order of first use (name, box, signature,
    uses, shared), as ``info`` lists them.

    When there are more than ``limit`` weight sets, a local learnable with several weight
    sets is listed once for its declaration instead: name ``F (local to H)``, with
    ``weight_sets`` (how many the expansion holds: one per instance of ``H``), ``local_to``
    and ``uses`` (over all of its weight sets). A stack whose copies would take more than
    ``LIST_LIMIT`` lines is listed once, its path naming the count (``B#1/k<1000000000/F``),
    with ``weight_sets`` and ``uses`` over its copies."""
    ws, bodies = weights(d, through=_opened)
    top = ws[id(d.graph)]
    grouped = len(top.glob) + top.listed > limit
    entries: dict[Any, dict] = {}

    def walk(x: Diagram, path: str, sub: Mapping[str, Dim], here: int = 1) -> Counter:
        """List the weight sets of ``x`` not listed yet, each standing for ``here`` sets (the
        copies of the stacks around it listed once); returns the uses of local sets it counted."""
        body = bodies[id(x.graph)]
        segs = _segments(body)
        counted: Counter = Counter()
        walked: dict[tuple, Counter] = {}  # (instance, callee) -> the uses one copy adds
        for b, node, _i, _o in body:
            if node.kind is Kind.LEARN:
                local = bool(node.local)
                param = _param(node)
                group = grouped and local and x is not d
                key: Any = (id(x.graph), param) if group else f"{path}{param}" if local else param
                entry = entries.get(key)
                if entry is None:
                    sets = top.loc_sets[key] if group else here if local else 1
                    name = f"{param} (local to {x.name})" if group and sets > 1 else f"{path}{param}" if local else param
                    entry = entries[key] = {"name": name, "box": node.op, "signature": _signature(x, b, sub),
                                            "uses": top.loc_uses[key] if group else 0, "shared": not local}
                    if sets > 1:
                        entry["weight_sets"], entry["local_to"] = sets, x.name
                if local and not group:
                    entry["uses"] += here
                    counted[key] += here
            elif _opened(node):
                c = ws[id(node.ref.graph)]
                for seg, times, sets in _layer_segments(node, segs[b], c):
                    if (grouped or not c.has_local) and all(k in entries for k in c.keys):
                        break  # the copies list nothing new (their global uses are counted below)
                    inst = (seg, id(node.ref.graph))
                    if inst not in walked:
                        csub = {g: dim.substitute(sub) for g, dim in node.generics}
                        walked[inst] = walk(node.ref, f"{path}{seg}/", csub, here * sets)
                        counted.update(walked[inst])
                        times -= 1
                    for k, n in walked[inst].items():  # copies of an instance walked: the same weight sets again
                        entries[k]["uses"] += n * times
                        counted[k] += n * times
        return counted

    walk(d, "", {})
    for param, uses in top.glob.items():
        entries[param]["uses"] += uses
    return list(entries.values())


def _layer_segments(node: Box, seg: str, callee: Weights) -> Iterator[tuple[str, int, int]]:
    """The instance paths of the copies a box runs, each with how many copies run it and how
    many weight sets it stands for: ``B#1/0`` ... for a repeat with weights of its own, ``B#1``
    for all copies when shared; one path ``B#1/k<L`` stands for the copies of a count whose size
    is not given (counted once), ``B#1/k<1000000000`` for those of a long stack (_collapsed)."""
    t = _copies(node)
    if t is None:
        yield (seg if node.shared else f"{seg}/k<{node.repeat.count}"), 1, 1
    elif node.shared or not repeated(node):
        yield seg, t, 1
    elif _collapsed(node, callee):
        yield f"{seg}/k<{t}", 1, t
    else:
        yield from ((f"{seg}/{k}", 1, 1) for k in range(t))


# -- parameters --------------------------------------------------------------------------------

def _box_parameters(shapes_in: list[tuple[int, ...]], shapes_out: list[tuple[int, ...]], make: Callable,
                    cache: dict, via: Approximator | None = None) -> int:
    """Parameters of the module lower/ makes for a learnable box of these local shapes (by
    its own ``via`` clause if it has one, else by the policy's ``make``)."""
    if not shapes_in:
        return sum(math.prod(s) for s in shapes_out)  # a LearnableTensor
    n_in, n_out = sum(math.prod(s) for s in shapes_in), sum(math.prod(s) for s in shapes_out)
    key = (n_in, n_out, via)
    if key not in cache:
        cache[key] = make(n_in, n_out) if via is None else via_parameters(via, n_in, n_out)
    return cache[key]


def via_parameters(via: Approximator, i: int, o: int) -> int:
    """Parameters of ``via linear(...)`` / ``via mlp(...)`` (lower/approximators.py per_box)."""
    if via.policy == "linear":
        return i * o + (o if via.bias else 0)
    h = via.hidden or i
    return i * h + h * o + (h + o if via.bias else 0)


# Parameters of the modules lower/ builds for each approximator policy, by feature counts
# (in and out); the suite checks them against the compiled modules (test_info_linear.py).
FORMULAS: dict[str, Callable[[int, int], int]] = {
    "linear": lambda i, o: i * o + o,
    "mlp": lambda i, o: i * i + i + i * o + o,
}


def _counter(approximator: Any) -> Callable[[int, int], int]:
    if callable(approximator):
        return lambda i, o: sum(p.numel() for p in approximator(i, o).parameters())
    if approximator not in FORMULAS:
        raise DiagError(f"unknown approximator '{approximator}': use one of {', '.join(FORMULAS)} or a callable")
    return FORMULAS[approximator]


def parameter_count(d: Diagram, dims: Mapping[str, int], approximator: Any = "mlp") -> int:
    """How many parameters the compiled module of ``d`` has (``stringdiag compile``) with the
    sizes ``dims`` (every name the learnable boxes' types use, a generic top diagram's own
    parameters included): each weight set counted once, without expanding.

    Scanned definitions are opened too, as the compiler does: their weights are the body's."""
    make = _counter(approximator)
    cache: dict = {}
    ws, bodies = weights(d, through=_opened)
    memo: dict[tuple, int] = {}
    top = {n: v for n, v in dims.items()}

    def size(x: Diagram, b: int, env: Mapping[str, int | None]) -> int:
        n_in, n_out = len(x.box_inputs(b)), len(x.box_outputs(b))
        ref = x.record(b).ref
        bounds = ref.axis_bounds() if hasattr(ref, "axis_bounds") else ()  # a bounded seq axis: held at its bound
        ins = [tuple(_evaluate(dim, env) for dim in x.local_in_type(b, k)) for k in range(n_in)]
        outs = [tuple(bounds[i] if i < len(bounds) and bounds[i] else _evaluate(dim, env)
                      for i, dim in enumerate(x.local_out_type(b, k))) for k in range(n_out)]
        return _box_parameters(ins, outs, make, cache, getattr(ref, "via", None))

    def local(x: Diagram, env: dict[str, int | None], bound: tuple) -> int:
        """Parameters of the local weight sets of one instance of ``x`` (generics ``bound``)."""
        key = (id(x.graph), bound)
        if key in memo:
            return memo[key]
        total = 0
        body = bodies[id(x.graph)]
        segs = _segments(body)
        own: set = set()
        instances: set = set()
        for b, node, _i, _o in body:
            if node.kind is Kind.LEARN and node.local and _param(node) not in own:
                own.add(_param(node))
                total += size(x, b, env)
            elif node.kind is Kind.DIAGRAM and ws[id(node.ref.graph)].has_local:
                inst = (segs[b], id(node.ref.graph))
                if inst not in instances:
                    instances.add(inst)
                    sets = 1 if node.shared or not repeated(node) else _evaluate(node.repeat.count, env)
                    total += sets * local(node.ref, *bind_generics(node, env, top))
        memo[key] = total
        return total

    found: dict[str, int] = {}  # each global weight set once, sized at its first use

    def walk(x: Diagram, env: dict[str, int | None]) -> None:
        for b, node, _i, _o in bodies[id(x.graph)]:
            if node.kind is Kind.LEARN and not node.local:
                if _param(node) not in found:
                    found[_param(node)] = size(x, b, env)
            elif node.kind is Kind.DIAGRAM:
                c = ws[id(node.ref.graph)]
                if not all(k in found for k in c.keys if isinstance(k, str)):
                    walk(node.ref, bind_generics(node, env, top)[0])

    walk(d, dict(top))
    return local(d, dict(top), ()) + sum(found.values())


def _evaluate(dim: Dim, env: Mapping[str, int | None]) -> int:
    for n in dim.names():
        if env.get(n) is None:
            raise DiagError(f"no size for dimension '{n}' (give it in dims)")
    return dim.evaluate(env)


__all__ = ["shape", "dimensions", "expanded_counts", "expanded_box_count", "cost_monomials", "learnables", "parameter_count",
           "weights", "LIST_LIMIT"]
