"""Derivations: every step checked, equalities verified numerically, wrong steps refused."""
from __future__ import annotations

from pathlib import Path

import pytest

from stringdiag import DiagError
from stringdiag.cli.main import main
from stringdiag.derive.derivation import load_derivation

DIAG = """\
dim s : seq
dim d, k : fixed
learn Q, K : [d] -> [k]
learn V : [d] -> [d]
abstract sim : [k], [k] -> []
diagram G(x: [s, d]) -> [s, d] {
  q = Q(x)
  kk = K(x)
  a[i, j] = sim(q[i], kk[j])
  y[i] = sum_j a[i, j] * V(x)[j]
  return y
}
diagram Lin(x: [s, d]) -> [s, d] {
  q = Q(x)
  kk = K(x)
  kv[f, c] = sum_j kk[j, f] * V(x)[j, c]
  y[i, c] = sum_f q[i, f] * kv[f, c]
  return y
}
diagram Dot(p: [k], r: [k]) -> [] {
  return sum_f p[f] * r[f]
}
"""


@pytest.fixture
def here(tmp_path: Path) -> Path:
    (tmp_path / "a.diag").write_text(DIAG)
    return tmp_path


def deriv(here: Path, text: str) -> Path:
    p = here / "x.deriv"
    p.write_text(text)
    return p


def test_linearisation_from_a_generic_similarity(here):
    d = load_derivation(deriv(here, "start a.diag:G\nspecialise sim := Dot\napply assoc\ntarget a.diag:Lin\n"),
                        verify=True)
    assert [s.relation for s in d.steps] == ["", "⇒", "≡"]
    assert d.steps[2].verified is not None and d.steps[2].verified < 1e-12
    table = d.table()
    assert "O(s^2)" in table.splitlines()[1] and "O(s)" in table.splitlines()[3]


def test_inline_specialisation_and_cli(here, capsys):
    p = deriv(here, "start a.diag:G\nspecialise sim(p, r) := { return sum_f p[f] * r[f] }\n"
                    "apply assoc\ntarget a.diag:Lin\n")
    assert main(["derive", str(p), "--verify", "-o", str(here / "chain.svg")]) == 0
    out = capsys.readouterr().out
    assert "2 steps, from G to Lin (isomorphic)" in out and "verified numerically: 1 equality" in out
    import xml.etree.ElementTree as ET

    chain = (here / "chain.svg").read_text()
    ET.fromstring(chain.encode())
    assert chain.count("<svg") == 1 + 3  # the page, and one picture per step (start and two steps)
    assert "1. specialise sim(p, r)" in chain and "≡" in chain


def test_a_wrong_step_is_refused_with_its_number_and_reason(here, capsys):
    # associativity cannot apply before sim is a contraction
    p = deriv(here, "start a.diag:G\napply assoc\n")
    assert main(["derive", str(p)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"{p}:2:7: error: step 1 (apply assoc) fails: rule 'assoc' does not match here")


def test_a_specialisation_of_the_wrong_type_is_refused(here):
    p = deriv(here, "start a.diag:G\nspecialise sim(p) := { return sum_f p[f] }\n")
    with pytest.raises(DiagError, match=r"step 1 .* fails: 'sim' has 2 input\(s\); 1 name\(s\) given"):
        load_derivation(p)


def test_the_target_must_be_reached(here):
    p = deriv(here, "start a.diag:G\nspecialise sim := Dot\ntarget a.diag:Lin\n")
    with pytest.raises(DiagError, match="the result of step 1 is not the target 'Lin'") as e:
        load_derivation(p)
    assert (e.value.pos.line, e.value.pos.col) == (3, 1)


def test_a_reduction_cannot_be_used_backwards(here):
    rules = here / "r.rules"
    rules.write_text("dim k : fixed\nlearn F : [k] -> [k]\n"
                     "rule lin<n>(x: [k]) -> [k] { return F(x) } => { return x }\n")
    p = deriv(here, 'use "r.rules"\nstart a.diag:G\napply lin reversed\n')
    with pytest.raises(DiagError, match="step 1 .* fails: rule 'lin' is a reduction"):
        load_derivation(p)


def test_normalize_reaches_a_fixpoint(here, capsys):
    (here / "n.diag").write_text(DIAG.replace("abstract sim : [k], [k] -> []\n", "").split("diagram G")[0] + """
diagram Dot2(x: [s, d]) -> [s, d] {
  q = Q(x)
  kk = K(x)
  a[i, j] = sum_f q[i, f] * kk[j, f]
  y[i] = sum_j a[i, j] * V(x)[j]
  return y
}
""")
    assert main(["normalize", str(here / "n.diag"), "-d", "Dot2", "--rule", "assoc"]) == 0
    out = capsys.readouterr().out
    assert "round 1: assoc x1" in out and "a fixpoint" in out
    assert "time in the sequence length: O(s^2) -> O(s)" in out
    assert main(["normalize", str(here / "n.diag"), "-d", "Dot2", "--rule", "asoc"]) == 1
    assert "no rule named 'asoc'; did you mean 'assoc'?" in capsys.readouterr().err


def test_errors_in_an_inline_body_point_into_the_deriv_file(here):
    p = deriv(here, "start a.diag:G\nspecialise sim(p, r) := {\n  w = p\n  return sum_f w[f] * zz[f]\n}\n")
    with pytest.raises(DiagError, match="undefined name 'zz'") as e:
        load_derivation(p)
    assert (e.value.pos.file, e.value.pos.line, e.value.pos.col) == (str(p), 4, 23)


def test_a_learnable_tensor_specialised_inline(here):
    (here / "b.diag").write_text("dim s : seq\ndim d : fixed\nlearn rho : -> []\n"
                                 "diagram R(x: [s, d]) -> [s, d] {\n  return rho() * x\n}\n"
                                 "diagram I(x: [s, d]) -> [s, d] {\n  return 1 * x\n}\n")
    d = load_derivation(deriv(here, "start b.diag:R\nspecialise rho() := { return 1 }\ntarget b.diag:I\n"))
    assert [s.relation for s in d.steps] == ["", "⇒"]


def test_a_constant_placed_inside_simd_boxes_by_a_rewrite_compiles(here):
    (here / "r.rules").write_text("rule mul_zero<n>(x: []) -> [] { return 0 * x } == { return 0 }\n")
    (here / "c.diag").write_text("dim s : seq\ndiagram D(x: [s]) -> [s] {\n  return tanh(0 * tanh(x))\n}\n")
    d = load_derivation(deriv(here, 'use "r.rules"\nstart c.diag:D\napply mul_zero\n'), verify=True)
    assert d.steps[1].verified == 0.0


def test_normalize_says_which_bound_stopped_it(capsys):
    from stringdiag.cli.main import main

    args = ["normalize", "gallery/attention.diag", "-d", "SelfAttention", "--rule", "assoc", "commute"]
    assert main(args) == 0
    assert "stopped at a cycle: round 2 gave back a diagram seen before" in capsys.readouterr().out
    assert main(args + ["--max-rounds", "1"]) == 0
    assert "stopped at the round bound: 1 rounds (--max-rounds)" in capsys.readouterr().out
