"""Rules files are checked (issue 7, item 6): ``stringdiag check FILE.rules [--verify]``.

Checking a ``.rules`` file parses it, type-checks both sides of every rule, and checks
that every reduction (``=>``) is an instance of its left side (also whenever rules are
loaded); ``--verify`` also evaluates both sides of every equation (``==``) numerically.
"""
from __future__ import annotations

import math
import re

import pytest

from stringdiag import DiagError
from stringdiag.cli.main import main
from stringdiag.rewrite.rule import RULES_DIR, load_rules, loads_rules

SHIPPED = sorted(str(p) for p in RULES_DIR.glob("*.rules"))

HEAD = """\
dim d : fixed
learn F, G : [d] -> [d]
fixed T : [d] -> [d]
# a fresh approximator: declared inside, new weights for every use
diagram Res(x: [d]) -> [d] {
  learn H : [d] -> [d]
  return x + H(x)
}
"""
LINE = HEAD.count("\n") + 1  # the line of the first rule after HEAD


def write(tmp_path, text: str, name: str = "my.rules"):
    p = tmp_path / name
    p.write_text(text)
    return p


# == the shipped rules ==========================================================================
def test_shipped_rules_verify(capsys):
    assert main(["check", *SHIPPED, "--verify"]) == 0
    cap = capsys.readouterr()
    assert "error" not in cap.err
    rules = [r for f in SHIPPED for r in load_rules(f)]
    for r in rules:
        (line,) = [ln for ln in cap.out.splitlines() if ln.split()[:2] == [r.name, r.symbol]]
        if r.kind == "equation":
            err = float(re.search(r"verified, relative error (\S+)( \(assuming .+\))?$", line).group(1))
            assert err < 1e-10, line  # float64 rounding, summed over the oracle's longest draws
        else:
            assert "an instance of the left" in line, line
    for f in SHIPPED:
        assert re.search(rf"^{re.escape(f)}: \d+ rules?$", cap.out, re.M)


def test_check_without_verify_says_ok(capsys):
    assert main(["check", *SHIPPED]) == 0
    out = capsys.readouterr().out
    assert all(re.search(rf"^{re.escape(f)}: ok \(\d+ rules?: ", out, re.M) for f in SHIPPED)


# == equations ==================================================================================
FALSE = """\
# true
rule twice(x: []) -> [] {
  return x + x
} == {
  return 2 * x
}
# false
rule doubled(x: []) -> [] {
  return x + x
} == {
  return x
}
"""


def test_a_false_equation_is_rejected_with_a_positioned_error(tmp_path, capsys):
    p = write(tmp_path, FALSE)
    assert main(["check", str(p), "--verify"]) == 1
    cap = capsys.readouterr()
    errors = [ln for ln in cap.err.splitlines() if ": error: " in ln]
    assert len(errors) == 1
    assert re.fullmatch(rf"{re.escape(str(p))}:8:6: error: rule 'doubled' is not an equation: its sides differ "
                        r"numerically \(relative error 1 on .+ inputs, output 1 at \[\d+\]: (\S+) against (\S+) \(inputs \S+\)\)",
                        errors[0]), errors[0]
    # the worst entry is named: x + x against x, so its left value is twice its right
    left, right = (float(v) for v in re.search(r": (\S+) against (\S+) \(inputs", errors[0]).groups())
    assert math.isclose(left, 2 * right, rel_tol=1e-5) and right != 0  # printed to six digits
    assert cap.err.splitlines()[0] == errors[0]  # the caret lines follow the error
    assert re.search(r"^  twice +≡  verified, relative error 0$", cap.out, re.M)  # the others are still checked
    assert re.search(r"^  doubled +≡  FAILED: its sides differ numerically \(relative error 1 on .+\)$", cap.out, re.M)


def test_equations_are_evaluated_only_with_verify(tmp_path, capsys):
    p = write(tmp_path, FALSE)
    assert len(load_rules(p)) == 2  # loading checks types and reductions, evaluates nothing
    assert main(["check", str(p)]) == 0
    assert f"{p}: ok (2 rules: twice, doubled)" in capsys.readouterr().out


def test_equations_with_box_variables_and_abstract_families_are_verified(tmp_path, capsys):
    p = write(tmp_path, HEAD + "abstract sim : [d], [d] -> []\n"
              "rule sym(x: [d], y: [d]) -> [] given f : [d] -> [d] {\n"
              "  return sim(f(x), y) + 0\n} == {\n  return sim(f(x), y)\n}\n"
              "rule wrong(x: [d], y: [d]) -> [] {\n  return sim(x, y)\n} == {\n  return sim(y, x)\n}\n")
    assert main(["check", str(p), "--verify"]) == 1
    cap = capsys.readouterr()
    assert re.search(r"^  sym +≡  verified, relative error 0$", cap.out, re.M)
    assert f"{p}:{LINE + 6}:6: error: rule 'wrong' is not an equation" in cap.err


