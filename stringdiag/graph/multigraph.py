"""The topology a diagram stores: a directed multigraph on plain dicts, read as networkx's.

Every command builds diagrams, and importing networkx costs more CPU than all the rest of a
short command's start-up (``benchmarks/bench_startup.py``). So a diagram's graph is this class:
networkx's ``MultiDiGraph`` data layout (``_node``, ``_succ`` = ``_adj``, ``_pred``, the
``graph`` dict; one key dict shared by ``_succ[u][v]`` and ``_pred[v][u]``) with the part of its
interface the tool reads, with the same meaning. networkx's algorithms read that layout and
those methods, so ``nx.topological_sort(d.graph)`` and the like still work where networkx is
imported anyway; ``tests/test_multigraph.py`` compares every method with networkx's own.
"""
from __future__ import annotations

from typing import Any, Iterable, Iterator

_ALL = object()


class MultiDiGraph:
    """Nodes with attribute dicts; edges ``u -> v`` told apart by a key, each with a dict."""

    def __init__(self) -> None:
        self.graph: dict = {}
        self._node: dict[Any, dict] = {}
        self._succ: dict[Any, dict[Any, dict]] = {}
        self._pred: dict[Any, dict[Any, dict]] = {}
        self._adj = self._succ

    # -- what networkx's algorithms ask first ----------------------------------------
    def is_directed(self) -> bool:
        return True

    def is_multigraph(self) -> bool:
        return True

    def __iter__(self) -> Iterator:
        return iter(self._node)

    def __len__(self) -> int:
        return len(self._node)

    def __contains__(self, n: Any) -> bool:
        try:
            return n in self._node
        except TypeError:  # unhashable: not a node
            return False

    def __getitem__(self, n: Any) -> dict:
        return self._succ[n]

    @property
    def succ(self) -> dict:
        return self._succ

    adj = succ

    @property
    def pred(self) -> dict:
        return self._pred

    def adjacency(self) -> Iterator[tuple[Any, dict]]:
        """``(node, {successor: {key: data}})`` for every node."""
        return iter(self._succ.items())

    def nbunch_iter(self, nbunch: Any = None) -> Iterator:
        """The nodes of ``nbunch``: all (None), one node, or those of an iterable in the graph."""
        if nbunch is None:
            return iter(self._node)
        if nbunch in self:
            return iter((nbunch,))
        return (n for n in nbunch if n in self._node)

    # -- nodes ------------------------------------------------------------------------
    @property
    def nodes(self) -> "NodeView":
        return NodeView(self._node)

    def has_node(self, n: Any) -> bool:
        return n in self

    def number_of_nodes(self) -> int:
        return len(self._node)

    order = number_of_nodes

    def add_node(self, n: Any, **attr: Any) -> None:
        if n not in self._node:
            self._succ[n], self._pred[n], self._node[n] = {}, {}, attr
        else:
            self._node[n].update(attr)

    def add_nodes_from(self, nodes: Iterable, **attr: Any) -> None:
        """Each a node, or a pair (node, its attributes)."""
        for n in nodes:
            if isinstance(n, tuple) and len(n) == 2 and isinstance(n[1], dict):
                self.add_node(n[0], **{**attr, **n[1]})
            else:
                self.add_node(n, **attr)

    def remove_node(self, n: Any) -> None:
        if n not in self._node:
            raise KeyError(f"The node {n} is not in the digraph.")
        for v in self._succ.pop(n):
            del self._pred[v][n]
        for u in self._pred.pop(n):
            del self._succ[u][n]
        del self._node[n]

    def remove_nodes_from(self, nodes: Iterable) -> None:
        """Nodes not in the graph are passed over, as networkx does."""
        for n in list(nodes):
            if n in self._node:
                self.remove_node(n)

    # -- edges ------------------------------------------------------------------------
    def add_edge(self, u: Any, v: Any, key: Any = None, **attr: Any) -> Any:
        """Add the edge (its key the smallest unused count when none is given); its key."""
        self.add_node(u)
        self.add_node(v)
        keys = self._succ[u].get(v)
        if keys is None:
            keys = self._succ[u][v] = self._pred[v][u] = {}
        if key is None:
            key = len(keys)
            while key in keys:
                key += 1
        keys.setdefault(key, {}).update(attr)
        return key

    def add_edges_from(self, edges: Iterable, **attr: Any) -> None:
        """Each ``(u, v)``, ``(u, v, key)``, ``(u, v, data)`` or ``(u, v, key, data)``."""
        for e in edges:
            key, data = None, {}
            if len(e) == 4:
                key, data = e[2], e[3]
            elif len(e) == 3:
                key, data = (None, e[2]) if isinstance(e[2], dict) else (e[2], {})
            self.add_edge(e[0], e[1], key, **{**attr, **data})

    def remove_edge(self, u: Any, v: Any, key: Any = None) -> None:
        """Remove the edge with ``key`` (none given: the last one added between u and v)."""
        try:
            keys = self._succ[u][v]
            keys.popitem() if key is None else keys.pop(key)
        except KeyError:
            raise KeyError(f"The edge {u}-{v} with key {key} is not in the graph.") from None
        if not keys:
            del self._succ[u][v], self._pred[v][u]

    def remove_edges_from(self, edges: Iterable) -> None:
        """Edges not in the graph are passed over, as networkx does."""
        for e in list(edges):
            try:
                self.remove_edge(e[0], e[1], e[2] if len(e) > 2 else None)
            except KeyError:
                pass

    def has_edge(self, u: Any, v: Any, key: Any = None) -> bool:
        keys = self._succ.get(u, {}).get(v)
        return keys is not None and (key is None or key in keys)

    def get_edge_data(self, u: Any, v: Any, key: Any = None, default: Any = None) -> Any:
        keys = self._succ.get(u, {}).get(v)
        if keys is None:
            return default
        return keys if key is None else keys.get(key, default)

    def number_of_edges(self, u: Any = None, v: Any = None) -> int:
        if u is None:
            return sum(len(keys) for nbrs in self._succ.values() for keys in nbrs.values())
        return len(self._succ.get(u, {}).get(v, {}))

    @property
    def edges(self) -> "EdgeView":
        return EdgeView(self, out=True)

    out_edges = edges

    @property
    def in_edges(self) -> "EdgeView":
        return EdgeView(self, out=False)

    def successors(self, n: Any) -> Iterator:
        return iter(self._succ[n])

    neighbors = successors

    def predecessors(self, n: Any) -> Iterator:
        return iter(self._pred[n])

    @property
    def out_degree(self) -> "DegreeView":
        return DegreeView(self, (self._succ,))

    @property
    def in_degree(self) -> "DegreeView":
        return DegreeView(self, (self._pred,))

    @property
    def degree(self) -> "DegreeView":
        return DegreeView(self, (self._succ, self._pred))

    def copy(self) -> "MultiDiGraph":
        """A copy with its own attribute dicts (their values shared), as networkx's ``copy``."""
        out = type(self)()
        out.graph.update(self.graph)
        for n, a in self._node.items():
            out.add_node(n, **a)
        for u, nbrs in self._succ.items():
            for v, keys in nbrs.items():
                copied = out._succ[u][v] = out._pred[v][u] = {}
                for k, a in keys.items():
                    copied[k] = dict(a)
        return out


