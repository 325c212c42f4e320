"""The fold over definitions (``analysis/fold.py``) reads each definition once, however often
it is used: counted on the algebra's calls, against a brute-force walk of the uses."""
from __future__ import annotations

from collections import Counter

import pytest

import stringdiag
from stringdiag.analysis import dimensions, learnables, parameters, shape
from stringdiag.analysis.combine import cost_monomials, expanded_counts, parameter_count
from stringdiag.analysis.fold import Algebra, fold
from stringdiag.graph.box import Kind

SRC = """
dim s : seq
dim d : fixed

learn G : [d] -> [d]

diagram Leaf(x: [s, d]) -> [s, d] {
  learn F : [d] -> [d]
  return x + G(F(x))
}

diagram Mid(x: [s, d]) -> [s, d] {
  return Leaf(Leaf(Leaf(x)))
}

diagram Top(x: [s, d]) -> [s, d] {
  y = Mid(Mid(x))
  z = repeat 3 Mid(y)
  return Leaf(z) + y
}
"""


def uses(d) -> list:
    """Every definition reached by following every diagram box, once per use (brute force)."""
    found = [d]
    for b in d.boxes():
        node = d.record(b)
        if node.kind is Kind.DIAGRAM:
            found += uses(node.ref)
    return found


class Counting(Algebra):
    """An algebra that records every call the fold makes of it."""

    def __init__(self):
        self.started: Counter = Counter()
        self.steps: Counter = Counter()  # (definition, box) -> times read

    def start(self, x):
        self.started[x.name] += 1
        return x.name

    def box(self, acc, x, site):
        self.steps[acc, site.box] += 1

    def call(self, acc, x, site, callee):
        assert callee == site.node.ref.name  # the callee's value, computed before its caller
        self.steps[acc, site.box] += 1


@pytest.fixture
def top():
    return stringdiag.loads(SRC, "fold.diag")["Top"]


def test_the_fold_reads_each_definition_and_box_once(top):
    reached = uses(top)
    distinct = {x.name: x for x in reached}
    assert len(reached) == 1 + 3 + 1 + 3 * 3  # Top; its three Mid boxes and a Leaf; each Mid's three Leafs
    algebra = Counting()
    values = fold(top, algebra)
    assert algebra.started == Counter(dict.fromkeys(distinct, 1))
    assert algebra.steps == Counter({(x.name, b): 1 for x in distinct.values() for b in x.boxes()})
    assert set(values) == {id(x.graph) for x in distinct.values()}


@pytest.mark.parametrize("algebra, compute", [
    (shape.ShapeAlgebra, lambda d: (expanded_counts(d), cost_monomials(d))),
    (dimensions.NamesAlgebra, dimensions.dimensions),
    (learnables.WeightsAlgebra, learnables.learnables),
    (parameters.ParametersAlgebra, lambda d: parameter_count(d, {"d": 3}, "linear")),
])
def test_each_analysis_starts_each_definition_once(top, monkeypatch, algebra, compute):
    started: Counter = Counter()
    start = algebra.start

    def counted(self, x):
        started[x.name] += 1
        return start(self, x)

    monkeypatch.setattr(algebra, "start", counted)
    compute(top)
    assert started == Counter(dict.fromkeys({x.name for x in uses(top)}, 1))


def test_the_analyses_agree_with_the_expansion(top):
    """What the counted analyses give is still the expansion's (the suite's
    ``test_info_linear.py`` checks this widely; here on this file's diagram)."""
    flat = top.expand()
    kinds = Counter(flat.record(b).kind.value for b in flat.boxes())
    assert expanded_counts(top) == +kinds
    # every weight set: G once, F once per Leaf instance: 2 * 3 + 3 * 3 (a repeat of Mid) + 1
    assert parameter_count(top, {"d": 3}, "linear") == (1 + 2 * 3 + 3 * 3 + 1) * (3 * 3 + 3)
    assert [e["name"] for e in learnables.learnables(top)][:2] == ["Mid#1/Leaf#1/F", "G"]