def test_errors_in_a_rules_file_are_positioned(tmp_path, capsys):
    p = write(tmp_path, "rule r<n>(a: [n]) -> [n] {\n  return sum_j a[j]\n} == {\n  return a\n}\n")
    assert main(["check", str(p), "--verify"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"{p}:2:10: error: output 1 of 'r (left)' has type [] but the diagram declares [n]")


def test_diag_and_rules_files_in_one_call(tmp_path, capsys):
    d = write(tmp_path, "dim n : fixed\ndiagram A(x: [n]) -> [n] {\n  return tanh(x)\n}\n", "a.diag")
    r = write(tmp_path, FALSE)
    assert main(["check", str(d), str(r), "--verify"]) == 1
    out = capsys.readouterr().out
    assert f"{d}: ok (1 diagram: A)" in out and f"{r}: 2 rules" in out


# == reductions =================================================================================
GOOD = {
    # Khatri et al. (2024), Definition 3.1: f chosen to be addition with a residual
    "residual": ("rule r(x: [d]) -> [d] given f : [d] -> [d] {\n  return f(x)\n} => {\n  return x + f(x)\n}",
                 {"f": "2 boxes"}),
    "residual_weights": ("rule r(x: [d]) -> [d] {\n  return F(x)\n} => {\n  return x + F(x)\n}", {"F": "2 boxes"}),
    "identity": ("rule r(x: [d]) -> [d] {\n  return F(x)\n} => {\n  return x\n}", {"F": "the identity"}),
    "fresh": ("rule r(x: [d]) -> [d] {\n  return T(F(x))\n} => {\n  return T(Res(x))\n}", {"F": "2 boxes"}),
    "kept_skeleton": ("rule r(x: [d]) -> [d] {\n  return T(F(T(x)))\n} => {\n  return T(tanh(T(x)))\n}",
                      {"F": "1 box"}),
    "tied": ("rule r(x: [d], y: [d]) -> [d], [d] {\n  return F(x), G(y)\n} => {\n  return F(x), F(y)\n}",
             {"F": "itself", "G": "'F' (tied)"}),
    "merged": ("rule r(x: [d]) -> [d], [d] {\n  return F(x), G(x)\n} => {\n  a = F(x)\n  return a, a\n}",
               {"F": "itself", "G": "'F' (tied)"}),
    "per_position": ("rule r<n>(x: [n, d]) -> [n, d] {\n  y[i] = F(x[i])\n  return y\n} => {\n"
                     "  y[i] = x[i] + F(x[i])\n  return y\n}", {"F": "2 boxes"}),
    "chain": ("rule r(x: [d]) -> [d] {\n  return F(G(x))\n} => {\n  return F(x + G(x))\n}",
              {"G": "2 boxes", "F": "itself"}),
    "tensor": ("learn rho : -> []\nrule r(x: [d]) -> [d] {\n  return rho() * x\n} => {\n  return 1 * x\n}",
               {"rho": "1 box"}),
    "family": ("abstract sim : [d], [d] -> []\nrule r(x: [d], y: [d]) -> [] {\n  return sim(x, y)\n} => {\n"
               "  return sum_f x[f] * y[f]\n}", {"sim": "1 box"}),
}


@pytest.mark.parametrize("name", sorted(GOOD))
def test_a_legitimate_reduction_is_accepted(name, tmp_path, capsys):
    src, specialised = GOOD[name]
    (r,) = loads_rules(HEAD + src, "good.rules")
    assert r.kind == "reduction" and r.specialised == specialised
    p = write(tmp_path, HEAD + src)
    assert main(["check", str(p), "--verify"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^  r  ⇒  a reduction: the right side is an instance of the left \(", out, re.M), out


# (rule, line and column of the error relative to the rule's first line, message)
BAD = {
    # a fixed box is not a hole: it cannot be specialised (test_rewrite.py has G(x) => G(G(x)))
    "fixed_box": ("rule r(x: [d]) -> [d] {\n  return T(x)\n} => {\n  return T(T(x))\n}", (3, 10),
                  "on the left, output 1 is the output of 'T' (line {l1}); on the right it is computed otherwise, "
                  "and only learnable boxes, box variables and abstract families (none here) may be specialised"),
    "skeleton_changed": ("rule r(x: [d]) -> [d] {\n  return tanh(F(x))\n} => {\n  return sigmoid(F(x))\n}", (1, 10),
                         "the left side's 'tanh' (line {l1}) has no counterpart on the right reading the same wires"),
    "reads_more": ("rule r(x: [d], y: [d]) -> [d] {\n  return F(x) + y\n} => {\n  return F(y) + y\n}", (1, 10),
                   "what replaces 'F' on the right reads input 2 ('y'), which 'F' does not read on the left"),
    "new_weights": ("rule r(x: [d]) -> [d] {\n  return F(x)\n} => {\n  return G(x)\n}", (3, 10),
                    "its right side uses the learnable box 'G', which its left side does not"),
    "new_variable": ("rule r(x: [d]) -> [d] given g : [d] -> [d] {\n  return F(x)\n} => {\n  return g(x)\n}", (3, 10),
                     "box variable 'g' is used on the right side only"),
    "mixes_positions": ("rule r<n>(x: [n, d]) -> [n, d] {\n  y[i] = F(x[i])\n  return y\n} => {\n"
                        "  s[f] = sum_j x[j, f]\n  y[i] = F(x[i]) + s\n  return y\n}", (4, 10),
                        "on the left 'F' is applied for every i (a SIMD box), so it can only become a composite "
                        "applied for every i; the right side's contraction (line {l4}) in its replacement mixes "
                        "positions along i"),
    "untied_uses": ("rule r(x: [d], y: [d]) -> [d], [d] {\n  return F(x), F(y)\n} => {\n  return tanh(F(x)), F(y)\n}",
                    (1, 16), "'F' is used more than once on the left (one set of weights), but its uses are replaced "
                             "by different composites on the right"),
    "not_a_hole": ("rule r(x: [d]) -> [d] {\n  return tanh(x)\n} => {\n  return x\n}", (1, 10),
                   "the left side's 'tanh' (line {l1}) has no counterpart on the right reading the same wires; its "
                   "left side has no learnable box, box variable or abstract family to specialise"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_a_reduction_that_is_not_an_instance_is_rejected(name, tmp_path, capsys):
    src, (dl, col), message = BAD[name]
    message = message.format(**{f"l{k}": LINE + k for k in range(6)})
    where = f"{LINE + dl}:{col}"
    with pytest.raises(DiagError) as e:  # when the rules are loaded
        loads_rules(HEAD + src, "bad.rules")
    assert e.value.message.startswith("rule 'r' is not a reduction: ")
    assert message in e.value.message, e.value.message
    assert str(e.value.pos) == f"bad.rules:{where}", e.value.render()
    p = write(tmp_path, HEAD + src)  # and by the command, with or without --verify
    for flags in ([], ["--verify"]):
        assert main(["check", str(p), *flags]) == 1
        err = capsys.readouterr().err
        assert err.startswith(f"{p}:{where}: error: rule 'r' is not a reduction: "), err
        assert len([ln for ln in err.splitlines() if ": error: " in ln]) == 1


def test_a_reduction_in_a_library_used_by_a_derivation_is_checked(tmp_path):
    """load_rules runs the structural check: a derivation using the file stops there."""
    p = write(tmp_path, HEAD + BAD["fixed_box"][0])
    with pytest.raises(DiagError, match="is not a reduction"):
        load_rules(p)


def test_entries_non_finite_on_both_sides_agree_and_one_sided_ones_differ_on_unit_inputs():
    # log of a negative is NaN on both sides of a sound rule, a sum of infinities of both signs NaN
    # where the other side divides by zero once (inf): agreement, entry by entry; an entry finite on
    # one side only is an infinite error (strict, as on N(0, 1)) or left out (the other inputs)
    import torch
    from stringdiag.verify.oracle import entrywise, relative_error

    t = lambda *v: torch.tensor(v, dtype=torch.float64)  # noqa: E731
    nan, inf = float("nan"), float("inf")
    assert relative_error(t(1.0, nan), t(1.0, nan)) == 0.0
    assert relative_error(t(1.0, -inf), t(1.0, nan)) == 0.0
    assert relative_error(t(1.0, nan), t(1.0, 2.0)) == inf
    assert relative_error(t(1.0, 2.0), t(1.0, inf)) == inf
    assert entrywise(t(3.0, nan), t(1.0, 2.0), strict=False).error == pytest.approx(2.0, rel=1e-2)  # 3 against 1
    assert entrywise(t(1.0, nan), t(1.0, 2.0), strict=False).same


def test_an_output_that_is_never_finite_is_no_evidence(tmp_path, capsys):
    # both sides NaN everywhere on every distribution: not taken for equal functions
    p = write(tmp_path, "rule nowhere(x: []) -> [] {\n  return (0 * log(0)) * x\n} == {\n  return (0 * log(0)) + x\n}\n")
    assert main(["check", str(p), "--verify"]) == 1
    assert "error: rule 'nowhere' is not an equation" in capsys.readouterr().err


def test_the_prelude_softmax_of_masked_scores_is_finite_and_is_torch_softmax():
    import torch

    import stringdiag
    from stringdiag.lower import compile

    d = stringdiag.loads("""dim s : seq
diagram Masked(e: [s, s]) -> [s, s] {
  a[i] = softmax(where(e[i], causal<s>()[i]))
  return a
}""")["Masked"]
    opened = compile(d, dims={}, dtype=torch.float64, native=False)  # the prelude body, not torch.softmax
    e = torch.randn(2, 5, 5, dtype=torch.float64) * 30
    mask = torch.ones(5, 5, dtype=torch.bool).tril()
    want = torch.softmax(e.masked_fill(~mask, -float("inf")), -1)
    got = opened(e)
    assert torch.isfinite(got).all()
    assert torch.allclose(got, want, rtol=1e-12, atol=1e-15)
