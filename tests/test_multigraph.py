"""The diagram's graph class against networkx's ``MultiDiGraph``, the reference: the same random
edits on both, then every reading the tool makes (nodes, edges by direction, keys and data,
degrees, neighbours, copies, topological order) must agree, and networkx's own algorithms must
run on ours as on theirs."""
import networkx as nx
import pytest
from hypothesis import given, settings, strategies as st

from stringdiag.graph.multigraph import MultiDiGraph, ancestors, descendants, longest_path_length, topological_sort

NODES = st.integers(0, 4)  # few nodes: edits often meet
EDIT = st.one_of(
    st.tuples(st.just("node"), NODES, st.integers(0, 3)),
    st.tuples(st.just("edge"), NODES, NODES, st.one_of(st.none(), st.integers(0, 2)), st.integers(0, 3)),
    st.tuples(st.just("remove_node"), NODES),
    st.tuples(st.just("remove_nodes"), st.lists(NODES, max_size=3)),
    st.tuples(st.just("remove_edge"), NODES, NODES, st.one_of(st.none(), st.integers(0, 2))),
    st.tuples(st.just("remove_edges"), st.lists(st.tuples(NODES, NODES, st.integers(0, 2)), max_size=3)),
    st.tuples(st.just("attr"), NODES, st.integers(0, 3)),
)


def _apply(g, edit) -> object:
    """One edit; what it returned, or the kind of error it raised (KeyError for ours stands
    for networkx's NetworkXError)."""
    op, *args = edit
    try:
        if op == "node":
            return g.add_node(args[0], a=args[1])
        if op == "edge":
            return g.add_edge(args[0], args[1], key=args[2], w=args[3])
        if op == "remove_node":
            return g.remove_node(args[0])
        if op == "remove_nodes":
            return g.remove_nodes_from(args[0])
        if op == "remove_edge":
            return g.remove_edge(*args)
        if op == "remove_edges":
            return g.remove_edges_from(args[0])
        if args[0] in g:
            g.nodes[args[0]]["b"] = args[1]
    except (KeyError, nx.NetworkXError):
        return "error"
    return None


def _readings(g) -> dict:
    ns = list(g.nodes)
    return {
        "nodes": list(g.nodes(data=True)), "attr": list(g.nodes(data="a", default=-1)), "len": len(g),
        "edges": list(g.edges), "edges_kd": list(g.edges(keys=True, data=True)), "edges_d": list(g.edges(data="w")),
        "n_edges": g.number_of_edges(), "len_edges": len(g.edges),
        "in": [list(g.in_edges(n, keys=True, data=True)) for n in ns],
        "out": [list(g.out_edges(n, keys=True)) for n in ns],
        "out_plain": [list(g.out_edges(n)) for n in ns], "in_bunch": list(g.in_edges(ns[:3], data=True)),
        "deg": [(g.in_degree(n), g.out_degree(n), g.degree(n), g.in_degree[n]) for n in ns],
        "deg_all": list(g.in_degree()), "out_all": dict(g.out_degree),
        "nbrs": [(list(g.predecessors(n)), list(g.successors(n))) for n in ns],
        "has": [(g.has_edge(u, v), g.has_edge(u, v, 1), g.number_of_edges(u, v), g.get_edge_data(u, v, 0))
                for u in range(8) for v in range(8)],
        "contains": [(n in g, n in g.nodes, g.has_node(n)) for n in range(9)] + [([1] in g,)],
        "edge_items": [g.edges[e] for e in g.edges], "succ": {n: dict(g.succ[n]) for n in ns},
        "pred": {n: dict(g.pred[n]) for n in ns}, "graph": dict(g.graph), "adjacency": dict(g.adjacency()),
    }


@settings(max_examples=150, deadline=None)
@given(st.lists(EDIT, max_size=25))
def test_every_reading_agrees_with_networkx_after_the_same_edits(edits):
    ours, ref = MultiDiGraph(), nx.MultiDiGraph()
    for e in edits:
        assert _apply(ours, e) == _apply(ref, e), e
    assert _readings(ours) == _readings(ref)
    mine, theirs = ours.copy(), ref.copy()
    assert _readings(mine) == _readings(theirs)
    for g in (mine, theirs):  # a copy's dicts are its own
        for n in list(g.nodes)[:1]:
            g.nodes[n]["a"] = "changed"
        for e in list(g.edges)[:1]:
            g.edges[e]["w"] = "changed"
        g.add_edge(100, 101)
    assert _readings(ours) == _readings(ref)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(NODES, NODES), max_size=20), st.lists(NODES, max_size=4))
def test_topological_order_is_networkx_order_and_networkx_algorithms_read_ours(pairs, lone):
    ours, ref = MultiDiGraph(), nx.MultiDiGraph()
    for g in (ours, ref):
        g.add_nodes_from(lone)
        g.add_edges_from((u, v) for u, v in pairs if u < v)  # a DAG, parallel edges included
    assert topological_sort(ours) == list(nx.topological_sort(ref))
    assert list(nx.topological_sort(ours)) == list(nx.topological_sort(ref))
    for n in ref:
        assert descendants(ours, n) == nx.descendants(ours, n) == nx.descendants(ref, n)
        assert ancestors(ours, n) == nx.ancestors(ours, n) == nx.ancestors(ref, n)
    assert longest_path_length(ours) == nx.dag_longest_path_length(ours) == nx.dag_longest_path_length(ref)


def test_a_cycle_has_no_topological_order_and_reaches_round():
    g, ref = MultiDiGraph(), nx.MultiDiGraph()
    for h in (g, ref):
        h.add_edges_from([(0, 1), (1, 2), (2, 0), (3, 0), (2, 4)])
    with pytest.raises(ValueError, match="cycle"):
        topological_sort(g)
    for n in ref:
        assert descendants(g, n) == nx.descendants(ref, n) and ancestors(g, n) == nx.ancestors(ref, n)


def test_edges_given_with_data_and_keys_read_back():
    g = MultiDiGraph()
    g.add_nodes_from([(5, {"c": 1}), 6], d=2)
    g.add_edges_from([(5, 6), (5, 6, {"x": 1}), (5, 6, 7), (6, 5, 3, {"y": 2})], z=0)
    assert list(g.nodes(data=True)) == [(5, {"d": 2, "c": 1}), (6, {"d": 2})]
    assert list(g.edges(keys=True, data=True)) == [(5, 6, 0, {"z": 0}), (5, 6, 1, {"z": 0, "x": 1}),
                                                   (5, 6, 7, {"z": 0}), (6, 5, 3, {"z": 0, "y": 2})]


def test_removing_an_edge_without_a_key_removes_the_last_added_as_networkx_does():
    ours, ref = MultiDiGraph(), nx.MultiDiGraph()
    for g in (ours, ref):
        g.add_edge(1, 2, key=5)
        g.add_edge(1, 2)
        g.add_edge(1, 2, key=0)
        g.remove_edge(1, 2)
    assert list(ours.edges) == list(ref.edges) == [(1, 2, 5), (1, 2, 1)]
