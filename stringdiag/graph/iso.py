"""Equality of diagrams up to isomorphism: colour refinement, confirmed exactly.

Names of wires and of SIMD indices are presentation, not structure: two diagrams that
differ only by renaming, or by the order of independent statements, are equal. What
counts is the boxes, their SIMD dimensions, how each input axis is indexed, the wire
types, and the order of the diagram's inputs and outputs. A contraction's local axes count as iterated
indices: ``y[i] = sum_j a[i, j] * v[j]`` and ``y[i, c] = sum_j a[i, j] * v[j, c]`` are one
diagram.

Weight sets are structure (``weights.py``): boxes that share one set are joined to one
``weights`` node, so ``H(x) + H(x)`` (two sets) and ``a = H(x); a + a`` (one set, copied)
differ, while the names of local sets (``H#1/F``) are presentation like any other name. A
global learnable keeps its name in its label: it is one function wherever it appears.

The structure compared is :func:`labelled`'s: a simple digraph whose nodes (wires, boxes,
weight sets) and edges (ports, axes; a wire read twice by one box is one edge with both
labels) carry strings. :func:`labelled` builds it as a networkx graph, the reference;
the fast checks build the same thing as lists in one pass (``_graph``), then:

1. *Colour.* Nodes are classed by label and by two hashes of their unfolding trees, of
   everything before and of everything after them (one pass each in topological order;
   only ints and tuples of ints are hashed, so no PYTHONHASHSEED). Nodes that colour
   refinement cannot tell apart hash alike, so this only saves refinement rounds: on a
   deep diagram it tells the layers apart at once. Classes are numbered in sorted order.
2. *Refine* to the stable (equitable) partition: any two nodes of a class have, for
   every edge label and direction, as many neighbours in every class. First every class
   of several nodes is split by its nodes' full signatures; then Hopcroft's method, a
   batch of splitters at a time: a split class queues all its pieces but the largest, so
   a node takes part in O(log n) splits. New classes are numbered by signature, never by
   node ids, so the numbering and the *trace* (the initial classes, every split and how
   each class answered) are invariants: isomorphic diagrams give equal traces.
3. *Confirm.* When every class is one node (usual: inputs, outputs and ports are
   ordered), the bijection is forced: map class to class and check every labelled edge
   in one pass. Otherwise (symmetric diagrams: identical branches) *individualise* a node
   of the smallest class of several, refine again and go on depth-first, trying every
   node of the other diagram's class against that fixed choice and backtracking; a
   candidate whose trace differs is cut at once.

``isomorphic`` answers ``True`` only after checking an explicit label-preserving bijection
edge by edge, so it never equates two different diagrams; equal traces are necessary, so
it never misses an isomorphism. Everything is near-linear (a sort of the nodes aside).
``canonical_hash`` digests the trace of the stable colouring and the edges between its
classes: equal for isomorphic diagrams, and a complete invariant when the colouring is
discrete. ``isomorphic_vf2`` is the old exact check, networkx's VF2 on :func:`labelled`,
kept as the reference for tests.
"""
from __future__ import annotations

from operator import attrgetter, itemgetter
from typing import TYPE_CHECKING

from .box import Box, Global, Kind, Local, Wire
from .hypergraph import Hypergraph, per_graph_cache
from .gcpause import gc_paused
from .weights import weight_key

if TYPE_CHECKING:  # networkx is imported by the reference checks only (it is slow to import)
    import networkx as nx


def _value(v) -> str:
    return "''" if v is None else repr(v)


def _box_label(box: Box, local: tuple = ()) -> str:
    """A box's label: its identity, up to the names of its labels (and of local weight sets)."""
    i = box.identity()
    simd = ",".join(str(d) for d in i.dims(i.simd)) + "".join(f",{d}" for d in local)
    summed = ",".join(str(d) for d in i.dims(i.summed))
    generics = ",".join(f"{g}={d}" for g, d in i.generics)
    return "|".join((i.kind, i.name, simd, i.loop, summed, generics, _value(i.value)))


