"""Boxes and wires stored as typed records, one editing API, one per-graph cache (graph/box.py,
graph/hypergraph.py).

References: the source text (what each box of ``SRC`` must be, written out by hand), the
networkx graph itself (counted and walked here), and a function counting its own calls."""
from __future__ import annotations

import pytest

import stringdiag
from stringdiag.graph.box import Box, Global, Instance, Kind, Local, Repeat, Scan, Wire
from stringdiag.graph.hypergraph import per_graph_cache
from stringdiag.graph.types import Dim

SRC = """\
dim s : seq
dim d : fixed
learn G : [d] -> [d]
random R : -> [d] seed 3
diagram H(x: [d]) -> [d] {
  learn F : [d] -> [d]
  return F(x)
}
diagram Cell(h: [d], x: [d]) -> [d], [d] {
  y = H(x) + h
  return y, y
}
diagram D(h: [d], x: [s, d]) -> [d], [s, d] {
  a[i] = G(x[i]) * R()
  y[i, c] = sum_j a[j, c] * x[i, c] / sqrt(d)
  hh, z[i] = scan Cell(h, y[i])
  return hh, z
}
"""


@pytest.fixture(scope="module")
def prog():
    return stringdiag.loads(SRC, "box.diag")


def _by_op(d, op):
    (b,) = [b for b in d.boxes() if d.record(b).op == op]
    return b


def test_the_graph_stores_the_records_the_source_says(prog):
    d = prog["D"]
    by_op = {d.record(b).op: d.record(b) for b in d.boxes()}
    assert sorted(by_op) == ["Cell", "G", "R", "contract", "div", "mul", "sqrt(d)"]
    g = by_op["G"]
    assert (g.kind, [str(x) for _, x in g.simd], g.weights, g.loop) == (Kind.LEARN, ["s"], Global("G"), None)
    assert (by_op["R"].kind, by_op["R"].seed, by_op["R"].simd) == (Kind.RANDOM, 3, ())
    c = by_op["contract"]
    assert [str(x) for _, x in c.summed] == ["s"] and [str(x) for _, x in c.simd] == ["s", "d"]
    assert by_op["sqrt(d)"].kind is Kind.CONST and by_op["sqrt(d)"].value is not None
    cell = by_op["Cell"]
    assert cell.kind is Kind.DIAGRAM and cell.scan and cell.weights == Instance("Cell#1") and cell.ref is prog["Cell"]
    assert {type(d.record(b)) for b in d.boxes()} == {Box} and {type(d.wire(w)) for w in d.wires()} == {Wire}
    named = {d.wire_label(w): d.wire(w) for w in d.wires() if d.wire_label(w)}
    assert [str(x) for x in named["x"].type] == ["s", "d"] and named["x"].of is None


def test_an_update_is_typo_safe_and_keeps_a_box_a_box(prog):
    d = prog["D"].expand()
    g = _by_op(d, "G")
    before = d.identity(g)
    with pytest.raises(ValueError):
        d.update(g, instanc="G#9")  # a misspelt field: an error, never a dropped key
    with pytest.raises(ValueError):
        d.update(g, name="y")  # a wire's field, not a box's
    d.update(g, weights=Global("G2"))
    assert d.record(g).weights == Global("G2") and d.identity(g) != before  # the identity went with the record
    (w,) = d.box_outputs(g)
    d.update(w, name="gx")
    assert d.wire_label(w) == "gx" and d.wire(w).type == d.wire_type(w)
    with pytest.raises(AssertionError):
        d.reset(g, d.wire(w))


def test_records_type_loops_and_weights(prog):
    d = prog["D"]
    assert d.record(_by_op(d, "G")).weights == Global("G")
    assert isinstance(d.record(_by_op(d, "Cell")).loop, Scan)
    assert isinstance(d.record(_by_op(d, "Cell")).weights, Instance)
    flat = prog["H"].expand(path="H#1/")
    assert flat.record(_by_op(flat, "F")).weights == Local("H#1/F")
    assert Local("F") != Global("F")  # one name, two kinds of weights
    assert Repeat(Dim.var("d"), True).tag() == "repeat d shared" and Scan().tag() == "scan"


