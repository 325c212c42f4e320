"""App. B.1 of Khatri et al. (2024) in full: ``gallery/bahdanau_to_vaswani.deriv`` goes from
Bahdanau et al.'s encoder-decoder RNN to ``attention.diag:SelfAttention`` in Sec. 3.1's order,
and the three step kinds it needs (``dim``, ``absorb``, ``plug``) do what they say, checked
against hand-written float64 PyTorch and refusing what they must not do."""
from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
import torch

from stringdiag import loads
from stringdiag.cli.main import main
from stringdiag.derive.derivation import ABSORB, EQ, RED, REWIRE, load_derivation
from stringdiag.errors import DiagError
from stringdiag.lower.lower import compile

GALLERY = Path(__file__).resolve().parents[1] / "gallery"
B1 = GALLERY / "bahdanau_to_vaswani.deriv"


@pytest.fixture(scope="module")
def b1():
    return load_derivation(B1, verify=True)


def scans(d) -> int:
    return sum(1 for b in d.boxes() if d.record(b).scan)


def ops(d) -> list[str]:
    flat = d.expand()
    return [flat.record(b).op for b in flat.boxes()]


def step(deriv, text: str):
    (s,) = [s for s in deriv.steps if s.text.startswith(text)]
    return s


def test_the_cli_reaches_self_attention(capsys):
    assert main(["derive", str(B1), "--verify"]) == 0
    out = capsys.readouterr().out
    assert "from Bahdanau to SelfAttention (isomorphic)" in out


def test_the_steps_keep_sec_3_1s_order(b1):
    """bi-RNN -> SIMD feed-forward, then the decoder cell, the shrink, the absorption, the score,
    and last the boundary change; every equality verified numerically."""
    texts = [s.text.split("(")[0].split(" :=")[0] for s in b1.steps[1:]]
    order = ["specialise Fwd", "apply reverse_twice", "specialise Dec", "apply simd_scan_copied",
             "unfold AttendStepMap", "absorb enc into Score as Sim", "specialise Sim", "plug x into Init"]
    places = [next(k for k, t in enumerate(texts) if t.startswith(o)) for o in order]
    assert places == sorted(places)
    rels = [s.relation for s in b1.steps[1:]]
    assert rels.count(REWIRE) == 1 and rels[-1] == REWIRE and rels.count(ABSORB) == 2
    assert all(s.verified is not None and s.verified < 1e-9 for s in b1.steps if s.relation == EQ)


def test_the_bi_rnn_becomes_a_simd_feed_forward(b1):
    start = b1.steps[0].diagram
    assert scans(start.expand()) == 3  # two encoder loops, the decoder's
    after = step(b1, "apply reverse_twice").diagram
    assert scans(after) == 1 and "reverse" not in ops(after) and "rev" not in ops(after)


def test_the_decoder_loop_becomes_a_simd_box_and_shrinks(b1):
    loop = step(b1, "apply simd_scan_copied").diagram
    assert scans(loop) == 0
    (big,) = [b for b in loop.boxes() if loop.record(b).op == "AttendStepMap"]
    assert [dim for _, dim in loop.record(big).simd][0].name == "t"
    shrunk = step(b1, "unfold AttendStepMap").diagram
    over_t = [b for b in shrunk.boxes() if any(dim.name == "t" for _, dim in shrunk.record(b).simd)]
    assert len(over_t) == 1 and shrunk.record(over_t[0]).kind == "reindex"  # only the broadcast is left


def test_absorption_states_its_assumption(b1):
    for s in b1.steps:
        if s.relation == ABSORB:
            assert "invertible" in s.note and "Ef" in s.note and "Eb" in s.note
    after = step(b1, "absorb enc into Wv").diagram
    assert not {"Ef", "Eb", "cat", "Wv", "Score"} & set(ops(after))


def test_the_result_is_hand_written_self_attention(b1):
    """The last diagram, compiled with linear learners, against softmax(Q K^T / sqrt(k)) V
    written here with the same weights."""
    d, k, s = 5, 3, 7
    gm = compile(b1.result, dims={"d": d, "k": k}, approximator="linear", dtype=torch.float64)
    p = {n.rsplit(".", 2)[-2] + "." + n.rsplit(".", 1)[-1]: t for n, t in gm.named_parameters()}
    torch.manual_seed(0)
    for t in p.values():
        torch.nn.init.normal_(t)
    x = torch.randn(s, d, dtype=torch.float64)
    lin = {n: (lambda z, n=n: z @ p[n + ".weight"].T + p[n + ".bias"]) for n in ("Q", "K", "V")}
    a = torch.softmax(lin["Q"](x) @ lin["K"](x).T / math.sqrt(k), dim=-1)
    want = a @ lin["V"](x)
    got = gm(x)
    assert torch.linalg.norm(got - want) / torch.linalg.norm(want) < 1e-12


def test_reverse_is_the_rows_in_the_opposite_order():
    prog = loads("dim s : seq\ndim d : fixed\ndiagram R(x: [s, d]) -> [s, d] {\n  return reverse(x)\n}\n")
    x = torch.randn(6, 4, dtype=torch.float64)
    assert torch.equal(compile(prog["R"], dims={"d": 4}, dtype=torch.float64)(x), x.flip(0))