def _axes_order(box: Box, n_local: int) -> dict:
    n = len(box.simd)
    order = {lab: k for k, (lab, _) in enumerate(box.simd)}
    # summed indices come after the local axes, so that a contraction's local axes can count
    # as iterated indices: y[i] = sum_j a[i, j] * v[j] is y[i, c] = sum_j a[i, j] * v[j, c]
    order.update({lab: n + n_local + k for k, (lab, _) in enumerate(box.summed)})
    return order


def _axes_label(box: Box, axes: tuple, n_local: int = 0) -> str:
    n = len(box.simd)
    order = _axes_order(box, n_local)
    if box.kind is Kind.CONTRACT:
        return ",".join(f"v{order[a]}" if isinstance(a, str) else f"v{n + a}" for a in axes)
    return ",".join(f"v{order[a]}" if isinstance(a, str) else str(a) for a in axes)


def labelled(d: Hypergraph) -> nx.DiGraph:
    """A simple digraph with string labels that capture the diagram up to renaming."""
    import networkx as nx

    h = nx.DiGraph()
    ins = _io_names(d)
    boxes = {b: d.record(b) for b in d.boxes()}
    for n in d.graph:
        box = boxes.get(n)
        if box is None:
            h.add_node(n, label="wire|" + ",".join(str(x) for x in d.wire_type(n)) + "|" + ",".join(ins.get(n, ())))
            continue
        local = d.local_out_type(n, 0) if box.kind is Kind.CONTRACT else ()
        h.add_node(n, label=_box_label(box, local))
        key = weight_key(box)
        if key is not None and not isinstance(box.weights, Global):
            h.add_node(("weights", key), label="weights")
            h.add_edge(("weights", key), n, label="w")
    for u, v, k, a in d.graph.edges(keys=True, data=True):
        if v in boxes:
            n_local = len(d.local_out_type(v, 0)) if boxes[v].kind is Kind.CONTRACT else 0
            lab = f"{k}:{_axes_label(boxes[v], a['axes'], n_local)}"
        else:
            lab = f"{k}"
        if h.has_edge(u, v):  # the same wire read twice by one box (x * x)
            h[u][v]["label"] = ";".join(sorted(h[u][v]["label"].split(";") + [lab]))
        else:
            h.add_edge(u, v, label=lab)
    return h


_terms = attrgetter("terms")  # of a Dim: what its string is made of
_first, _second = itemgetter(0), itemgetter(1)


# -- the labelled structure as lists --------------------------------------------------------
class _Graph:
    """:func:`labelled`'s graph as lists, for speed. Node ``i`` is ``keys[i]`` (a node of the
    diagram, or ``("weights", key)``) labelled ``node_labels[lab[i]]``; ``out[u]`` lists
    ``(v, k)`` and ``inn[v]`` lists ``(u, k)`` for every edge ``u -> v`` labelled
    ``edge_labels[k]`` (one edge per ordered pair: parallel edges merged, as in
    :func:`labelled`). Label numbers are local to the graph, in order of appearance."""

    __slots__ = ("keys", "lab", "node_labels", "out", "inn", "edge_labels")

    def __init__(self, keys, lab, node_labels, out, inn, edge_labels):
        self.keys, self.lab, self.node_labels = keys, lab, node_labels
        self.out, self.inn, self.edge_labels = out, inn, edge_labels

    def edges(self) -> list[tuple[int, int, str]]:
        el = self.edge_labels
        return [(u, v, el[k]) for u, vs in enumerate(self.out) for v, k in vs]


def _io_names(d: Hypergraph) -> dict:
    """The boundary positions a wire takes (``in0``, ``out1``): part of its label."""
    io: dict = {}
    for k, w in enumerate(d.inputs):
        io.setdefault(w, []).append(f"in{k}")
    for k, w in enumerate(d.outputs):
        io.setdefault(w, []).append(f"out{k}")
    return io


