"""render/dag.py against networkx: the order hints of a derivation's pictures (edges added one at
a time where they close no cycle, then ranked) come out as networkx's ``has_path`` and
``lexicographical_topological_sort`` give them, over random edge lists."""
from __future__ import annotations

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stringdiag.render.dag import Dag

edges = st.lists(st.tuples(st.integers(0, 11), st.integers(0, 11)), max_size=40)


@settings(max_examples=150, deadline=None)
@given(edges, st.lists(st.integers(-5, 5), min_size=12, max_size=12))
def test_hints_kept_and_ranked_as_networkx_does(pairs, weights):
    ours, theirs = Dag(range(12)), nx.DiGraph()
    theirs.add_nodes_from(range(12))
    for a, b in pairs:  # as draw._mark and stacked._order add them
        assert ours.reaches(b, a) == nx.has_path(theirs, b, a)
        if not ours.reaches(b, a):
            ours.add_edge(a, b, gap=float(a + b))
            theirs.add_edge(a, b, gap=float(a + b))
    assert sorted(ours.edges()) == sorted(theirs.edges)
    assert all(ours.data(a, b) == theirs.edges[a, b] for a, b in theirs.edges)
    key = lambda n: (weights[n], n)  # noqa: E731
    assert ours.ordered(key) == list(nx.lexicographical_topological_sort(theirs, key=key))


def test_a_copy_of_a_graph_and_a_cycle_refused():
    g = Dag.of({"x": {"y": {}}, "y": {"z": {}}, "z": {}})
    assert g.reaches("x", "z") and not g.reaches("z", "x") and g.reaches("z", "z")
    g.add_edge("z", "x")
    with pytest.raises(ValueError, match="cycle"):
        g.ordered(key=str)
