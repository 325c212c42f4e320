"""A step that ties weight sets and brings in a loop cell: the cell is built of the tied process.

The rule names one box variable twice where the target has two uses of a definition with
weights of its own (two sets): the match ties them (⇒), and the other side's cell holds the
variable twice. The cell must hold the one tied set, the set the tie keeps everywhere else;
the reference for the function is hand-written PyTorch over the compiled module's weights.
"""
from __future__ import annotations

import torch

import stringdiag
from stringdiag.derive.steps import apply_rule
from stringdiag.graph.box import Instance
from stringdiag.graph.weights import weight_sets
from stringdiag.rewrite.match import find_matches
from stringdiag.rewrite.rule import loads_rules

RULE = """
rule twice_loop<n, a>(x: [n, a]) -> [n, a]
  given g : [a] -> [a]
  where diagram Twice<a>(c: [], v: [a]) -> [], [a] {
    return c, g(g(v))
  }
{
  y[t] = g(x[t])
  z[t] = g(y[t])
  return z
} == {
  _c, z[t] = scan Twice<a>(0, x[t])
  return z
}
"""

TARGET = """
dim s : seq
dim d : fixed
diagram H(x: [d]) -> [d] {
  learn F : [d] -> [d]
  return F(x)
}
diagram Two(x: [s, d]) -> [s, d] {
  y[t] = H(x[t])
  z[t] = H(y[t])
  return z
}
"""


def _step():
    (rule,) = loads_rules(RULE, "twice.rules")
    d = stringdiag.loads(TARGET, "two.diag")["Two"]
    first, second = d.topological_boxes()  # the first use holds the set the tie renames away
    d.update(first, weights=Instance("H#2"))
    d.update(second, weights=Instance("H#1"))
    assert find_matches(d, rule) == []  # as an equation it does not match: two sets, one name
    (m,) = find_matches(d, rule, ties=True)
    assert m.ties == (frozenset({("diagram", "H#1"), ("diagram", "H#2")}),)
    return apply_rule(d, rule, m)


def test_the_cell_holds_the_tied_set():
    out = _step()
    assert out.relation == "⇒" and out.note == "ties the weights of H#1 = H#2"
    d = out.diagram
    (loop,) = [d.record(b) for b in d.boxes() if d.record(b).op == "Twice"]
    inner = [loop.ref.record(b).weights for b in loop.ref.boxes()]
    assert inner == [Instance("H#1"), Instance("H#1")]  # the tie keeps the first set, in sorted order
    assert weight_sets(d) == {("diagram", "Twice#1")}


def test_the_result_computes_one_function_twice():
    m = stringdiag.compile(_step().diagram, dims={"d": 4}, dtype=torch.float64)
    (attr,) = [a for key, a in m.weight_sets.items() if key[0] == "learn"]  # the cell's F, once
    w1, b1, w2, b2 = (t.detach() for t in m.get_submodule(attr).parameters())

    def f(v: torch.Tensor) -> torch.Tensor:
        return torch.relu(v @ w1.T + b1) @ w2.T + b2

    x = torch.randn(5, 4, dtype=torch.float64)
    assert torch.allclose(m(x), f(f(x)), rtol=1e-12, atol=1e-12)
