"""The typed diagram graph (the data of :class:`~stringdiag.graph.diagram.Diagram`): boxes with ordered ports, wires carrying tensor types.

A diagram is a bipartite ``MultiDiGraph`` (``multigraph.py``) in the style of Chyp's hypergraphs:
wire nodes and box nodes, edges ``wire -> box`` (input port ``key``) and ``box -> wire``
(output port ``key``). A wire with several consumers is a copy; a wire with none is a
deletion. Both are the cartesian structure of the paper (Sec. 2), made implicit. Each node
stores one record, a :class:`~stringdiag.graph.box.Box` or a :class:`~stringdiag.graph.box.Wire`
(as Chyp keeps ``vdata``/``edata`` beside its topology); only this module knows where.

SIMD structure lives on the boxes. A box iterated over indices carries ``simd``, an
ordered tuple of ``(label, Dim)`` (outer to inner; the paper's nested dashed boxes).
Its output wires have type ``[dims of simd] + local output type``. Each input edge
carries ``axes``: for every axis of the incoming wire, either a SIMD label (that axis is
iterated) or an ``int`` (the axis becomes that local axis of the port). A SIMD label that
does not occur in an input's ``axes`` means the input is copied into every iteration
(copy-SIMD). A ``scan`` box iterates its innermost SIMD index sequentially, carrying a
residual from output port 0 back to input port 0 (finite iteration, App. A.1.3). A ``repeat``
box (a ``diagram`` box with ``repeat``, a :class:`Dim`, and ``shared``) applies its definition
that many times in sequence, its first input carried from copy to copy, the others read by
every copy; each copy has weights of its own unless ``shared`` (``weights.py``).

Box classes (:class:`~stringdiag.graph.box.Kind`):
``learn`` (universal approximator, filled), ``abstract`` (a family to instantiate, e.g.
``sim``), ``fixed`` (a primitive process of the prelude or a user declaration),
``random`` (a tensor drawn from N(0, 1) by its ``seed``, never trained),
``diagram`` (a definition used as a box), and three structural ones: ``contract``
(sum over ``summed`` indices of the product of its inputs), ``reindex`` (transpose,
broadcast) and ``const`` (a symbolic number).
"""
from __future__ import annotations

import weakref
from functools import wraps
from typing import Any, Callable, Iterable, Iterator, Mapping, Self, TypeVar

from ..errors import Pos
from ..syntax.records import Mutable, field
from .box import KINDS, Box, Identity, Instance, Kind, Wire
from .multigraph import MultiDiGraph, topological_sort
from .types import Dim, TensorType, show_type

Axes = tuple[Any, ...]  # str: a SIMD (or summed) label; int: a local axis
BOX_CLASSES = KINDS
_EDITS = "edits"  # the graph attribute counting edits (see Hypergraph.version)
_REC = "rec"  # a node's one attribute: its record, a Box or a Wire
_IDENT = "identity"  # a box's identity, once asked for (it goes with the record it was read from)
# Reads go to the node dicts (``graph._node``) directly: the public ``graph.nodes[n]`` is a
# Python call per read, and records are read many times over (isomorphism, matching, lowering).
_NONE = object()


def repeated(node: Box) -> bool:
    """A ``repeat`` box: one box for t copies of its definition in sequence."""
    return node.repeat is not None


def count_value(dim: Dim, program: Any, sizes: Mapping[str, int | None]) -> int | None:
    """A repeat count's value: its names sized by ``sizes``, else by their declared defaults;
    None when some size is neither given nor declared."""
    known = {n: v for n, v in sizes.items() if v is not None}
    for n in dim.names():
        decl = program.lookup_dim(n) if program is not None else None
        if n not in known and decl is not None and decl.default is not None:
            known[n] = decl.default
    return dim.evaluate(known) if all(n in known for n in dim.names()) else None


def per_graph_cache(fn: Callable | None = None, *, key: Callable | None = None, reentry: Any = _NONE):
    """Cache ``fn(d, *args)`` per graph while the graph's :meth:`~Hypergraph.version` (and
    ``key(d, *args)``, when given) stay the same: one entry per graph, dropped with it.
    ``reentry`` is what a call made while the same graph's value is being computed returns
    (a definition cannot use itself; a guard all the same)."""
    if fn is None:
        return lambda f: per_graph_cache(f, key=key, reentry=reentry)
    store: "weakref.WeakKeyDictionary[MultiDiGraph, tuple]" = weakref.WeakKeyDictionary()

    @wraps(fn)
    def cached(d: "Hypergraph", *args: Any) -> Any:
        k = (d.version(), key(d, *args) if key is not None else args)
        hit = store.get(d.graph)
        if hit is not None and hit[0] == k:
            return hit[1]
        if reentry is not _NONE:
            store[d.graph] = (k, reentry)
        value = fn(d, *args)
        store[d.graph] = (k, value)
        return value

    cached.cache = store  # type: ignore[attr-defined]  # (for tests)
    return cached


