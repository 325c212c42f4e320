"""Weight sharing is semantics: the six unsound steps of issue 7, each refused or labelled.

``H`` declares its learnable inside, so every use of ``H`` has weights of its own; ``D`` uses
``H`` twice (two weight sets), ``E`` once, copied (one set). The reference for "changes the
function" is hand-written PyTorch over the compiled module's weights, not the oracle.
"""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

import stringdiag
from stringdiag import DiagError
from stringdiag.derive.derivation import load_derivation
from stringdiag.graph.weights import weight_sets

DIAG = """\
dim d : fixed
learn F : [d] -> [d]
diagram H(x: [d]) -> [d] {
  learn F : [d] -> [d]
  return F(x)
}
diagram D(x: [d]) -> [d] {
  a = H(x)
  b = H(x)
  return a + b
}
diagram E(x: [d]) -> [d] {
  a = H(x)
  return a + a
}
diagram Top(x: [d]) -> [d] {
  return F(x) + F(x)
}
diagram K(x: [d]) -> [d] {
  b = H(x)
  return b * H(b)
}
"""


@pytest.fixture
def here(tmp_path: Path) -> Path:
    (tmp_path / "w.diag").write_text(DIAG)
    return tmp_path


@pytest.fixture
def prog(here):
    return stringdiag.load(here / "w.diag")


def run(here: Path, text: str, verify: bool = True):
    p = here / "x.deriv"
    p.write_text(text)
    return load_derivation(p, verify=verify)


def param_structure(m) -> list[tuple]:
    """Shapes of the parameters, grouped by weight set: the structure up to renaming."""
    return sorted(tuple(sorted(tuple(p.shape) for p in m.get_submodule(a).parameters()))
                  for a in m.weight_sets.values())


def mlp(m, attr: str, x: torch.Tensor) -> torch.Tensor:
    """The default approximator by hand: Linear, ReLU, Linear (read off the module's weights)."""
    seq = m.get_submodule(attr)
    w1, b1, w2, b2 = (t.detach() for t in seq.parameters())
    return torch.relu(x @ w1.T + b1) @ w2.T + b2


def test_case1_expand_is_idempotent_and_keeps_the_weight_sets(prog):
    d = prog["D"]
    ms = [stringdiag.compile(x, dims={"d": 4}) for x in (d, d.expand(), d.expand().expand())]
    assert len(ms[0].weight_sets) == 2
    assert all(param_structure(m) == param_structure(ms[0]) for m in ms)
    assert weight_sets(d.expand()) == weight_sets(d.expand().expand())
    assert d.expand().expand().isomorphic(d.expand())
    assert not d.expand().isomorphic(prog["E"].expand())  # two sets against one, copied
    assert d.canonical_hash() != prog["E"].canonical_hash()


def test_case1_the_hand_written_reference_sees_two_sets(prog):
    m = stringdiag.compile(prog["D"].expand().expand(), dims={"d": 4}, dtype=torch.float64)
    x = torch.randn(3, 4, dtype=torch.float64)
    a, b = sorted(m.weight_sets.values())
    want = mlp(m, a, x) + mlp(m, b, x)
    assert torch.allclose(m(x), want, rtol=1e-12, atol=1e-12)
    assert not torch.allclose(mlp(m, a, x), mlp(m, b, x))


def test_case2_merging_two_uses_is_a_reduction_that_ties_their_weights(here):
    d = run(here, "start w.diag:D\napply copy_nat reversed at a, b\n")
    step = d.steps[1]
    assert step.relation == "⇒" and "ties the weights" in step.note and step.verified is None
    assert len(weight_sets(step.diagram.expand())) == 1
    # as an equation it does not match at all
    from stringdiag.rewrite.match import find_matches
    from stringdiag.rewrite.rule import library
    assert find_matches(stringdiag.load(here / "w.diag")["D"], library()["copy_nat"], reverse=True) == []
    # the tied diagram is E, up to isomorphism; with --verify nothing claims it is an equality
    assert step.diagram.expand().isomorphic(stringdiag.load(here / "w.diag")["E"].expand())