# -- the three step kinds on small diagrams --------------------------------------------------------
TOY = """dim s, t : seq
dim d, e, w : fixed
learn P : [d] -> [d]
learn X : [d] -> [d]
learn R : [d] -> [w]
learn R2 : [d] -> [w]
learn L : [d] -> [w]
diagram Step(st: [d], yp: [e], xs: [s, d]) -> [d] {
  a[j] = sum_f st[f] * xs[j, f]
  b = softmax(a)
  return sum_j b[j] * xs[j]
}
diagram Decode(x: [s, d], y: [t, e]) -> [t, d] {
  c = P(zeros<d>())
  z[n] = Step(c, y[n], x)
  return z
}
diagram Composite(x: [s, d]) -> [s, w] {
  enc[i] = X(x[i])
  y[i] = R(enc[i])
  return y
}
diagram Shared(x: [s, d]) -> [s, w], [s, w] {
  enc[i] = X(x[i])
  y[i] = R(enc[i])
  z[i] = R(x[i])
  return y, z
}
diagram State(x: [s, d]) -> [d], [s, w] {
  c = P(zeros<d>())
  y[i] = R(x[i])
  return c, y
}
learn Whole : [s, d] -> [w]
diagram Pooled(x: [s, d]) -> [w] {
  enc[i] = X(x[i])
  return Whole(enc)
}
diagram Mixing(x: [s, d]) -> [s, w] {
  enc = reverse(X(x))
  y[i] = R(enc[i])
  return y
}
"""


def run(tmp_path, start: str, steps: str, target: str | None = None):
    (tmp_path / "toy.diag").write_text(TOY)
    text = f"start toy.diag:{start}\n{steps}\n" + (f"target toy.diag:{target}\n" if target else "")
    (tmp_path / "toy.deriv").write_text(text)
    return load_derivation(tmp_path / "toy.deriv", verify=True)


def test_plug_feeds_row_i_where_the_copied_state_was(tmp_path):
    """Each decoder step read one state P(0); plugged, step i reads x_i: z_i = sum_j softmax_j(x_i . x_j) x_j."""
    der = run(tmp_path, "Decode", "unfold Step\nplug x into P")
    last = der.steps[-1]
    assert last.relation == REWIRE and "[s, d], [t, e] -> [t, d] becomes [s, d] -> [s, d] (t := s)" in last.note
    assert "no longer read: y" in last.note
    x = torch.randn(5, 3, dtype=torch.float64)
    want = torch.softmax(x @ x.T, dim=-1) @ x
    got = compile(der.result, dims={"d": 3}, dtype=torch.float64)(x)
    assert torch.linalg.norm(got - want) / torch.linalg.norm(want) < 1e-12


def test_plugging_into_an_output_makes_it_the_input(tmp_path):
    """The state itself an output ([d], a fixed width, not a position): once per position it
    is the input's rows, and the width stays a width."""
    der = run(tmp_path, "State", "plug x into P")
    assert der.result.signature().endswith("[s, d] -> [s, d], [s, w]")
    assert der.result.outputs[0] == der.result.inputs[0] and "P" not in ops(der.result)


def test_absorb_is_undone_by_specialising_the_new_learner(tmp_path):
    """L specialises back to R o X: the step never loses a function (the direction that needs
    no assumption), and the diagram before is reached again."""
    der = run(tmp_path, "Composite", "absorb enc into R as L\nspecialise L(u) := {\n  return R(X(u))\n}",
              target="Composite")
    assert [s.relation for s in der.steps[1:]] == [ABSORB, RED]
    assert "L" in ops(der.steps[1].diagram) and "X" not in ops(der.steps[1].diagram)


def test_a_fresh_learner_is_local_to_the_derivation(tmp_path):
    der = run(tmp_path, "Composite", "absorb enc into R as Fresh")
    (b,) = [b for b in der.result.boxes() if der.result.record(b).op == "Fresh"]
    assert der.result.record(b).local and der.result.record(b).ref.ins == (der.result.wire_type(der.result.inputs[0])[1:],)


@pytest.mark.parametrize("start, steps, message", [
    ("Shared", "absorb enc into R as L", "weights would be split in two"),
    ("Mixing", "absorb enc into R as L", "mixes positions"),
    ("Pooled", "absorb enc into Whole as L", "reads 'enc' whole, not position by position"),
    ("Composite", "absorb enc into X as L", "'X' does not read 'enc'"),
    ("Composite", "absorb enc into Nope as L", "no trainable box 'Nope'"),
    ("Composite", "absorb enc into R as P", "cannot take the place"),
    ("Composite", "absorb enc into R as R", "'R' is used here already"),
    ("Composite", "absorb nowhere into R as L", "no wires named 'nowhere'"),
    ("Decode", "plug q into P", "'q' is not an input"),
    ("Decode", "unfold Step\nplug y into P", "a row of 'y' is [e] but"),
    ("Decode", "plug x into Nothing", "no wire or box named 'Nothing'"),
    ("Composite", "dim w := s", "'s' is a seq dimension"),
    ("Composite", "dim w := zz", "no dimension 'zz'"),
    ("Composite", "dim w := w", "is 'w' already"),
    ("Composite", "dim e := d", "does not mention 'e'"),
])
def test_refusals_are_positioned_errors(tmp_path, start, steps, message):
    with pytest.raises(DiagError, match=re.escape(message)) as e:
        run(tmp_path, start, steps)
    assert e.value.pos is not None and e.value.pos.file.endswith("toy.deriv")


def test_dim_makes_two_widths_one(tmp_path):
    der = run(tmp_path, "Composite", "dim w := d")
    assert der.steps[-1].relation == RED and der.result.signature().endswith("[s, d] -> [s, d]")
    (r,) = [b for b in der.result.boxes() if der.result.record(b).op == "R"]
    assert der.result.record(r).ref.outs == (der.result.wire_type(der.result.inputs[0])[1:],)
