"""A loop made around a learnable box keeps its weights: ``simd_unit`` read right to left turns
``y[t] = g(x[t])`` into a scan of a cell holding ``g``, so a local weight set of ``g`` is named
inside the new cell's instance (``Unit#1/H0#1``). The step must say which set that is (or the
oracle, and ``derive --verify``, give the two sides different weights and reject a sound step),
and must refuse when the set is used outside the cell too (one set would become two).

Judged by the tests' NumPy evaluator (``numpy_eval.py``), which names weight sets by itself and
shares no code with the oracle; the expected correspondences are written by hand.
"""
from __future__ import annotations

import numpy as np
import pytest
from numpy_eval import SeededWeights, evaluate

import stringdiag
from stringdiag import DiagError
from stringdiag.cli.main import main
from stringdiag.derive import steps
from stringdiag.rewrite.match import find_matches
from stringdiag.rewrite.rule import library

SOURCE = """\
dim s : seq
dim d : fixed
learn G : [d] -> [d]
diagram H0(x: [d]) -> [d] {
  learn L : [d] -> [d]
  return L(x)
}
diagram Main(x: [s, d]) -> [s, d] {
  w0 = H0(x)
  w1 = G(x)
  return w0 + w0 + w1
}
"""
SIZES = {"s": 3, "d": 2}
X = np.random.default_rng(0).normal(size=(2, 3, 2))


def value(d, rename=None):
    return evaluate(d, [X], SIZES, SeededWeights(rename))[0]


def around(d, wire: str) -> steps.Outcome:
    """``simd_unit`` right to left at the box making ``wire``."""
    rule = library()["simd_unit"]
    (m,) = [m for m in find_matches(d, rule, True) if m.where.split(", ")[0] == wire]
    return steps.apply_rule(d, rule, m)


@pytest.mark.parametrize("opened, want", [
    (False, {("diagram", "Unit#1/H0#1"): ("diagram", "H0#1")}),
    (True, {("learn", True, "Unit#1/H0#1/L"): ("learn", True, "H0#1/L")}),
])
def test_a_loop_made_around_a_local_learnable_says_which_set_it_holds(opened, want):
    d = stringdiag.loads(SOURCE)["Main"]
    d = d.expand() if opened else d
    out = around(d, "w0")
    assert out.relation == steps.EQ and out.correspond == want
    assert any(out.diagram.record(b).scan for b in out.diagram.boxes())
    rename = {str(new[-1]): str(old[-1]) for new, old in out.correspond.items()}
    before = value(d)
    assert np.allclose(value(out.diagram, rename), before, rtol=1e-12, atol=1e-12)
    # the new name alone is a fresh set: without the correspondence the two sides differ
    assert not np.allclose(value(out.diagram), before, rtol=1e-6, atol=1e-6)


def test_a_loop_made_around_a_global_learnable_renames_nothing():
    d = stringdiag.loads(SOURCE)["Main"]
    out = around(d, "w1")
    assert out.relation == steps.EQ and out.correspond == {}
    assert np.allclose(value(out.diagram), value(d), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("opened", [False, True])
def test_a_loop_made_around_one_use_of_a_shared_set_is_refused(opened):
    """After ``copy w0`` two boxes compute with one set; a cell around one of them would hold
    it under another name while the other keeps the old one: two sets."""
    d = stringdiag.loads(SOURCE)["Main"]
    shared = steps.copy(d.expand() if opened else d, "w0").diagram
    with pytest.raises(DiagError, match="splits one set of weights into two"):
        around(shared, "w0")
    rule = library()["simd_unit"]
    with pytest.raises(DiagError, match="splits one set of weights into two"):  # one cell around each
        steps.apply_everywhere(shared, rule, reverse=True)


def test_everywhere_says_which_set_each_new_cell_holds():
    d = stringdiag.loads(SOURCE)["Main"].expand()
    out, n = steps.apply_everywhere(d, library()["simd_unit"], reverse=True)
    assert n == 2 and out.relation == steps.EQ
    assert sorted(out.correspond.values()) == [("learn", True, "H0#1/L")]
    rename = {str(new[-1]): str(old[-1]) for new, old in out.correspond.items()}
    assert np.allclose(value(out.diagram, rename), value(d), rtol=1e-12, atol=1e-12)


def _derive(tmp_path, monkeypatch, capsys, steps_text: str) -> tuple[int, str]:
    (tmp_path / "loop.diag").write_text(SOURCE)
    (tmp_path / "loop.deriv").write_text("start loop.diag:Main\n" + steps_text)
    monkeypatch.chdir(tmp_path)
    code = main(["derive", "loop.deriv", "--verify"])
    return code, capsys.readouterr().err


def test_derive_verify_accepts_the_loop_and_refuses_the_split(tmp_path, monkeypatch, capsys):
    code, err = _derive(tmp_path, monkeypatch, capsys, "apply simd_unit reversed at w0\n")
    assert code == 0, err
    code, err = _derive(tmp_path, monkeypatch, capsys, "copy w0\napply simd_unit reversed at w0\n")
    assert code == 1 and "Traceback" not in err
    assert err.startswith("loop.deriv:3:") and "splits one set of weights into two" in err