class _Labels:
    """Label strings numbered in order of appearance, with the memos that make labelling
    fast: a large diagram has many equal dimensions, and printing a ``Dim`` is slow."""

    def __init__(self):
        self.node_ids: dict[str, int] = {}
        self.edge_ids: dict[str, int] = {}
        self.strs: dict = {}  # Dim.terms -> str(Dim)
        self.wire_memo: dict = {}  # the terms of a wire type -> its label's number
        self.dims_memo: dict = {}  # the terms of some dimensions -> "d1,d2"

    def node(self, s: str) -> int:
        i = self.node_ids.get(s)
        if i is None:
            i = self.node_ids[s] = len(self.node_ids)
        return i

    def edge(self, s: str) -> int:
        return self.edge_ids.setdefault(s, len(self.edge_ids))

    def dim(self, x) -> str:
        try:
            key = x.terms
        except AttributeError:  # not a Dim
            return str(x)
        s = self.strs.get(key)
        if s is None:
            s = self.strs[key] = str(x)
        return s

    def dims(self, ys) -> str:
        return ",".join([self.dim(y) for y in ys])

    def wire(self, t: tuple, io: list | None) -> int:
        """A wire's label: its type, and where it is on the boundary."""
        try:
            tk = tuple(map(_terms, t))
        except AttributeError:  # not Dims
            tk = tuple(map(str, t))
        i = self.wire_memo.get(tk)
        if i is None:  # (numbered first even for a boundary wire: label numbers follow appearance)
            i = self.wire_memo[tk] = self.node("wire|" + self.dims(t) + "|")
        return self.node("wire|" + self.dims(t) + "|" + ",".join(io)) if io else i

    def simd(self, simd: tuple) -> str:
        try:  # many boxes, few kinds of SIMD boxes
            tk = tuple(map(_terms, map(_second, simd)))
        except AttributeError:  # not Dims
            return self.dims(map(_second, simd))
        dims = self.dims_memo.get(tk)
        if dims is None:
            dims = self.dims_memo[tk] = self.dims(map(_second, simd))
        return dims

    def box(self, box: Box, local: tuple) -> int:
        """A box's label: the same string as :func:`_box_label`, built from memoised parts and
        read from the record's own fields (those of ``box.identity()``: building the identity
        of every box of a fresh diagram is most of a first labelling's calls)."""
        summed, generics, loop = box.summed, box.generics, box.loop
        dims = self.simd(box.simd)
        s = "|".join((box.kind, box.name, dims + "".join(["," + self.dim(y) for y in local]) if local else dims,
                      "" if loop is None else loop.tag(),
                      self.dims(map(_second, summed)) if summed else "",
                      ",".join([f"{q}={self.dim(y)}" for q, y in generics]) if generics else "",
                      _value(box.value)))
        return self.node(s)