def test_kinds_are_their_names_and_know_what_they_are():
    assert [k.value for k in Kind] == ["learn", "abstract", "fixed", "diagram", "contract", "reindex", "const",
                                      "random"]
    assert {k for k in Kind if k.is_process} == {Kind.LEARN, Kind.ABSTRACT, Kind.FIXED, Kind.DIAGRAM}
    assert {k for k in Kind if k.is_hole} == {Kind.LEARN, Kind.ABSTRACT}
    assert f"{Kind.CONTRACT}" == "contract" and Kind("random") is Kind.RANDOM


def test_identity_names_the_function(prog):
    d = prog["D"]
    g, r = d.record(_by_op(d, "G")).identity(), d.record(_by_op(d, "R")).identity()
    assert (g.kind, g.name, g.weights) == (Kind.LEARN, "G", Global("G"))
    assert r.name == "R@3"  # the seed (the source's) is which tensor it is
    cell = d.record(_by_op(d, "Cell")).identity()
    assert cell.loop == "scan" and cell.ref is prog["Cell"]
    contract = next(d.record(b) for b in d.boxes() if d.record(b).summed).identity()
    assert contract.dims(contract.summed) == (Dim.var("s"),)
    assert len(contract.dims(contract.simd, drop={lab for lab, _ in contract.simd})) == 0 < len(contract.simd)


def _edges(d):
    return sorted((u, v, k, tuple(sorted(a.items()))) for u, v, k, a in d.graph.edges(keys=True, data=True))


def test_every_edit_changes_the_version_and_only_edits_do(prog):
    d = prog["D"].expand()
    seen = [d.version()]
    d.boxes(), d.record(next(iter(d.boxes()))), d.topological_boxes()  # reads
    assert d.version() == seen[-1]
    g = _by_op(d, "G")
    (w,) = d.box_outputs(g)
    readers = d.consumers(w)
    b2, (w2,) = d.clone_box(g)
    seen.append(d.version())
    assert d.record(b2) == d.record(g) and d.box_inputs(b2) == d.box_inputs(g)
    d.replace_uses(w, w2)
    seen.append(d.version())
    assert d.consumers(w) == [] and sorted(d.consumers(w2)) == sorted(readers)
    assert d.drop_dead() == 1 and g not in d.graph and w not in d.graph  # the original, read by nothing
    seen.append(d.version())
    d.update(b2, op="G2")
    seen.append(d.version())
    assert d.record(b2).op == "G2"
    assert len(set(seen)) == len(seen)


def test_rewire_and_permute_move_edges_only(prog):
    d = prog["D"].expand()
    c = next(b for b in d.boxes() if len(d.box_inputs(b)) >= 2)
    ins = d.box_inputs(c)
    reverse = tuple(reversed(range(len(ins))))
    d.permute_inputs(c, reverse)
    assert d.box_inputs(c) == ins[::-1]
    (x, axes) = ins[0]
    d.rewire(c, 1, x, axes)
    assert d.box_inputs(c)[1] == (x, axes)
    n_edges = d.graph.number_of_edges()
    d.permute_inputs(c, reverse)
    assert d.graph.number_of_edges() == n_edges


def test_per_graph_cache_recomputes_after_an_edit_only(prog):
    calls = []

    @per_graph_cache
    def boxes(d):
        calls.append(d.name)
        return len(d)

    d = prog["D"].expand()
    assert boxes(d) == boxes(d) == len(d) and len(calls) == 1
    other = d.copy()  # a graph of its own
    assert boxes(other) == len(d) and len(calls) == 2
    d.remove_box(_by_op(d, "R"))
    assert boxes(d) == len(d) and len(calls) == 3
    assert boxes(other) == len(other) and len(calls) == 3  # the copy's entry stands


def test_a_reentrant_call_gets_the_guard():
    from stringdiag.graph.diagram import Diagram

    @per_graph_cache(reentry="guard")
    def f(d):
        return ("outer", f(d))

    assert f(Diagram("x")) == ("outer", "guard")
