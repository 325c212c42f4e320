"""The language elaborates to the graph the paper's notation describes."""
from __future__ import annotations

import pytest

import stringdiag
from helpers import SELF_ATTENTION
from stringdiag.graph.types import Dim, show_type

HEAD = """\
dim s, t : seq
dim d, k, h : fixed
learn Q, K : [d] -> [k]
learn V : [d] -> [d]
"""


def load(body: str) -> stringdiag.Program:
    return stringdiag.loads(HEAD + body, "test.diag")


def boxes(d, kind=None):
    return [d.record(b) for b in d.topological_boxes() if kind is None or d.record(b).kind == kind]


def T(*names) -> tuple:
    return tuple(Dim.var(n) if isinstance(n, str) else n for n in names)


def test_simd_box_from_index_on_the_left():
    d = load("diagram A(x: [s, d]) -> [s, k] {\n q[i] = Q(x[i])\n return q\n}")["A"]
    (q,) = boxes(d)
    assert q.kind == "learn" and q.op == "Q"
    assert [(lab, str(dim)) for lab, dim in q.simd] == [("i", "s")]
    (b,) = list(d.boxes())
    assert d.box_inputs(b) == [(d.inputs[0], ("i", 0))]
    assert d.output_types == [T("s", "k")]


def test_implicit_simd_equals_explicit_index():
    p = load("diagram A(x: [s, d]) -> [s, k] {\n q[i] = Q(x[i])\n return q\n}\n"
             "diagram B(x: [s, d]) -> [s, k] {\n return Q(x)\n}")
    assert p["A"].isomorphic(p["B"])
    assert p["A"].canonical_hash() == p["B"].canonical_hash()


def test_contraction_is_one_box_with_summed_index():
    d = load("diagram E(x: [s, d]) -> [s, s] {\n q = Q(x)\n kk = K(x)\n"
             " e[i, j] = sum_f q[i, f] * kk[j, f]\n return e\n}")["E"]
    (c,) = boxes(d, "contract")
    assert [str(dim) for _, dim in c.simd] == ["s", "s"]
    assert [(lab, str(dim)) for lab, dim in c.summed] == [("f", "k")]
    b = next(b for b in d.boxes() if d.record(b).kind == "contract")
    assert [axes for _, axes in d.box_inputs(b)] == [("i", "f"), ("j", "f")]
    assert d.output_types == [T("s", "s")]


def test_attention_types_and_box_kinds():
    d = load(SELF_ATTENTION)["SelfAttention"]
    kinds = sorted(b.kind for b in boxes(d))
    assert kinds == ["const", "contract", "contract", "diagram", "fixed", "learn", "learn", "learn"]
    types = {d.wire_label(w): show_type(d.wire_type(w)) for w in d.wires() if d.wire_label(w)}
    assert types == {"x": "[s, d]", "q": "[s, k]", "kk": "[s, k]", "v": "[s, d]", "e": "[s, s]",
                     "a": "[s, s]", "y": "[s, d]"}
    const = next(b for b in boxes(d) if b.kind == "const")
    assert const.op == "sqrt(k)"
    # x is read by three boxes: a copy
    assert len(d.consumers(d.inputs[0])) == 3


def test_boxes_sit_only_in_the_simd_boxes_they_depend_on():
    # Q(x[i]) inside a statement over (i, j) depends only on i: it is not copied over j
    d = load("diagram A(x: [s, d]) -> [s, s, k] {\n y[i, j] = Q(x[i]) + K(x[j])\n return y\n}")["A"]
    simds = {b.op: [str(dim) for _, dim in b.simd] for b in boxes(d)}
    assert simds["Q"] == ["s"] and simds["K"] == ["s"]
    assert simds["add"] == ["s", "s", "k"]


def test_transpose_and_later_axis_indexing():
    p = load("learn W : [h, d] -> [k]\n"
             "diagram A(x: [h, s, d]) -> [s, h, d], [s, k] {\n"
             " z[i, a] = x[a, i]\n q[i] = W(x[:, i])\n return z, q\n}")
    d = p["A"]
    assert d.output_types == [T("s", "h", "d"), T("s", "k")]
    w = next(b for b in d.boxes() if d.record(b).op == "W")
    assert d.box_inputs(w)[0][1] == (0, "i", 1)
    assert d.local_in_type(w, 0) == T("h", "d")


def test_scan_carries_state_and_stacks_outputs():
    p = load("learn Cell : [h], [d] -> [h], [k]\nlearn H0 : -> [h]\n"
             "diagram R(x: [s, d]) -> [h], [s, k] {\n hN, y[t] = scan Cell(H0(), x[t])\n return hN, y\n}")
    d = p["R"]
    cell = next(b for b in d.boxes() if d.record(b).op == "Cell")
    assert d.record(cell).scan is True
    assert d.output_types == [T("h"), T("s", "k")]


def test_dimension_arithmetic_in_types():
    p = load("diagram C(x: [s, d], y: [s, k]) -> [s, d + k] {\n return cat(x, y)\n}\n"
             "diagram S(x: [s, d + k]) -> [s, d] {\n a, _b = split<d, k>(x)\n return a\n}")
    assert p["C"].output_types == [(Dim.var("s"), Dim.var("d") + Dim.var("k"))]
    assert p["S"].output_types == [T("s", "d")]


