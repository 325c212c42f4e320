"""derive --find: derivations found between two diagrams, always read back by the checker.

Found chains are gallery derivations rediscovered from their start and target alone (the
checker, with --verify, decides; the search only proposes); near-miss pairs that are not
equal — a transposed product, a weight set that differs — are never reported equal, and a
hand-written NumPy evaluation (float64) confirms that they differ.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from stringdiag.derive.derivation import load_derivation
from stringdiag.search.engine import Bounds
from stringdiag.search.find import find

SMALL = Bounds(max_steps=4, time_budget=20.0, max_boxes=200, max_states=300)

NEAR = """dim s : seq
dim d, k : fixed
learn Q, K : [d] -> [k]

diagram Scores(x: [s, d]) -> [s, s] {
  q = Q(x)
  kk = K(x)
  e[i, j] = sum_f q[i, f] * kk[j, f]
  return e
}

diagram Transposed(x: [s, d]) -> [s, s] {
  q = Q(x)
  kk = K(x)
  e[i, j] = sum_f q[j, f] * kk[i, f]
  return e
}

diagram Commuted(x: [s, d]) -> [s, s] {
  kk = K(x)
  q = Q(x)
  e[i, j] = sum_f kk[j, f] * q[i, f]
  return e
}

diagram SameWeights(x: [s, d]) -> [s, s] {
  q = Q(x)
  e[i, j] = sum_f q[i, f] * q[j, f]
  return e
}
"""


def test_an_equation_rediscovered_and_checked(tmp_path):
    out = tmp_path / "luong.deriv"
    f = find("gallery/scores.diag:MultiplicativeAttention", "gallery/scores.diag:MappedQueryDotAttention", out, SMALL)
    assert f.found and not f.outcome.reduction
    assert f.outcome.found.steps == ("apply assoc",)
    d = f.derivation  # read back from the file by derive --verify
    assert d.target is not None and d.target.name == "MappedQueryDotAttention"
    assert [s.verified is not None for s in d.steps[1:]] == [True]
    assert "target " in out.read_text() and "apply assoc" in out.read_text()


def test_a_specialisation_read_off_the_target(tmp_path):
    bounds = Bounds(max_steps=2, time_budget=20.0, max_boxes=200, max_states=50, reductions=True)
    f = find("gallery/scores.diag:ScoreAttention", "gallery/scores.diag:AdditiveAttention", tmp_path / "a.deriv", bounds)
    assert f.found and f.outcome.reduction
    (step,) = f.outcome.found.steps
    assert step.startswith("specialise f(") and "tanh(" in step and "learn W1" in step
    # without reductions a specialisation is not a step of an equality: not found
    g = find("gallery/scores.diag:ScoreAttention", "gallery/scores.diag:AdditiveAttention", tmp_path / "b.deriv",
             Bounds(max_steps=2, time_budget=20.0, max_boxes=200, max_states=50))
    assert not g.found and g.derivation is None


def test_a_chain_of_several_steps(tmp_path):
    f = find("gallery/similarity.diag:CausalLinearAttention", "gallery/recurrent.diag:LinearRNN",
             tmp_path / "rnn.deriv", SMALL)
    assert f.found
    assert f.outcome.found.steps[0] == "copy m" and len(f.outcome.found.steps) == 3
    assert all(s.verified is not None and s.verified < 1e-9 for s in f.derivation.steps[1:])


def test_an_equal_pair_outside_the_gallery(tmp_path):
    src = tmp_path / "near.diag"
    src.write_text(NEAR)
    f = find(f"{src}:Scores", f"{src}:Commuted", tmp_path / "c.deriv", SMALL)
    assert f.found and not f.outcome.reduction and f.derivation.steps[-1].verified is not None


def _scores(x, wq, wk, transposed=False, same=False):
    q, kk = x @ wq, x @ (wq if same else wk)
    e = q @ kk.T
    return e.T if transposed else e


def test_near_misses_are_never_reported_equal(tmp_path):
    src = tmp_path / "near.diag"
    src.write_text(NEAR)
    rng = np.random.default_rng(0)
    x, wq, wk = rng.normal(size=(5, 3)), rng.normal(size=(3, 4)), rng.normal(size=(3, 4))
    # an independent reading: each pair differs numerically
    assert np.abs(_scores(x, wq, wk) - _scores(x, wq, wk, transposed=True)).max() > 1e-3
    assert np.abs(_scores(x, wq, wk) - _scores(x, wq, wk, same=True)).max() > 1e-3
    both = Bounds(max_steps=3, time_budget=10.0, max_boxes=40, max_states=60, reductions=True)
    for other in ("Transposed", "SameWeights"):
        for bounds in (both,):
            f = find(f"{src}:Scores", f"{src}:{other}", tmp_path / f"{other}.deriv", bounds)
            assert not f.found and f.derivation is None, (other, f.outcome.found)
            assert "target" not in (tmp_path / f"{other}.deriv").read_text()


def _cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "stringdiag", "derive", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=300)


@pytest.mark.parametrize("case", ["found", "not found", "usage"])
def test_the_command(tmp_path, case):
    root = Path(__file__).resolve().parents[1]
    scores = root / "gallery" / "scores.diag"
    if case == "found":
        r = _cli("--find", f"{scores}:MultiplicativeAttention", f"{scores}:MappedQueryDotAttention",
                 "--write", "luong.deriv", "--max-states", "50", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert "wrote luong.deriv" in r.stdout and "(isomorphic)" in r.stdout
        assert "verified numerically: 1 equality" in r.stdout
        back = load_derivation(tmp_path / "luong.deriv", verify=True)  # as derive --verify reads it
        assert back.target.name == "MappedQueryDotAttention" and back.steps[1].verified is not None
    elif case == "not found":
        (tmp_path / "near.diag").write_text(NEAR)
        r = _cli("--find", "near.diag:Scores", "near.diag:Transposed", "--max-states", "40", cwd=tmp_path)
        assert r.returncode == 1 and r.stderr.startswith("error: no derivation found within the bound")
        assert "closest form reached" in r.stdout and "Traceback" not in r.stderr
        assert "--reductions" not in r.stderr  # no abstract box: the hint would mislead
        sim = root / "gallery" / "similarity.diag"
        r = _cli("--find", f"{sim}:GenericSimilarityAttention", f"{sim}:LinearAttention", "--max-states", "5",
                 cwd=tmp_path)
        assert r.returncode == 1 and "specialising it is a ⇒ step, tried only with --reductions" in r.stderr
    else:
        r = _cli("--find", f"{scores}:ScoreAttention", f"{scores}:DotAttention", "x.deriv", cwd=tmp_path)
        assert r.returncode == 2 and r.stderr.startswith("error:")


KERNEL = """dim s : seq
dim d, k : fixed
learn Q, K : [d] -> [k]
learn V    : [d] -> [d]