class _Builder:
    """:func:`labelled`'s graph as a :class:`_Graph`, in one pass over the diagram."""

    def __init__(self, d: Hypergraph):
        self.attr: dict = dict(d.records())  # node -> its Box or Wire
        self.succ = dict(d.graph.adjacency())  # u -> {v: {key: data}}
        self.keys = list(self.attr)
        self.index = {x: i for i, x in enumerate(self.keys)}
        self.labels = _Labels()
        self.lab: list[int] = []
        self.n_local: dict = {}  # contract box -> number of its local output axes
        self.contexts: list = [None] * len(self.keys)  # box -> what the axes labels of its inputs depend on
        self.context_ids: dict = {}
        self.weights: list = []  # (weights node, box index)
        self.io = _io_names(d)

    def build(self) -> _Graph:
        n = len(self.keys)
        for ix, (x, a) in enumerate(list(self.attr.items())):
            self.lab.append(self.labels.wire(a.type, self.io.get(x)) if a.__class__ is Wire else self.box(ix, x, a))
        self.out: list[list] = [[] for _ in range(n)]
        self.inn: list[list] = [[] for _ in range(n)]
        self.weight_nodes()
        axes_memo: dict = {}  # (port, axes, context) -> edge label number
        port_memo: dict = {}  # output port -> edge label number
        for u in range(n):
            if self.contexts[u] is None:
                self.wire_edges(u, axes_memo)
            else:
                self.box_edges(u, port_memo)
        L = self.labels
        return _Graph(self.keys, self.lab, list(L.node_ids), self.out, self.inn, list(L.edge_ids))

    def local(self, x, box: Box) -> tuple:
        """A contraction's local output axes (its label, and its inputs' axes, depend on them)."""
        outs = self.succ[x]
        if box.kind is not Kind.CONTRACT or not outs:
            return ()
        w0 = next(iter(outs)) if len(outs) == 1 else min(outs, key=lambda w: min(outs[w]))
        local = self.attr[w0].type[len(box.simd) - (1 if box.scan else 0):]
        self.n_local[x] = len(local)
        return local

    def box(self, ix: int, x, box: Box) -> int:
        local = self.local(x, box)
        ctx = (box.kind is Kind.CONTRACT, tuple(map(_first, box.simd)), tuple(map(_first, box.summed)), len(local))
        self.contexts[ix] = self.context_ids.setdefault(ctx, len(self.context_ids))
        if box.kind is Kind.DIAGRAM or box.weights.__class__ is Local:  # not a global learnable
            wk = weight_key(box)
            if wk is not None:
                self.weights.append((("weights", wk), ix))
        return self.labels.box(box, local)

    def weight_nodes(self) -> None:
        """One ``weights`` node per weight set, with an edge to every box computing with it."""
        if not self.weights:
            return
        wl, kw = self.labels.node("weights"), self.labels.edge("w")
        for wk, b in self.weights:
            i = self.index.get(wk)
            if i is None:
                i = self.index[wk] = len(self.keys)
                self.keys.append(wk)
                self.lab.append(wl)
                self.out.append([])
                self.inn.append([])
            self.out[i].append((b, kw))
            self.inn[b].append((i, kw))

    def wire_edges(self, u: int, memo: dict) -> None:
        """Edges from a wire to the boxes reading it, labelled by port and axes."""
        for y, kd in self.succ[self.keys[u]].items():
            v = self.index[y]
            if len(kd) == 1:
                ((k, data),) = kd.items()
                key = (k, data["axes"], self.contexts[v])
                e = memo.get(key)
                if e is None:
                    e = memo[key] = self.labels.edge(self.axes(y, k, data))
            else:  # the same wire read twice by one box (x * x): one edge, both labels
                e = self.labels.edge(";".join(sorted(self.axes(y, k, data) for k, data in kd.items())))
            self.out[u].append((v, e))
            self.inn[v].append((u, e))

    def axes(self, y, k: int, data: dict) -> str:
        return f"{k}:{_axes_label(self.attr[y], data['axes'], self.n_local.get(y, 0))}"

    def box_edges(self, u: int, memo: dict) -> None:
        """Edges from a box to its output wires, labelled by port."""
        for y, kd in self.succ[self.keys[u]].items():
            v = self.index[y]
            if len(kd) == 1:
                (k,) = kd
                e = memo.get(k)
                if e is None:
                    e = memo[k] = self.labels.edge(str(k))
            else:
                e = self.labels.edge(";".join(sorted(str(k) for k in kd)))
            self.out[u].append((v, e))
            self.inn[v].append((u, e))


def _graph(d: Hypergraph) -> _Graph:
    """The nodes, labels and edges of :func:`labelled` (the same strings), in one pass over
    the diagram, with the strings of dimensions, wire types and input axes memoised."""
    return _Builder(d).build()