def test_generic_definitions_instantiate():
    p = load("diagram Twice<n>(x: [n]) -> [n] {\n return x + x\n}\n"
             "diagram A(x: [s, d]) -> [s, d] {\n return Twice(x)\n}")
    d = p["A"]
    (call,) = boxes(d)
    assert call.kind == "diagram" and [(g, str(v)) for g, v in call.generics] == [("n", "d")]
    flat = d.expand()
    (add,) = boxes(flat)
    assert add.op == "add" and [str(dim) for _, dim in add.simd] == ["s", "d"]


def test_shared_and_local_learnables_after_expansion():
    p = load("""diagram Head(x: [s, d]) -> [s, k] {
  learn P : [d] -> [k]
  return P(x) + Q(x)
}
diagram Two(x: [s, d]) -> [s, k] {
  return Head(x) + Head(x)
}""")
    flat = p["Two"].expand()
    params = sorted(b.param for b in boxes(flat, "learn"))
    # Q is declared at top level: one set of weights used twice; P is fresh per use
    assert params == ["Head#1/P", "Head#2/P", "Q", "Q"]


def test_expansion_of_nested_simd_prepends_indices():
    p = load("""diagram Vec(v: [d]) -> [k] {
  return Q(v)
}
diagram A(x: [t, s, d]) -> [t, s, k] {
  y[b] = Vec(x[b])
  return y
}""")
    flat = p["A"].expand()
    (q,) = boxes(flat)
    assert [str(dim) for _, dim in q.simd] == ["t", "s"]
    assert flat.output_types == [T("t", "s", "k")]
    assert flat.wire_type(flat.outputs[0]) == T("t", "s", "k")


def test_expanded_prelude_softmax_is_primitive():
    d = load("diagram A(x: [s, s]) -> [s, s] {\n return softmax(x)\n}")["A"].expand()
    ops = sorted(b.op for b in boxes(d))
    assert ops == ["amax", "contract", "div", "exp", "sub"]  # shifted by its maximum (stable, masks give 0)
    assert all(b.kind != "diagram" for b in boxes(d))


def test_constant_folding_keeps_dimensions_symbolic():
    d = load("diagram A(x: [s, k]) -> [s, k] {\n return x / (2 * sqrt(k))\n}")["A"]
    const = next(b for b in boxes(d) if b.kind == "const")
    assert const.op == "(2*sqrt(k))"


def test_unused_wire_is_a_warning_not_an_error():
    p = load("diagram A(x: [s, d]) -> [s, d] {\n q = Q(x)\n return x\n}")
    assert [w.message for w in p.warnings] == ["wire 'q' is never used (it is deleted)"]
    assert p["A"].output_types == [T("s", "d")]


def test_diagram_lookup_error_lists_names():
    p = load("diagram A(x: [s, d]) -> [s, d] {\n return x\n}")
    with pytest.raises(KeyError, match="did you mean 'A'"):
        p["a"]
    assert list(p) == ["A"]


def test_import_brings_definitions(tmp_path):
    (tmp_path / "lib.diag").write_text(HEAD + "diagram Lib(x: [s, d]) -> [s, k] {\n return Q(x)\n}\n")
    (tmp_path / "main.diag").write_text('import "lib.diag"\n'
                                         "diagram Main(x: [s, d]) -> [s, k] {\n return Lib(x)\n}\n")
    p = stringdiag.load(tmp_path / "main.diag")
    assert p["Main"].expand().output_types == [T("s", "k")]
    assert list(p) == ["Main"]


def test_scanned_definition_stays_a_box_when_expanded():
    p = load("""diagram Cell(h: [k], x: [d]) -> [k], [k] {
  n = tanh(Q(x) + h)
  return n, n
}
learn H0 : -> [k]
diagram R(x: [s, d]) -> [s, k] {
  _h, y[t] = scan Cell(H0(), x[t])
  return y
}""")
    flat = p["R"].expand()
    cell = [b for b in boxes(flat) if b.op == "Cell"]
    assert len(cell) == 1 and cell[0].scan and cell[0].kind == "diagram"
    assert flat.output_types == [T("s", "k")]


def test_definitions_over_one_sequence_apply_to_another():
    p = load("diagram A(x: [s, d]) -> [s, k] {\n return Q(x)\n}\n"
             "diagram B(y: [t, d]) -> [t, k] {\n return A(y)\n}")
    assert p["B"].output_types == [T("t", "k")]
    (call,) = boxes(p["B"])
    assert [(g, str(v)) for g, v in call.generics] == [("s", "t")]
    assert p["B"].expand().output_types == [T("t", "k")]


def test_reverse_reverses_the_sequence_not_the_features():
    import torch
    from stringdiag import compile

    p = load("diagram R(x: [s, d]) -> [s, d] {\n return reverse(x)\n}")
    x = torch.arange(12.0).reshape(4, 3)
    assert torch.equal(compile(p["R"], dims={"d": 3, "k": 1, "h": 1})(x), x.flip(0))


def test_a_sum_may_follow_a_product():
    # w * sum_j x[j] reads as w * (sum_j x[j]): the sum extends to the right
    d = load("diagram A(x: [s, d], w: [d]) -> [d] {\n  return w * sum_j x[j]\n}")["A"]
    assert sorted(b.op for b in boxes(d)) == ["contract", "mul"]


def test_a_diagram_shows_itself_as_svg_in_a_notebook():
    d = load("diagram A(x: [s, d]) -> [s, k] {\n return Q(x)\n}")["A"]
    svg = d._repr_svg_()
    assert "<svg" in svg and ">Q<" in svg
