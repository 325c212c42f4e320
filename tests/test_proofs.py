"""Proofs of rules (``rule ... by "FILE.deriv"``): ``stringdiag check FILE.rules`` runs each
rule's derivation and checks that it starts from the rule's left side, ends at its right
side and uses only steps of the rule's relation; and ``specialise F := ... at WIRE``, which
the proofs of rewrites (5) and (6) need, specialises one weight set of F only."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from stringdiag import DiagError
from stringdiag.cli.main import main
from stringdiag.derive.derivation import load_derivation
from stringdiag.derive.proof import check_proof
from stringdiag.graph.weights import weight_sets
from stringdiag.rewrite.rule import load_rules

ROOT = Path(__file__).resolve().parents[1]
ABSORB, MERGE = ROOT / "rules" / "absorb.rules", ROOT / "rules" / "merge.rules"
ANATOMY = ROOT / "gallery" / "anatomy.diag"
PROOFS = ROOT / "gallery" / "proofs"


# == the shipped proofs of rewrites (5) and (6) ==================================================
def test_every_shipped_proof_checks_and_is_reported(capsys):
    assert main(["check", str(ABSORB), str(MERGE), "--verify"]) == 0
    cap = capsys.readouterr()
    assert "error" not in cap.err
    proved = [r for f in (ABSORB, MERGE) for r in load_rules(f) if r.proof is not None]
    assert len(proved) == 12  # every rule of (5) and (6) but the four one-step ones
    for r in proved:
        (line,) = [ln for ln in cap.out.splitlines() if ln.split()[:2] == [r.name, "⇒"]]
        m = re.search(r"proved by (\S+) \((\d+) steps: ([≡⇒ ]+)\)", line)
        assert m, line
        assert Path(m.group(1)).name == Path(r.proof).name == f"{r.name}.deriv"
        relations = m.group(3).split()
        assert int(m.group(2)) == len(relations) and set(relations) <= {"≡", "⇒"} and "⇒" in relations


def test_each_proof_starts_at_the_left_side_and_ends_at_the_right():
    for r in load_rules(MERGE):
        proof = check_proof(r, verify=False)
        d = proof.derivation
        assert d.steps[0].diagram.expand().isomorphic(r.lhs.expand())
        assert d.result.expand().isomorphic(r.rhs.expand())
        assert not d.result.expand().isomorphic(r.lhs.expand())


def test_check_without_verify_runs_the_proofs_too(capsys):
    assert main(["check", str(MERGE)]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^  merge_ff_left_back +⇒  proved by \S+merge_ff_left_back\.deriv \(3 steps: ≡ ⇒ ≡\)$", out, re.M)


# == proofs that do not prove their rule ==========================================================
def rules_file(tmp_path: Path, body: str) -> tuple[Path, int, int]:
    """A rules file importing the generators; the line and column of its first `by` string."""
    p = tmp_path / "my.rules"
    p.write_text(f'import "{ANATOMY}"\n' + body)
    for k, line in enumerate(p.read_text().splitlines(), 1):
        if ' by "' in line:
            return p, k, line.index(' by "') + 5
    raise AssertionError("no proof named")


def refused(capsys, path: Path) -> str:
    assert main(["check", str(path), "--verify"]) == 1
    cap = capsys.readouterr()
    assert "FAILED: not proved by" in cap.out
    return cap.err


def test_a_proof_that_reaches_another_diagram_is_refused_at_its_by_string(tmp_path, capsys):
    # the proof of (5) at the second port, named by a rule of (5) at the first port
    p, line, col = rules_file(tmp_path, f"""
rule wrong(x: [s, d], y: [s, d]) -> [s, d] {{
  return ConcatFF(x, y)
}} => {{
  return ConcatFF(ConcatFF(x, x), y)
}} by "{PROOFS / 'absorb_ff_right.deriv'}"
""")
    err = refused(capsys, p)
    assert err.startswith(f"{p}:{line}:{col}: error: rule 'wrong' is not proved by ")
    assert "the derivation starts from 'FFSwapped'" in err and "not the rule's left side" in err


def test_the_boundaries_correspond_by_position(tmp_path, capsys):
    # the same diagram as the proof's start and result, but with the inputs in the other order:
    # ConcatFF(y, x) over (y, x) is ConcatFF(input 1, input 2), the proof's is ConcatFF(input 2, input 1)
    p, line, col = rules_file(tmp_path, f"""
rule swapped(y: [s, d], x: [s, d]) -> [s, d] {{
  return ConcatFF(y, x)
}} => {{
  return ConcatFF(y, ConcatFF(x, x))
}} by "{PROOFS / 'absorb_ff_right.deriv'}"
""")
    err = refused(capsys, p)
    assert err.startswith(f"{p}:{line}:{col}: error: rule 'swapped' is not proved by ")
    assert "starts from 'FFSwapped'" in err


def test_a_result_that_is_not_the_right_side_is_refused(tmp_path, capsys):
    p, line, col = rules_file(tmp_path, f"""
rule too_far(x: [s, d], y: [s, d]) -> [s, d] {{
  h = ConcatFF(x, x)
  return ConcatFF(h, y)
}} => {{
  return ConcatFF(ConcatFF(x, x), ConcatFF(x, y))
}} by "{PROOFS / 'absorb_ff_left_back.deriv'}"
""")
    err = refused(capsys, p)
    assert err.startswith(f"{p}:{line}:{col}: error: rule 'too_far' is not proved by ")
    assert "the derivation ends at 'FFLeftFF'" in err and "not the rule's right side" in err


def test_an_equation_is_not_proved_by_a_reduction(tmp_path, capsys):
    p, line, col = rules_file(tmp_path, f"""