def test_case3_copying_a_box_shares_its_weights(here, prog):
    d = run(here, "start w.diag:E\ncopy a\n")
    step = d.steps[1]
    assert step.relation == "≡" and step.verified is not None and step.verified < 1e-12
    assert len(weight_sets(step.diagram.expand())) == 1
    with pytest.raises(DiagError, match="not the target"):
        run(here, "start w.diag:E\ncopy a\ntarget w.diag:D\n")
    # the copied diagram computes a + a with one F, by hand
    m = stringdiag.compile(step.diagram, dims={"d": 4}, dtype=torch.float64)
    (attr,) = m.weight_sets.values()
    x = torch.randn(2, 4, dtype=torch.float64)
    assert torch.allclose(m(x), 2 * mlp(m, attr, x), rtol=1e-12, atol=1e-12)


def test_case4_fold_does_not_bind_a_global_learnable_to_a_local_one(here):
    with pytest.raises(DiagError, match="does not match"):
        run(here, "start w.diag:Top\nfold H\n")


def test_case4_fold_after_unfold_is_an_equation(here, prog):
    res = run(here, "start w.diag:K\nunfold H\nfold H at b\n")
    assert [s.relation for s in res.steps[1:]] == ["≡", "≡"]
    assert all(s.verified is not None and s.verified < 1e-12 for s in res.steps[1:])
    assert sorted(k[-1] for k in weight_sets(res.result.expand())) == ["H#1/F", "H#2/F"]


def test_case4_fold_refuses_to_split_a_shared_set(here):
    # after copy, both uses of H share H#1: folding one of them back alone would split it
    with pytest.raises(DiagError, match="split"):
        run(here, "start w.diag:E\ncopy a\nunfold H\nfold H at a\n")


def test_case5_a_rule_box_matches_only_its_own_definition(here, prog):
    (here / "mine.diag").write_text("dim d : fixed\ndiagram dot(x: [d], y: [d]) -> [] { return sum_f x[f] }\n"
                                    "diagram U(x: [d], y: [d]) -> [] { return dot(x, y) }\n")
    from stringdiag.rewrite.match import find_matches
    from stringdiag.rewrite.rule import loads_rules
    (r,) = loads_rules("diagram dot<n>(x: [n], y: [n]) -> [] { return sum_f x[f] * y[f] }\n"
                       "rule dot_sym<n>(x: [n], y: [n]) -> [] { return dot(x, y) } == { return dot(y, x) }")
    u = stringdiag.load(here / "mine.diag")["U"]
    assert find_matches(u, r) == []


def test_case6_unfold_keeps_two_weight_sets(here):
    res = run(here, "start w.diag:D\nunfold H\n")
    step = res.steps[1]
    assert step.relation == "≡" and step.verified is not None and step.verified < 1e-12
    m = stringdiag.compile(step.diagram, dims={"d": 4})
    assert len(m.weight_sets) == 2


def test_oracle_catches_a_function_change_on_weights(here, prog):
    from stringdiag.verify.oracle import equal
    ok, err = equal(prog["D"], prog["E"])
    assert not ok and err > 1e-3


def test_a_definition_box_added_without_instance_is_its_own_weight_set(prog):
    """Code that adds a use of a definition (a layer norm inserted by the trainer, say) and names no
    instance gets weights of its own, for the graph (weight_sets) and the compiler alike."""
    from stringdiag.graph.box import Box, Kind
    from stringdiag.graph.diagram import Diagram
    d = Diagram("two", program=prog)
    (x,) = [d.add_wire(t) for t in prog["H"].input_types]
    d.inputs.append(x)
    _, (y,) = d.emit(Box(Kind.DIAGRAM, "H", ref=prog["H"]), [(x, (0,))], prog["H"].output_types)
    _, (z,) = d.emit(Box(Kind.DIAGRAM, "H", ref=prog["H"]), [(y, (0,))], prog["H"].output_types)
    d.outputs.append(z)
    assert len(weight_sets(d)) == 2 == len(stringdiag.compile(d, dims={"d": 3}).weight_sets)


def test_inputs_whose_names_clash_stay_two_arguments():
    p = stringdiag.loads("dim d : fixed\ndiagram A(x: [d], y: [d]) -> [d] { return x - y }")
    d = p["A"]
    d.input_names = ["x", "x"]
    m = stringdiag.compile(d, dims={"d": 2})
    assert torch.equal(m(torch.ones(2), torch.zeros(2)), torch.ones(2))