class NodeView:
    """``g.nodes``: ``g.nodes[n]`` is n's attribute dict; ``g.nodes(data=...)`` pairs."""

    __slots__ = ("_node",)

    def __init__(self, node: dict) -> None:
        self._node = node

    def __getitem__(self, n: Any) -> dict:
        return self._node[n]

    def __iter__(self) -> Iterator:
        return iter(self._node)

    def __len__(self) -> int:
        return len(self._node)

    def __contains__(self, n: Any) -> bool:
        try:
            return n in self._node
        except TypeError:
            return False

    def __call__(self, data: Any = False, default: Any = None) -> Any:
        return self if data is False else NodeData(self._node, data, default)

    data = __call__

    def items(self) -> Iterable:
        return self._node.items()


class NodeData:
    """``(node, data)`` pairs: data the whole dict (``data=True``) or one attribute's value."""

    __slots__ = ("_node", "_data", "_default")

    def __init__(self, node: dict, data: Any, default: Any) -> None:
        self._node, self._data, self._default = node, data, default

    def __iter__(self) -> Iterator:
        if self._data is True:
            return iter(self._node.items())
        return ((n, a.get(self._data, self._default)) for n, a in self._node.items())

    def __len__(self) -> int:
        return len(self._node)

    def __getitem__(self, n: Any) -> Any:
        a = self._node[n]
        return a if self._data is True else a.get(self._data, self._default)