class Hypergraph(Mutable, frozen=False):
    """An open diagram as data: a graph with ordered input and output wires.

    Everything that builds or reads the graph lives here; operations that need the
    isomorphism, expansion or composition modules are on the subclass :class:`Diagram`
    (``diagram.py``), so those modules can work on this class without a cycle."""

    name: str
    graph: MultiDiGraph = field(default_factory=MultiDiGraph)
    inputs: list[int] = field(default_factory=list)
    outputs: list[int] = field(default_factory=list)
    input_names: list[str] = field(default_factory=list)
    generics: tuple[str, ...] = ()
    pos: Pos | None = None
    source: str = ""  # the program's file, for messages
    program: Any = None  # the Program this diagram belongs to (to look up definitions)
    _next: int = 0

    # -- building -------------------------------------------------------------------
    @property
    def last_id(self) -> int:
        """The last node id handed out. Ids only grow, so the nodes added since some moment
        are those above its ``last_id``."""
        return self._next

    def version(self) -> int:
        """The number of edits made to the graph, through the methods below (the only ones
        that change it: ``tests/test_layers.py`` checks that nothing outside ``graph/``
        mutates the networkx graph). Kept on the networkx graph, so every Hypergraph
        sharing that graph sees it; :func:`per_graph_cache` keys on it."""
        return self.graph.graph.get(_EDITS, 0)

    def edited(self) -> None:
        """Count an edit (every editing method calls it)."""
        self.graph.graph[_EDITS] = self.graph.graph.get(_EDITS, 0) + 1

    def new_id(self) -> int:
        """A new node id; ids only grow."""
        self._next += 1
        return self._next

    def add_wire(self, type_: TensorType, name: str | None = None, pos: Pos | None = None,
                 of: Dim | None = None) -> int:
        """A wire; ``of``: it carries token ids in 0, ..., of - 1 (``[s] of v``), not real numbers."""
        w = self.new_id()
        self.graph.add_node(w, **{_REC: Wire(tuple(type_), name, pos, of or None)})
        self.edited()
        return w

    def id_range(self, w: int) -> Dim | None:
        """The range of the token ids a wire carries (``[s] of v``), None for real numbers."""
        return self.graph._node[w][_REC].of

    def emit(self, box: Box, inputs: list[tuple[int, Axes]], out_types: list[TensorType],
             out_names: list[str | None] | None = None) -> tuple[int, list[int]]:
        """Add the box ``box`` reading ``inputs``, with new output wires of the local types
        ``out_types`` (the SIMD dims are prepended here). A use of a definition given no
        weights gets an instance of its own: its own weights (``weights.py``)."""
        b = self.new_id()
        if box.kind is Kind.DIAGRAM and box.weights is None:  # never an elaborator's op#k nor compose's op@k
            box = box._replace(weights=Instance(f"{box.op}#b{b}"))
        self.add(box, inputs, (), b)
        scan, dims = box.scan, tuple(d for _, d in box.simd)
        ranges = _out_ranges(self, box.kind, box.ref, box.generics, inputs, len(out_types))
        outs = []
        for port, t in enumerate(out_types):
            lead = dims[:-1] if (scan and port == 0) else dims
            outs.append(self.add_wire(lead + tuple(t), name=out_names[port] if out_names else None, pos=box.pos,
                                      of=ranges[port]))
            self.write(b, port, outs[-1])
        return b, outs

    # -- editing: every change to the graph goes through these ----------------------------
    def add(self, box: Box, inputs: Iterable[tuple[int, Axes]], outputs: Iterable[int] = (),
            b: int | None = None) -> int:
        """Add the box ``box`` reading ``inputs`` (wire, axes) and writing the existing wires ``outputs``."""
        assert isinstance(box.kind, Kind), box.kind  # a box of a known kind
        b = self.new_id() if b is None else b
        self.graph.add_node(b, **{_REC: box})
        for port, (w, axes) in enumerate(inputs):
            self.graph.add_edge(w, b, key=port, axes=tuple(axes))
        for port, w in enumerate(outputs):
            self.graph.add_edge(b, w, key=port)
        self.edited()
        return b

    def paste(self, d: "Hypergraph", glue: Mapping[int, int],
              recast: Callable[[Box | Wire], Box | Wire]) -> dict[int, int]:
        """Copy ``d``'s nodes (each record through ``recast``) and edges into this graph under
        new ids, except the wires of ``d`` in ``glue``, which are the given wires here. The map
        from ``d``'s nodes."""
        new = dict(glue)
        for n, rec in d.graph.nodes(data=_REC):
            if n not in new:
                new[n] = self.new_id()
                self.graph.add_node(new[n], **{_REC: recast(rec)})
        for u, v, k, a in d.graph.edges(keys=True, data=True):
            self.graph.add_edge(new[u], new[v], key=k, **a)
        self.edited()
        return new

    def write(self, b: int, port: int, w: int) -> None:
        """Box ``b`` writes wire ``w`` at output ``port``."""
        self.graph.add_edge(b, w, key=port)
        self.edited()

    def update(self, n: int, **fields: Any) -> None:
        """Change some fields of the record of box (or wire) ``n``: a field neither record has
        is an error (``_replace``), never a silently dropped key."""
        self.reset(n, self.graph.nodes[n][_REC]._replace(**fields))

    def reset(self, n: int, rec: Box | Wire) -> None:
        """Box (or wire) ``n`` becomes ``rec`` (its ports unchanged)."""
        a = self.graph.nodes[n]
        assert type(rec) is type(a[_REC]), (rec, a[_REC])  # a box stays a box, a wire a wire
        a.clear()
        a[_REC] = rec
        self.edited()

    def clone_box(self, b: int, out_names: list[str | None] | None = None) -> tuple[int, list[int]]:
        """A copy of box ``b`` reading the same wires, with output wires of its own."""
        nb = self.add(self.record(b), self.box_inputs(b))
        outs = []
        for port, w in enumerate(self.box_outputs(b)):
            wire = self.wire(w)
            outs.append(self.add_wire(wire.type, name=out_names[port] if out_names else wire.name, pos=wire.pos,
                                      of=wire.of))
            self.write(nb, port, outs[-1])
        return nb, outs

    def rewire(self, b: int, port: int, w: int, axes: Axes | None = None) -> None:
        """Input ``port`` of box ``b`` reads wire ``w`` (with ``axes``, else as before)."""
        (old, kept), = [(u, d["axes"]) for u, _, k, d in self.graph.in_edges(b, keys=True, data=True) if k == port]
        self.graph.remove_edge(old, b, key=port)
        self.graph.add_edge(w, b, key=port, axes=tuple(kept if axes is None else axes))
        self.edited()

    def replace_uses(self, old: int, new: int) -> list[int]:
        """Every reader of wire ``old`` reads ``new`` instead, and so does the diagram's
        output; the boxes that changed."""
        readers = self.consumers(old)
        for r, port in readers:
            self.rewire(r, port, new)
        self.outputs[:] = [new if o == old else o for o in self.outputs]
        return [r for r, _ in readers]

    def permute_inputs(self, b: int, perm: tuple[int, ...]) -> None:
        """Box ``b`` reads at port ``perm[k]`` what it read at port ``k``."""
        edges = list(self.graph.in_edges(b, keys=True, data=True))
        self.graph.remove_edges_from([(w, b, k) for w, _, k, _ in edges])
        for w, _, k, a in edges:
            self.graph.add_edge(w, b, key=perm[k], **a)
        self.edited()

    def remove_box(self, b: int, outputs: bool = True) -> None:
        """Remove box ``b`` (and, unless told not to, the wires it writes)."""
        self.graph.remove_nodes_from([b, *self.box_outputs(b)] if outputs else [b])
        self.edited()

    def remove_wire(self, w: int) -> None:
        self.graph.remove_node(w)
        self.edited()

    def drop_dead(self, among: set[int] | None = None) -> int:
        """Delete the boxes (of ``among``, or any) none of whose outputs is read or an output
        of the diagram, until none is left; how many went."""
        g = self.graph
        removed = 0
        outputs = set(self.outputs)
        while dead := [b for b in self.boxes() if (among is None or b in among)
                       and not any(g.out_degree(w) or w in outputs for w in self.box_outputs(b))]:
            for b in dead:
                self.remove_box(b)
            removed += len(dead)
        return removed

    # -- reading --------------------------------------------------------------------
    def is_box(self, n: int) -> bool:
        """Whether ``n`` is a box of this graph (not a wire, not gone)."""
        return n in self.graph._node and self.graph._node[n][_REC].__class__ is Box

    def boxes(self) -> Iterator[int]:
        return (n for n, r in self.graph.nodes(data=_REC) if r.__class__ is Box)

    def wires(self) -> Iterator[int]:
        return (n for n, r in self.graph.nodes(data=_REC) if r.__class__ is Wire)

    def records(self) -> Iterator[tuple[int, Box | Wire]]:
        """Every node with its record, in the graph's order."""
        return iter(self.graph.nodes(data=_REC))

    def record(self, b: int) -> Box:
        """Box ``b``'s record."""
        return self.graph._node[b][_REC]

    def wire(self, w: int) -> Wire:
        """Wire ``w``'s record."""
        return self.graph._node[w][_REC]

    def identity(self, b: int) -> Identity:
        """``record(b).identity()``, kept beside the record once asked for (readers of every
        box, such as isomorphism, ask for it many times over; an edit stores a new record
        and drops it)."""
        a = self.graph._node[b]
        i = a.get(_IDENT)
        if i is None:
            i = a[_IDENT] = a[_REC].identity()
        return i

    def wire_type(self, w: int) -> TensorType:
        return self.graph._node[w][_REC].type

    def wire_label(self, w: int) -> str | None:
        """The name a wire was given (None: unnamed)."""
        return self.graph._node[w][_REC].name

    def box_inputs(self, b: int) -> list[tuple[int, Axes]]:
        ins = sorted((k, w, d["axes"]) for w, _, k, d in self.graph.in_edges(b, keys=True, data=True))
        return [(w, axes) for _, w, axes in ins]

    def box_outputs(self, b: int) -> list[int]:
        return [w for _, w, _ in sorted(self.graph.out_edges(b, keys=True), key=lambda e: e[2])]

    def producer(self, w: int) -> int | None:
        preds = list(self.graph.predecessors(w))
        return preds[0] if preds else None

    def consumers(self, w: int) -> list[tuple[int, int]]:
        """(box, port) pairs reading this wire; more than one is a copy."""
        return [(b, k) for _, b, k in self.graph.out_edges(w, keys=True)]

    def local_in_type(self, b: int, port: int) -> TensorType:
        w, axes = self.box_inputs(b)[port]
        t = self.wire_type(w)
        loc = sorted((a, d) for a, d in zip(axes, t) if isinstance(a, int))
        return tuple(d for _, d in loc)

    def local_out_type(self, b: int, port: int) -> TensorType:
        box = self.record(b)
        n = len(box.simd) - (1 if box.scan and port == 0 else 0)
        return self.wire_type(self.box_outputs(b)[port])[n:]

    @property
    def input_types(self) -> list[TensorType]:
        return [self.wire_type(w) for w in self.inputs]

    @property
    def output_types(self) -> list[TensorType]:
        return [self.wire_type(w) for w in self.outputs]

    def signature(self) -> str:
        ins = ", ".join(show_type(self.wire_type(w), self.id_range(w)) for w in self.inputs)
        outs = ", ".join(show_type(t) for t in self.output_types)
        return f"{self.name} : {ins} -> {outs}"

    def __len__(self) -> int:
        """Number of boxes."""
        return sum(1 for _ in self.boxes())

    def topological_boxes(self) -> list[int]:
        """Boxes in an order where every box follows the producers of its inputs."""
        nodes = self.graph._node
        return [n for n in topological_sort(self.graph) if nodes[n][_REC].__class__ is Box]

    def copy(self, name: str | None = None) -> Self:
        """A copy with its own graph (the records are values, shared), so that rewriting it in
        place leaves the original, and anything cached about it, alone."""
        out = type(self)(name=name or self.name, graph=self.graph.copy(), inputs=list(self.inputs),
                         outputs=list(self.outputs), input_names=list(self.input_names),
                         generics=self.generics, pos=self.pos, source=self.source, program=self.program)
        out._next = self._next
        return out

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.signature()}, {len(self)} boxes>"


# a function of a graph that returns one of the same class (a Diagram's a Diagram); bound to the
# class itself, not its name, which typing would compile (the first compile() of a process sets up
# the interpreter's syntax-tree types, a millisecond of every start)
HG = TypeVar("HG", bound=Hypergraph)


def _out_ranges(d: Hypergraph, kind: str, ref: Any, generics, inputs, n: int) -> list[Dim | None]:
    """The range of the ids each new output wire of a box carries: a fixed box's declared ones
    (topk's indices, ``[k] of n``) at its dimension parameters, a reindex's input's."""
    if kind == Kind.REINDEX and inputs:
        return [d.id_range(next(iter(inputs))[0])] * n
    declared = getattr(ref, "out_ranges", None) if kind == Kind.FIXED else None
    if declared is None:
        return [None] * n
    sub = dict(generics)
    return [None if r is None else r.substitute(sub) for r in declared()]