def _from_labelled(h: nx.DiGraph) -> _Graph:
    """The :class:`_Graph` of any simple digraph whose nodes and edges carry a string
    ``label`` (:func:`labelled`'s, or made up: tests compare with networkx on such graphs)."""
    keys = list(h.nodes)
    index = {x: i for i, x in enumerate(keys)}
    node_ids: dict[str, int] = {}
    edge_ids: dict[str, int] = {}
    lab = [node_ids.setdefault(h.nodes[x]["label"], len(node_ids)) for x in keys]
    out: list[list] = [[] for _ in keys]
    inn: list[list] = [[] for _ in keys]
    for x, y, a in h.edges(data=True):
        e = edge_ids.setdefault(a["label"], len(edge_ids))
        out[index[x]].append((index[y], e))
        inn[index[y]].append((index[x], e))
    return _Graph(keys, lab, list(node_ids), out, inn, list(edge_ids))


def _ranks(labels: list[str]) -> list[int]:
    """The rank of each label among the sorted labels: numbers that mean the same in any graph
    with the same labels."""
    rank = {s: r for r, s in enumerate(sorted(labels))}
    return [rank[s] for s in labels]


# -- colour refinement -----------------------------------------------------------------------
_MASK = (1 << 64) - 1


def _unfold(nbrs: list[list[tuple[int, int]]], back: list[list[tuple[int, int]]], base: list[int],
            edge: list[int], order: list[int] | None = None) -> tuple[list[int], list[int]]:
    """For every node, a 64-bit hash of everything behind it along ``back`` (``nbrs`` are the
    same edges forwards): its label (``base``) and, for each edge behind it, the edge's label
    (``edge``) and the hash of the node at its other end, summed (so in no order). Computed in
    one pass in topological order (Kahn's algorithm; given as ``order`` if known); a node on or
    behind a cycle gets 0. A function of the node's unfolding tree, so equal for nodes that
    colour refinement cannot tell apart. Only ints and tuples of ints are hashed: the same in
    every run (no PYTHONHASHSEED). Returns the hashes and the topological order."""
    n = len(nbrs)
    h = [0] * n
    if order is None:
        indeg = [len(vs) for vs in back]
        order = [v for v, k in enumerate(indeg) if not k]
        for u in order:  # grows as it goes
            for v, _ in nbrs[u]:
                indeg[v] -= 1
                if not indeg[v]:
                    order.append(v)
    for u in order:
        s = base[u]
        for w, k in back[u]:
            s += edge[k] ^ h[w]
        h[u] = hash((s,)) & _MASK
    return h, order


