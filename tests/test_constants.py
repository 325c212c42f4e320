"""Constants as a typed tree (``graph/constants.py``): records read by their classes and fields,
and the tuples constants have always been (equal, same hash, same text), since a const box's
``repr`` goes into isomorphism's labels and so into the canonical hashes that name mechanisms.
Values against tests/numpy_eval.py's evaluator, which reads the plain tuples."""
from __future__ import annotations

import copy
import math
import pickle

import numpy as np
from hypothesis import given, settings, strategies as st

import stringdiag
from numpy_eval import constant as reference
from stringdiag.graph.box import Kind
from stringdiag.graph.constants import (ConstDim, ConstNum, ConstOp, as_dim, dims_in, evaluate, show,
                                        substitute)
from stringdiag.graph.types import Dim

SIZES = {"k": 4, "d": 9, "s": 7}
UNARY, BINARY = ("neg", "sqrt", "exp", "log"), ("add", "sub", "mul", "div")
leaves = st.one_of(
    st.floats(-50, 50, allow_nan=False).map(lambda v: (ConstNum(v), ("num", v))),
    st.sampled_from(sorted(SIZES)).map(lambda n: (ConstDim(Dim.var(n)), ("dim", Dim.var(n)))))


def _node(children):
    unary = st.tuples(st.sampled_from(UNARY), children).map(
        lambda t: (ConstOp(t[0], t[1][0]), (t[0], t[1][1])))
    binary = st.tuples(st.sampled_from(BINARY), children, children).map(
        lambda t: (ConstOp(t[0], t[1][0], t[2][0]), (t[0], t[1][1], t[2][1])))
    return unary | binary


trees = st.recursive(leaves, _node, max_leaves=6)


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b or math.isclose(a, b, rel_tol=1e-12)


@settings(max_examples=150, deadline=None)
@given(trees)
def test_a_constant_is_its_tuple(pair):
    record, plain = pair
    assert record == plain and hash(record) == hash(plain) and repr(record) == repr(plain)
    for back in (pickle.loads(pickle.dumps(record)), copy.deepcopy(record)):
        assert type(back) is type(record) and back == record
    with_numbers = evaluate(record, lambda dim: dim.evaluate(SIZES))
    with np.errstate(all="ignore"):  # IEEE results (1/0 is inf, log(-1) NaN), as the tensors compute them
        assert _same(with_numbers, reference(plain, SIZES))


def test_fields_and_readers():
    k, d = Dim.var("k"), Dim.var("d")
    scale = ConstOp("div", ConstNum(1.0), ConstOp("sqrt", ConstDim(k)))
    assert (scale.op, scale.args[0].value, scale.args[1].args[0].dim) == ("div", 1.0, k)
    assert show(scale) == "(1/sqrt(k))" and evaluate(scale, lambda dim: dim.evaluate(SIZES)) == 0.5
    moved = substitute(scale, {"k": d})
    assert type(moved) is ConstOp and show(moved) == "(1/sqrt(d))" and dims_in(moved) == [d]
    assert substitute(scale, {}) is scale  # nothing to replace: the same constant
    assert dims_in(ConstOp("mul", ConstDim(k), ConstOp("add", ConstDim(d), ConstDim(k)))) == [k, d, k]
    assert as_dim(ConstOp("add", ConstNum(2.0), ConstDim(k))) == k + 2 and as_dim(scale) is None


def test_the_elaborator_makes_records():
    prog = stringdiag.loads("dim s : seq\ndim k : fixed\n"
                            "diagram F(x: [s, k]) -> [s, k] {\n  return x * (1 / sqrt(k))\n}\n")
    (value,) = [prog["F"].record(b).value for b in prog["F"].boxes() if prog["F"].record(b).kind is Kind.CONST]
    assert type(value) is ConstOp and value == ("div", ("num", 1.0), ("sqrt", ("dim", Dim.var("k"))))
    assert type(value.args[0]) is ConstNum and type(value.args[1].args[0]) is ConstDim
