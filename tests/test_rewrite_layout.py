"""The layout a replaced wire keeps inside a SIMD context (the double-pushout splice).

A replacement box inside the match's context writes the replaced wire directly when that wire
holds the context's slots and the box's labels (in any order) followed by the box's local axes
in their own order; otherwise a reindex box reorders after it. Which one happens is decided
here from the target's spelling alone, and every result is compared with the target by the
tests' NumPy evaluator (``numpy_eval.py``), not by the engine's oracle.
"""
from __future__ import annotations

import numpy as np
import pytest
from numpy_eval import SeededWeights, evaluate

import stringdiag
from stringdiag.graph.box import Kind
from stringdiag.rewrite import find_matches, loads_rules, rewrite

RULE = """
diagram outer<m>(u: [m], v: [m]) -> [m, m] {
  y[a, b] = u[a] * v[b]
  return y
}
rule outer_def<n, m>(u: [n, m], v: [n, m]) -> [n, m, m] {
  y[i, a, b] = u[i, a] * v[i, b]
  return y
} == {
  y[i] = outer(u[i], v[i])
  return y
}"""
SIZES = {"h": 2, "s": 3, "d": 4}

# the target's output spelling -> whether its two local axes (a, b) are out of order
SPELLINGS = [("y[g, i, a, b]", False), ("y[i, g, a, b]", False), ("y[g, i, b, a]", True),
             ("y[i, g, b, a]", True)]


def _target(lhs: str):
    src = ("dim s : seq\ndim h, d : fixed\n"
           f"diagram T(x: [h, s, d], z: [h, s, d]) -> [{'h, s' if lhs[2] == 'g' else 's, h'}, d, d] {{\n"
           f"  {lhs} = x[g, i, a] * z[g, i, b]\n  return y\n}}")
    return stringdiag.loads(src)["T"]


def _value(d, xs):
    return evaluate(d, xs, SIZES, SeededWeights())[0]


@pytest.mark.parametrize("lhs, swapped", SPELLINGS)
def test_a_replaced_wire_is_written_directly_unless_its_local_axes_are_out_of_order(lhs, swapped):
    (rule,) = loads_rules(RULE)
    t = _target(lhs)
    ms = find_matches(t, rule)
    assert len(ms) == 2  # the rule's n is the target's s (g the context) or its h (i the context)
    rng = np.random.default_rng(0)
    xs = [rng.normal(size=(2, 2, 3, 4)) for _ in range(2)]
    want = _value(t, xs)
    for m in ms:
        res = rewrite(t, m)
        kinds = sorted(res.record(b).kind.value for b in res.boxes())
        assert kinds == (["diagram", "reindex"] if swapped else ["diagram"]), (lhs, m.where, kinds)
        got = _value(res, xs)
        assert got.shape == want.shape and np.abs(got - want).max() < 1e-12