class _Colouring:
    """A partition of the nodes of a :class:`_Graph` into classes numbered from 0:
    ``colour[v]`` is the class of ``v``; ``multi[c]`` the nodes of a class of several;
    ``first[c]`` the node of a class of one. ``code_out[k]`` / ``code_in[k]`` number the
    graph's edge label ``k`` canonically, as seen from the tail / the head; ``k2`` bounds them."""

    __slots__ = ("g", "colour", "multi", "first", "next_id", "code_out", "code_in", "k2")

    def __init__(self, g: _Graph, colour: list[int], multi: dict, first: list[int], code_out: list[int],
                 code_in: list[int], k2: int):
        self.g, self.colour, self.multi, self.first = g, colour, multi, first
        self.next_id = len(first)
        self.code_out, self.code_in, self.k2 = code_out, code_in, k2

    @staticmethod
    def initial(g: _Graph) -> tuple["_Colouring", tuple]:
        """Classes by label and by hashes of everything before and after each node (which tell
        the layers of a deep diagram, and most of the rest, apart before any refinement; nodes
        that refinement cannot tell apart hash alike, so the stable partition is refinement's
        all the same), numbered in sorted order; and the first entry of the trace."""
        n = len(g.lab)
        nrank = _ranks(g.node_labels)
        erank = _ranks(g.edge_labels)
        code_out, code_in = [2 * r for r in erank], [2 * r + 1 for r in erank]
        mixed = [hash((r, -2)) & _MASK for r in nrank]
        base = [mixed[lb] for lb in g.lab]
        up, order = _unfold(g.out, g.inn, base, [hash((c, -3)) & _MASK for c in code_in])
        down, _ = _unfold(g.inn, g.out, base, [hash((c, -4)) & _MASK for c in code_out],
                          order[::-1] if len(order) == n else None)
        keys = [(nrank[lb] << 128) | (x << 64) | y for lb, x, y in zip(g.lab, up, down)]
        order = sorted(range(n), key=keys.__getitem__)
        colour = [0] * n
        multi: dict = {}
        if len(set(keys)) == n:  # discrete already (usual): class c is the c-th node in order
            first = order
            for c, v in enumerate(order):
                colour[v] = c
        else:
            first = []
            prev, c = None, -1
            for v in order:
                key = keys[v]
                if key != prev:
                    prev = key
                    c += 1
                    first.append(v)
                else:
                    cell = multi.get(c)
                    if cell is None:
                        multi[c] = {first[c], v}
                    else:
                        cell.add(v)
                colour[v] = c
        trace_start = (tuple(sorted(g.node_labels)), tuple(sorted(g.edge_labels)), [keys[v] for v in order])
        return _Colouring(g, colour, multi, first, code_out, code_in, 2 * len(erank) + 2), trace_start

    def copy(self) -> "_Colouring":
        return _Colouring(self.g, self.colour[:], {c: set(m) for c, m in self.multi.items()}, self.first[:],
                          self.code_out, self.code_in, self.k2)

    def _split(self, c: int, grp: dict, answers: list, queue: list) -> None:
        """Split class ``c`` by the signatures of its nodes (``grp``: signature -> nodes; the
        nodes of ``c`` it lacks answered nothing). The untouched rest keeps the number, else the
        piece of the least signature does; the others are numbered in order of signature. All
        pieces but the largest join ``queue``: the partition is already stable with respect to
        their union, hence to the largest once it is with respect to the rest."""
        multi, colour, first = self.multi, self.colour, self.first
        cell = multi[c]
        sigs = sorted(grp)
        pieces = [grp[sig] for sig in sigs]
        rest = len(cell) - sum(map(len, pieces))
        answers.append((c, tuple([(sig, len(p)) for sig, p in zip(sigs, pieces)]), rest))
        if rest:
            sizes = [rest] + [len(p) for p in pieces]
        else:
            sizes = [len(p) for p in pieces]
            pieces = pieces[1:]
        nid = self.next_id
        self.next_id += len(pieces)
        ids = [c] + list(range(nid, self.next_id))
        for p in pieces:
            first.append(p[0])
            if len(p) > 1:
                multi[nid] = set(p)
            cell.difference_update(p)
            for v in p:
                colour[v] = nid
            nid += 1
        if len(cell) == 1:
            del multi[c]
            (first[c],) = cell
        del ids[sizes.index(max(sizes))]
        queue += ids

    def refine_all(self, trace: list) -> None:
        """Refine to the coarsest equitable partition below this one, every class a splitter
        at first: each node of a class of several gets the signature of its edges (label,
        direction, class at the other end); then :meth:`refine` by the pieces."""
        colour, k2, out, inn = self.colour, self.k2, self.g.out, self.g.inn
        co, ci = self.code_out, self.code_in
        splits = []
        answers: list = []
        for c, cell in sorted(self.multi.items()):  # in order of number
            grp: dict = {}
            for v in cell:
                # v's out-edge to w is an in-edge of w: as w's class sees it, code_in
                codes = [colour[w] * k2 + ci[k] for w, k in out[v]] + [colour[w] * k2 + co[k] for w, k in inn[v]]
                codes.sort()
                sig = tuple(codes)
                same = grp.get(sig)
                if same is None:
                    grp[sig] = [v]
                else:
                    same.append(v)
            if len(grp) > 1:
                splits.append((c, grp))
            else:
                answers.append((c, next(iter(grp))))
        queue: list = []
        for c, grp in splits:
            self._split(c, grp, answers, queue)
        answers.sort()
        trace.append(("all", tuple(answers)))
        self.refine(queue, trace)

    def refine(self, queue: list[int], trace: list) -> None:
        """Refine to the coarsest equitable partition below this one, given that it is stable
        with respect to every class not in ``queue``; append the trace.

        Hopcroft's method, a batch at a time: every queued class is a splitter; each node of a
        class of several adjacent to one gets the signature (splitter, edge label, direction)
        of its edges into them, and a class whose nodes answer differently splits by answer."""
        colour, multi, first, k2, out, inn = self.colour, self.multi, self.first, self.k2, self.g.out, self.g.inn
        co, ci = self.code_out, self.code_in
        batch = sorted(set(queue))
        while batch:
            hits: dict[int, list] = {}  # only nodes of classes of several: a class of one cannot split
            for s in batch:
                base = s * k2
                for u in multi[s] if s in multi else (first[s],):
                    for v, k in out[u]:  # v has an in-edge from the splitter
                        if colour[v] in multi:
                            h = hits.get(v)
                            if h is None:
                                hits[v] = [base + ci[k]]
                            else:
                                h.append(base + ci[k])
                    for v, k in inn[u]:  # v has an out-edge into the splitter
                        if colour[v] in multi:
                            h = hits.get(v)
                            if h is None:
                                hits[v] = [base + co[k]]
                            else:
                                h.append(base + co[k])
            bycell: dict[int, dict] = {}
            for v, ks in hits.items():
                c = colour[v]
                if len(ks) > 1:
                    ks.sort()
                sig = tuple(ks)
                grp = bycell.get(c)
                if grp is None:
                    bycell[c] = {sig: [v]}
                else:
                    same = grp.get(sig)
                    if same is None:
                        grp[sig] = [v]
                    else:
                        same.append(v)
            answers: list = []
            queue = []
            for c in sorted(bycell):
                grp = bycell[c]
                if len(grp) == 1:
                    ((sig, members),) = grp.items()
                    if len(members) == len(multi[c]):  # the class answers as one
                        answers.append((c, sig))
                        continue
                self._split(c, grp, answers, queue)
            trace.append((tuple(batch), tuple(answers)))
            batch = sorted(queue)

    def individualise(self, v: int, trace: list) -> None:
        """Give ``v`` (of a class of several) a class of its own, and refine."""
        c = self.colour[v]
        cell = self.multi[c]
        cell.discard(v)
        if len(cell) == 1:
            del self.multi[c]
            (self.first[c],) = cell
        nid = self.next_id
        self.next_id += 1
        self.first.append(v)
        self.colour[v] = nid
        trace.append(("individualise", c))
        self.refine([nid], trace)

    def target(self) -> int | None:
        """The smallest class of several nodes (the first such by number), if any."""
        best, size = None, 0
        for c, m in self.multi.items():
            if best is None or len(m) < size or (len(m) == size and c < best):
                best, size = c, len(m)
        return best

    def edges(self) -> list[int]:
        """Every edge as one number, ``(class of tail, class of head, label)``, sorted: equal
        for two discrete partitions numbered alike exactly when class-to-class is an
        isomorphism; otherwise the quotient's edges with their multiplicities."""
        colour, co, n, k2 = self.colour, self.code_out, self.next_id, self.k2
        return sorted([(cu * n + colour[v]) * k2 + co[k]
                       for cu, vs in zip(colour, self.g.out) for v, k in vs])