rule not_equal(x: [s, d]) -> [s, s] {{
  return AttPrep(ConcatFF(x, x))
}} == {{
  return AttPrep(x)
}} by "{PROOFS / 'absorb_prep_back.deriv'}"
""")
    err = refused(capsys, p)
    assert err.startswith(f"{p}:{line}:{col}: error: rule 'not_equal' is not proved by ")
    assert "step 2 (specialise F(c)" in err and "is a reduction (⇒), and the rule is an equation (==)" in err


def test_a_missing_proof_is_refused_at_its_by_string(tmp_path, capsys):
    p, line, col = rules_file(tmp_path, """
rule unproved(x: [s, d]) -> [s, s] {
  return AttPrep(ConcatFF(x, x))
} => {
  return AttPrep(x)
} by "proofs/nope.deriv"
""")
    for flags in ([], ["--verify"]):
        assert main(["check", str(p), *flags]) == 1
        err = capsys.readouterr().err
        assert err.startswith(f"{p}:{line}:{col}: error: rule 'unproved' is not proved by ")
        assert "nope.deriv: the proof does not exist" in err


def test_a_failing_step_of_the_proof_is_reported_at_the_by_string(tmp_path, capsys):
    (tmp_path / "bad.deriv").write_text(f"start {ROOT / 'gallery' / 'overparam.diag'}:PrepFF\n"
                                        "unfold ConcatFF\napply split_cat\n")
    p, line, col = rules_file(tmp_path, """
rule bad(x: [s, d]) -> [s, s] {
  return AttPrep(ConcatFF(x, x))
} => {
  return AttPrep(x)
} by "bad.deriv"
""")
    err = refused(capsys, p)
    assert err.startswith(f"{p}:{line}:{col}: error: rule 'bad' is not proved by ")
    assert "the derivation fails: " in err and "bad.deriv:3:7: step 2 (apply split_cat) fails" in err


# == specialise ... at WIRE ======================================================================
DIAG = """\
dim s : seq
dim d : fixed
# a ConcatFF of its own: F is fresh for every use
diagram Mix(a: [s, d], b: [s, d]) -> [s, d] {
  learn F : [d + d] -> [d]
  y[i] = F(cat(a[i], b[i]))
  return y
}
diagram Two(x: [s, d], y: [s, d]) -> [s, d] {
  g = relu(x)
  h = Mix(g, g)
  return Mix(h, y)
}
diagram One(x: [s, d], y: [s, d]) -> [s, d] {
  return Mix(relu(x), y)
}
diagram Inner(x: [s, d], y: [s, d]) -> [s, d] {
  g = relu(x)
  return Mix(g, g)
}
"""
FIRST = "specialise F(c) := { u, v = split<d, d>(c)\n  return u }"


def derivation(tmp_path: Path, steps: str):
    (tmp_path / "a.diag").write_text(DIAG)
    p = tmp_path / "x.deriv"
    p.write_text("start a.diag:Two\nunfold Mix\n" + steps)
    return p


def learnables(d) -> list:
    return sorted(str(k[-1]) for k in weight_sets(d.expand()) if k[0] == "learn")


def test_specialise_at_a_wire_specialises_that_weight_set_only(tmp_path):
    d = load_derivation(derivation(tmp_path, f"{FIRST} at h\napply split_cat\ntarget a.diag:One\n"), verify=True)
    assert [s.relation for s in d.steps[1:]] == ["≡", "⇒", "≡"]
    assert learnables(d.steps[1].diagram) == ["Mix#1/F", "Mix#2/F"]
    assert learnables(d.steps[2].diagram) == ["Mix#2/F"]  # the outer F is untouched
    assert d.steps[2].note == "only the weights Mix#1/F (not Mix#2/F)"
    # without 'at' every use is specialised: no approximator is left, and the target is missed
    d = load_derivation(derivation(tmp_path, f"{FIRST}\n"))
    assert learnables(d.result) == []


def test_specialise_at_a_wire_named_in_full(tmp_path):
    # the outer output is 'y' of the instance Mix#2 (the input is 'y' too): named in full, the
    # '#' of an instance is no comment, and a comment may follow
    d = load_derivation(derivation(tmp_path, f"{FIRST} at Mix#2/y   # the outer one\napply split_cat\n"
                                             "target a.diag:Inner\n"), verify=True)
    assert d.steps[2].note == "only the weights Mix#2/F (not Mix#1/F)"


@pytest.mark.parametrize("wire,message", [
    ("nope", "no wire named 'nope' (the boxes 'F' make: Mix#2/y, h)"),
    ("x", "wire 'x' is an input of the diagram, not made by a box 'F' (the boxes 'F' make: Mix#2/y, h)"),
    ("g", "wire 'g' is made by 'relu'"),
])
def test_specialise_at_a_wire_no_F_makes_is_refused(tmp_path, capsys, wire, message):
    p = derivation(tmp_path, f"{FIRST} at {wire}\n")
    with pytest.raises(DiagError) as e:
        load_derivation(p)
    assert message in e.value.message and e.value.message.startswith("step 2 (specialise F(c)")
    assert (e.value.pos.line, e.value.pos.col) == (4, 17)  # at the wire named
    assert main(["derive", str(p)]) == 1
    assert capsys.readouterr().err.startswith(f"{p}:4:17: error: step 2 (specialise F(c)")