class EdgeView:
    """``g.edges``/``g.in_edges``: iterated, ``(u, v, key)``; called with ``nbunch``,
    ``keys`` and ``data`` (True or an attribute's name), as networkx's; ``g.edges[u, v, k]``
    is that edge's dict."""

    __slots__ = ("_g", "_out")

    def __init__(self, g: MultiDiGraph, out: bool) -> None:
        self._g, self._out = g, out

    def __call__(self, nbunch: Any = None, data: Any = False, keys: bool = False,
                 default: Any = None) -> Iterator[tuple]:
        adj = self._g._succ if self._out else self._g._pred
        for n in self._g.nbunch_iter(nbunch):
            for m, ks in adj[n].items():
                u, v = (n, m) if self._out else (m, n)
                for k, a in ks.items():
                    d = a if data is True else a.get(data, default)
                    yield ((u, v, k) if keys else (u, v)) + ((d,) if data is not False else ())

    data = __call__

    def __iter__(self) -> Iterator[tuple]:
        return self(keys=True)

    def __len__(self) -> int:
        return self._g.number_of_edges()

    def __contains__(self, e: tuple) -> bool:
        return self._g.has_edge(*e)

    def __getitem__(self, e: tuple) -> dict:
        u, v, k = e
        return self._g._succ[u][v][k]


class DegreeView:
    """``g.in_degree(n)`` (or ``[n]``) counts n's edges; ``g.in_degree()`` pairs every node with its count."""

    __slots__ = ("_g", "_adjs")

    def __init__(self, g: MultiDiGraph, adjs: tuple) -> None:
        self._g, self._adjs = g, adjs

    def __getitem__(self, n: Any) -> int:
        return sum(len(keys) for adj in self._adjs for keys in adj[n].values())

    def __call__(self, nbunch: Any = _ALL) -> Any:
        if nbunch is _ALL or nbunch is None:
            return self
        if nbunch in self._g:
            return self[nbunch]
        return ((n, self[n]) for n in self._g.nbunch_iter(nbunch))

    def __iter__(self) -> Iterator[tuple[Any, int]]:
        return ((n, self[n]) for n in self._g)

    def __len__(self) -> int:
        return len(self._g)


def topological_sort(g: MultiDiGraph) -> list:
    """The nodes, each after every node with an edge into it: generation by generation (the
    nodes with no edge in, then those whose last edge in came from them, ...), each in the
    graph's order, the order networkx's ``topological_sort`` gives. A cycle is a ValueError."""
    pending = {n: len(p) for n, p in g._pred.items() if p}
    generation = [n for n, p in g._pred.items() if not p]
    out: list = []
    while generation:
        out += generation
        following = []
        for n in generation:
            for m in g._succ[n]:
                pending[m] -= 1
                if not pending[m]:
                    following.append(m)
                    del pending[m]
        generation = following
    if pending:
        raise ValueError("the graph has a cycle")
    return out


def longest_path_length(g: MultiDiGraph) -> int:
    """The most edges on one path (networkx's ``dag_longest_path_length``): each node's
    longest path in, in topological order. A cycle is a ValueError."""
    into: dict = {}
    for n in topological_sort(g):
        into[n] = max((into[p] + 1 for p in g._pred[n]), default=0)
    return max(into.values(), default=0)


def descendants(g: MultiDiGraph, n: Any) -> set:
    """The nodes other than ``n`` reachable from it (networkx's ``descendants``)."""
    return _reach(g._succ, n)


def ancestors(g: MultiDiGraph, n: Any) -> set:
    """The nodes other than ``n`` from which it is reachable (networkx's ``ancestors``)."""
    return _reach(g._pred, n)


def _reach(adj: dict, n: Any) -> set:
    seen: set = set()
    todo = list(adj[n])
    while todo:
        m = todo.pop()
        if m not in seen:
            seen.add(m)
            todo.extend(adj[m])
    seen.discard(n)
    return seen