diagram KernelAttention(x: [s, d]) -> [s, d] {
  q  = Q(x)
  kk = K(x)
  v  = V(x)
  a[i, j]  = sum_f elu1(q[i])[f] * elu1(kk[j])[f]
  one      = ones<s>()
  z[i]     = sum_j a[i, j] * one[j]
  an[i, j] = a[i, j] / z[i]
  y[i]     = sum_j an[i, j] * v[j]
  return y
}
"""


def test_optimize_finds_the_linear_form(tmp_path):
    from stringdiag.search.cheapest import Cost, optimize

    src = tmp_path / "kernel.diag"
    src.write_text(KERNEL)
    o = optimize(f"{src}:KernelAttention", Cost.TIME, tmp_path / "lin.deriv",
                 Bounds(max_steps=4, time_budget=30.0, max_boxes=100, max_states=100))
    before, after = o.complexities()
    assert (before.seq_time, after.seq_time) == ("s^2", "s") and o.after < o.before / 10
    assert o.derivation is not None and all(s.relation == "≡" for s in o.derivation.steps[1:])
    assert all(s.verified is not None for s in o.derivation.steps[1:])  # read back with --verify


def test_optimize_finds_the_chunked_form_of_a_scan(tmp_path):
    from stringdiag.search.cheapest import Cost, optimize

    o = optimize("gallery/recurrent.diag:RetentionRecurrent", Cost.MEMORY, tmp_path / "chunked.deriv",
                 Bounds(max_steps=4, time_budget=40.0, max_boxes=100, max_states=300))
    assert o.steps[-1] == "apply chunk_decay" and o.after < o.before
    assert o.derivation is not None and o.derivation.result.isomorphic(
        load_derivation("gallery/retnet.deriv").target)  # RetentionChunkwise, up to isomorphism


def test_discover_at_a_tiny_size(tmp_path):
    from stringdiag.rewrite.rule import load_rules
    from stringdiag.search.fingerprints import discover, rules_file, terms

    # the fingerprints: every term's values at the same random points, by hand for a few
    ts = {t.text: t for t in terms(["add", "neg"], 1, np.random.default_rng(0))}
    assert set(ts) == {"x", "y", "neg(x)", "neg(y)", "add(x, x)", "add(x, y)", "add(y, x)", "add(y, y)"}
    assert ts["add(x, y)"].value == ts["add(y, x)"].value != ts["add(x, x)"].value
    kept, counts = discover(["add", "max"], 1)
    pairs = {(d.lhs, d.rhs) for d in kept}
    assert ("max(x, x)", "x") in pairs and ("add(y, x)", "add(x, y)") in pairs
    assert counts["kept"] == len(kept) <= counts["verified"] <= counts["proposed"]
    assert not any("max(y, y)" in d.lhs for d in kept)  # a renaming of max(x, x) == x, not a second rule
    out = tmp_path / "found.rules"
    out.write_text(rules_file(kept, ["add", "max"], 1, counts))
    assert [r.name for r in load_rules(out)] == [f"found_{k}" for k in range(1, len(kept) + 1)]