def _stable(g: _Graph) -> tuple[_Colouring, list]:
    col, first = _Colouring.initial(g)
    trace: list = [first]
    col.refine_all(trace)
    return col, trace


def canonical_hash(d: Hypergraph) -> str:
    """A hash equal for isomorphic diagrams (and, in practice, different otherwise): a digest
    of the labels, of the trace of colour refinement to the stable partition, and of the
    edges between classes (a canonical form of the diagram when every class is one node).
    The same in every run: nothing hashed but ints and tuples of ints (no PYTHONHASHSEED),
    and blake2b at the end."""
    import hashlib  # here, not at import: it loads OpenSSL, a few ms of every command's start

    with gc_paused():
        col, trace = _stable(_graph(d))
        h = hashlib.blake2b(digest_size=16)
        h.update(repr(trace).encode())
        h.update(repr(col.edges()).encode())
        return h.hexdigest()


def definition_key(defn: Hypergraph) -> tuple[str, str]:
    """What a definition computes, for telling two definitions apart: its name and the hash of
    its body (two files may each define a ``dot`` and mean different things). Cached."""
    return defn.name, _body_hash(defn)


@per_graph_cache
def _body_hash(defn: Hypergraph) -> str:
    return canonical_hash(defn)


def _confirm(ca: _Colouring, cb: _Colouring) -> bool:
    """Both partitions discrete and numbered alike: is class to class (which keeps labels) an
    isomorphism? One pass over the edges; the numbers of edges are equal, so it is if every
    edge of one diagram is an edge of the other with the same label."""
    first_b = cb.first
    m = [first_b[c] for c in ca.colour]
    n = len(m)
    code_a, code_b = ca.code_out, cb.code_out
    edges_b = {u * n + v: code_b[k] for u, vs in enumerate(cb.g.out) for v, k in vs}
    for u, vs in enumerate(ca.g.out):
        mu = m[u] * n
        for v, k in vs:
            if edges_b.get(mu + m[v]) != code_a[k]:
                return False
    return True


