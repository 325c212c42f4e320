"""Equality of diagrams up to isomorphism: a Weisfeiler-Lehman hash, confirmed exactly.

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
"""
from __future__ import annotations

import warnings
import weakref

import networkx as nx

from .diagram import Diagram
from .weights import weight_key


def _box_label(node: dict, local: tuple = ()) -> str:
    simd = ",".join(str(d) for _, d in node["simd"]) + "".join(f",{d}" for d in local)
    summed = ",".join(str(d) for _, d in node.get("summed", ()))
    generics = ",".join(f"{g}={d}" for g, d in node.get("generics", ()))
    global_learn = node["box"] == "learn" and not node.get("local")
    ident = node.get("param", node["op"]) if global_learn else node["op"]
    return "|".join((node["box"], ident, simd, "scan" if node.get("scan") else "", summed, generics,
                     repr(node.get("value", ""))))


def _axes_label(node: dict, axes: tuple, n_local: int = 0) -> str:
    n = len(node["simd"])
    order = {lab: k for k, (lab, _) in enumerate(node["simd"])}
    # summed indices come after the local axes, so that a contraction's local axes can count
    # as iterated indices: y[i] = sum_j a[i, j] * v[j] is y[i, c] = sum_j a[i, j] * v[j, c]
    order.update({lab: n + n_local + k for k, (lab, _) in enumerate(node.get("summed", ()))})
    if node["box"] == "contract":
        return ",".join(f"v{order[a]}" if isinstance(a, str) else f"v{n + a}" for a in axes)
    return ",".join(f"v{order[a]}" if isinstance(a, str) else str(a) for a in axes)


def labelled(d: Diagram) -> nx.DiGraph:
    """A simple digraph with string labels that capture the diagram up to renaming."""
    h = nx.DiGraph()
    ins = {}
    for k, w in enumerate(d.inputs):
        ins.setdefault(w, []).append(f"in{k}")
    for k, w in enumerate(d.outputs):
        ins.setdefault(w, []).append(f"out{k}")
    g = d.graph
    for n, a in g.nodes(data=True):
        if a["kind"] == "wire":
            h.add_node(n, label="wire|" + ",".join(str(x) for x in a["type"]) + "|" + ",".join(ins.get(n, ())))
        else:
            local = d.local_out_type(n, 0) if a["box"] == "contract" else ()
            h.add_node(n, label=_box_label(a, local))
            key = weight_key(a)
            if key is not None and not (key[0] == "learn" and not key[1]):
                h.add_node(("weights", key), label="weights")
                h.add_edge(("weights", key), n, label="w")
    for u, v, k, a in g.edges(keys=True, data=True):
        if g.nodes[u]["kind"] == "wire":
            node = g.nodes[v]
            n_local = len(d.local_out_type(v, 0)) if node["box"] == "contract" else 0
            lab = f"{k}:{_axes_label(node, a['axes'], n_local)}"
        else:
            lab = f"{k}"
        if h.has_edge(u, v):  # the same wire read twice by one box (x * x)
            h[u][v]["label"] = ";".join(sorted(h[u][v]["label"].split(";") + [lab]))
        else:
            h.add_edge(u, v, label=lab)
    return h


def canonical_hash(d: Diagram) -> str:
    """A hash equal for isomorphic diagrams (and, in practice, different otherwise)."""
    with warnings.catch_warnings():  # networkx notes that directed hashes changed in 3.5
        warnings.simplefilter("ignore")
        return nx.weisfeiler_lehman_graph_hash(labelled(d), node_attr="label", edge_attr="label", iterations=4)


_definitions: "weakref.WeakKeyDictionary[object, tuple]" = weakref.WeakKeyDictionary()


def definition_key(defn: Diagram) -> tuple[str, str]:
    """What a definition computes, for telling two definitions apart: its name and the hash of
    its body (two files may each define a ``dot`` and mean different things). Cached."""
    version = (defn._next, defn.graph.number_of_nodes(), defn.graph.number_of_edges())
    hit = _definitions.get(defn.graph)
    if hit is None or hit[0] != version:
        hit = (version, (defn.name, canonical_hash(defn)))
        _definitions[defn.graph] = hit
    return hit[1]


def isomorphic(a: Diagram, b: Diagram) -> bool:
    """Exact check: same hash, then a label-preserving graph isomorphism."""
    ha, hb = labelled(a), labelled(b)
    if ha.number_of_nodes() != hb.number_of_nodes() or ha.number_of_edges() != hb.number_of_edges():
        return False
    if canonical_hash(a) != canonical_hash(b):
        return False
    same = lambda x, y: x["label"] == y["label"]  # noqa: E731
    return nx.is_isomorphic(ha, hb, node_match=same, edge_match=same)