def isomorphic(a: Hypergraph, b: Hypergraph) -> bool:
    """Exact check: equal labels, equal refinement traces, then a bijection confirmed edge by
    edge (searching by individualisation and refinement where the partition is not discrete)."""
    with gc_paused():
        return _isomorphic(_graph(a), _graph(b))


def _isomorphic(ga: _Graph, gb: _Graph) -> bool:
    if len(ga.lab) != len(gb.lab) or sum(map(len, ga.out)) != sum(map(len, gb.out)):
        return False
    if len(ga.node_labels) != len(gb.node_labels) or len(ga.edge_labels) != len(gb.edge_labels):
        return False
    ca, ta = _stable(ga)
    cb, tb = _stable(gb)
    if ta != tb:  # the labels, the classes and every split, in order
        return False
    # depth-first individualisation-refinement, with an explicit stack (symmetric diagrams
    # can need as many levels as they have interchangeable parts)
    stack: list = []
    while True:
        c = ca.target()
        if c is None:  # discrete: the bijection is forced; every edge must agree
            if _confirm(ca, cb):
                return True
        else:
            fixed = ca.copy()
            trace: list = []
            fixed.individualise(min(ca.multi[c]), trace)
            stack.append((fixed, trace, cb, iter(sorted(cb.multi[c]))))
        # the next candidate, at the deepest level that has one left
        while stack:
            fixed, trace, parent, candidates = stack[-1]
            for w in candidates:
                trial = parent.copy()
                tw: list = []
                trial.individualise(w, tw)
                if tw == trace:
                    ca, cb = fixed, trial
                    break
            else:
                stack.pop()
                continue
            break
        else:
            return False


def isomorphic_vf2(a: Hypergraph, b: Hypergraph) -> bool:
    """The reference check: networkx's VF2 on :func:`labelled` (slow on large diagrams)."""
    import networkx as nx

    ha, hb = labelled(a), labelled(b)
    same = lambda x, y: x["label"] == y["label"]  # noqa: E731
    return nx.is_isomorphic(ha, hb, node_match=same, edge_match=same)
