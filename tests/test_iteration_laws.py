"""The laws of finite iteration (rules/iteration.rules; Khatri et al. (2024), App. A.1.3).

Each law's two sides are evaluated on random float64 inputs, their box variables filled in
by small definitions written here, and compared with a loop written by hand in PyTorch from
the same formulas (the independent reference). Then the rewrites themselves: inside a
scanned cell (a cell pattern matched against the cell's body), across a scan (a process
sliding round the loop), both ways; the condition that rejects a cell that is not the
pattern's; the SIMD laws the elaborator makes true by construction; and ``normalize`` on
the gallery ending at a fixpoint."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

import stringdiag
from stringdiag.derive.normal import DEFAULT_RULES, normalize
from stringdiag.elaborate.loader import load
from stringdiag.graph.types import Dim
from stringdiag.lower.lower import compile
from stringdiag.rewrite import search
from stringdiag.rewrite.dpo import rewrite
from stringdiag.rewrite.match import find_matches
from stringdiag.rewrite.rule import library, loads_rules
from stringdiag.verify.oracle import equal, instantiated

LAWS = library()
SIZES = {"n": 4, "u": 3, "v": 2, "a": 5, "b": 2, "m": 3, "p": 2, "q": 3}

# the box variables' stand-ins: fixed formulas, restated by hand in torch below
FILLERS = stringdiag.loads("""
diagram F<u, a, b>(c: [u], e: [a]) -> [u], [b] {
  s = sum_k e[k]
  r = sum_i c[i]
  pb = positions<b>()
  p[i] = tanh(c[i] + s)
  q[j] = tanh(pb[j] * r + s)
  return p, q
}
diagram Fv<u, v, a, b>(c: [u], e: [a]) -> [v], [b] {
  s = sum_k e[k]
  r = sum_i c[i]
  pv = positions<v>()
  pb = positions<b>()
  p[i] = tanh(pv[i] * r + s)
  q[j] = tanh(pb[j] - r * s)
  return p, q
}
diagram G<v, u>(x: [v]) -> [u] {
  pu = positions<u>()
  t = sum_k x[k]
  y[i] = tanh(pu[i] + t)
  return y
}
diagram H<u, a, b>(c: [u], e: [a]) -> [b] {
  s = sum_k e[k]
  r = sum_i c[i]
  pb = positions<b>()
  q[j] = tanh(pb[j] * r + s)
  return q
}
diagram Gm<a, b>(e: [a]) -> [b] {
  pb = positions<b>()
  s = sum_k e[k]
  q[j] = tanh(pb[j] + s)
  return q
}
""", "fillers.diag")


def f(c, e, b):
    s, r = e.sum(), c.sum()
    return torch.tanh(c + s), torch.tanh(torch.arange(b, dtype=c.dtype) * r + s)


def fv(c, e, v, b):
    s, r = e.sum(), c.sum()
    return torch.tanh(torch.arange(v, dtype=c.dtype) * r + s), torch.tanh(torch.arange(b, dtype=c.dtype) - r * s)


def g(x, u):
    return torch.tanh(torch.arange(u, dtype=x.dtype) + x.sum())


def h(c, e, b):
    return torch.tanh(torch.arange(b, dtype=c.dtype) * c.sum() + e.sum())


def run_sides(name: str, fill: dict, inputs: list[torch.Tensor]) -> list[tuple]:
    """Both sides of a law, compiled at SIZES with the fillers, on the inputs."""
    out = []
    for side in (LAWS[name].lhs, LAWS[name].rhs):
        mod = compile(instantiated(side, {k: FILLERS[v] for k, v in fill.items()}), dims=SIZES, dtype=torch.float64)
        y = mod(*inputs)
        out.append(tuple(y) if isinstance(y, (tuple, list)) else (y,))
    return out


def close(got: tuple, want: tuple) -> None:
    assert len(got) == len(want)
    for x, y in zip(got, want):
        assert x.shape == y.shape
        assert ((x - y).abs().max() / y.abs().max().clamp_min(1e-30)).item() < 1e-12


def rand(*shape):
    return torch.randn(*shape, dtype=torch.float64)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def test_simd_scan_is_a_parallel_map():
    u0, x = rand(3), rand(4, 5)
    want = (torch.stack([h(u0, x[t], 2) for t in range(4)]),)
    for got in run_sides("simd_scan", {"h": "H"}, [u0, x]):
        close(got, want)


def test_simd_unit_is_a_parallel_map():
    x = rand(4, 5)
    want = (torch.stack([torch.tanh(torch.arange(2.0, dtype=x.dtype) + x[t].sum()) for t in range(4)]),)
    for got in run_sides("simd_unit", {"g": "Gm"}, [x]):
        close(got, want)


def test_yank_is_a_delay():
    u0, x = rand(3), rand(4, 3)  # m + 1 = 4 steps of the symmetry
    carry, ys = u0, []
    for t in range(4):
        ys.append(carry)
        carry = x[t]
    for got in run_sides("yank", {}, [u0, x]):
        close(got, (carry, torch.stack(ys)))


def test_slide_moves_a_process_round_the_loop():
    w0, x = rand(2), rand(4, 5)
    carry, ys = g(w0, 3), []  # the left side, by hand: g on the way out of every step
    for t in range(4):
        p, q = fv(carry, x[t], 2, 2)
        carry = g(p, 3)
        ys.append(q)
    for got in run_sides("slide", {"f": "Fv", "g": "G"}, [w0, x]):
        close(got, (carry, torch.stack(ys)))


def test_unroll_splits_the_iteration_count():
    u0, xa, xb = rand(3), rand(2, 5), rand(3, 5)
    carry, ys = u0, []
    for e in torch.cat([xa, xb]):
        carry, y = f(carry, e, 2)
        ys.append(y)
    for got in run_sides("unroll", {"f": "F"}, [u0, xa, xb]):
        close(got, (carry, torch.stack(ys)))


def test_vanish_one_step_is_the_cell():
    u0, x = rand(3), rand(1, 5)
    c, y = f(u0, x[0], 2)
    for got in run_sides("vanish", {"f": "F"}, [u0, x]):
        close(got, (c, y[None]))


def test_a_wrong_law_is_caught():
    """The check is not vacuous: sliding g to the loop's entry without moving it off the
    initial carry is not the same loop."""
    (bad,) = loads_rules(LAW_TEXT.replace("scan Entry<u, v, a, b>(w0, x[t])", "scan Entry<u, v, a, b>(g(g(w0)), x[t])")
                         .replace("(w0: [v], x: [n, a]) -> [u], [n, b]", "(w0: [u], x: [n, a]) -> [u], [n, b]")
                         .replace("g : [v] -> [u]", "g : [u] -> [u]").replace("<n, u, v, a, b>", "<n, u, a, b>")
                         .replace("Exit<u, v, a, b>", "Exit<u, a, b>").replace("Entry<u, v, a, b>", "Entry<u, a, b>")
                         .replace("-> [v], [b]", "-> [u], [b]").replace("c: [v]", "c: [u]")
                         .replace("-> [v], [b] {\n    p, q = f(g(c), e)", "-> [u], [b] {\n    p, q = f(g(c), e)"),
                         "bad.rules")
    same, err = equal(bad.lhs, bad.rhs, instantiate={"f": "learn", "g": "learn"})
    assert not same and err > 1e-3


LAW_TEXT = """
rule slide<n, u, v, a, b>(w0: [v], x: [n, a]) -> [u], [n, b]
  given f : [u], [a] -> [v], [b]
  given g : [v] -> [u]
  where diagram Exit<u, v, a, b>(c: [u], e: [a]) -> [u], [b] {
    p, q = f(c, e)
    return g(p), q
  }
  where diagram Entry<u, v, a, b>(c: [v], e: [a]) -> [v], [b] {
    p, q = f(g(c), e)
    return p, q
  }
{
  last, y[t] = scan Exit<u, v, a, b>(g(w0), x[t])
  return last, y
} == {
  inner, y[t] = scan Entry<u, v, a, b>(w0, x[t])
  return g(inner), y
}
"""

# -- rewriting inside and across a scan ----------------------------------------------------------
TARGET = stringdiag.loads("""
dim s : seq
dim d, k, k2, o : fixed
learn Hc : [k], [d] -> [o]
learn H0 : -> [k]
learn Rc : [k], [d] -> [k], [o]
learn Fc : [k], [d] -> [k2], [o]
learn Gc : [k2] -> [k]
diagram Keep(c: [k], v: [d]) -> [k], [o] {
  return c, Hc(c, v)
}
diagram Loop(x: [s, d]) -> [s, o] {
  _l, y[t] = scan Keep(H0(), x[t])
  return y
}
diagram Par(x: [s, d]) -> [s, o] {
  h0 = H0()
  y[t] = Hc(h0, x[t])
  return y
}
diagram Rnn(x: [s, d]) -> [s, o] {
  _l, y[t] = scan Rc(H0(), x[t])
  return y
}
diagram Ex(c: [k], e: [d]) -> [k], [o] {
  p, q = Fc(c, e)
  return Gc(p), q
}
diagram Slid(w0: [k2], x: [s, d]) -> [k], [s, o] {
  last, y[t] = scan Ex(Gc(w0), x[t])
  return last, y
}
diagram Recur(c: [k], v: [d]) -> [k], [o] {
  c2, y = Rc(c, v)
  return c2, Hc(c, v)
}
diagram Loop2(x: [s, d]) -> [s, o] {
  _l, y[t] = scan Recur(H0(), x[t])
  return y
}
""", "target.diag")


def scans(d) -> list[str]:
    return sorted(d.record(b).op for b in d.boxes() if d.record(b).scan)


def test_simd_scan_rewrites_a_loop_both_ways():
    loop, par = TARGET["Loop"], TARGET["Par"]
    (m,) = find_matches(loop, LAWS["simd_scan"])
    out = rewrite(loop, m)
    assert scans(out) == [] and out.expand().isomorphic(par.expand())
    (m,) = find_matches(par, LAWS["simd_scan"], reverse=True)
    back = rewrite(par, m)
    assert scans(back) == ["Keep"]  # the rule's cell, built of the process matched (Hc)
    assert equal(back, loop)[0]


def test_slide_rewrites_across_a_scan():
    slid = TARGET["Slid"]
    (m,) = find_matches(slid, LAWS["slide"])
    out = rewrite(slid, m)
    assert scans(out) == ["Entry"]
    (cell,) = [out.record(b).ref for b in out.boxes() if out.record(b).scan]
    assert sorted(cell.record(b).op for b in cell.boxes()) == ["Fc", "Gc"]  # the processes, with their weights
    assert equal(slid, out)[0]
    (m,) = find_matches(out, LAWS["slide"], reverse=True)
    assert equal(rewrite(out, m), slid)[0]


DELAYS = stringdiag.loads("""
dim s : seq
dim d, h : fixed
diagram Flip<u>(c: [u], v: [u]) -> [u], [u] { return v, c }
diagram Delay(u0: [d], x: [s + 1, d]) -> [d], [s + 1, d] {
  last, y[t] = scan Flip<d>(u0, x[t])
  return last, y
}
diagram Heads(u0: [h, d], x: [h, s + 1, d]) -> [h, d], [h, s + 1, d] {
  last, y = Delay<s>(u0, x)
  return last, y
}
diagram Bare(u0: [d], x: [s, d]) -> [d], [s, d] {
  last, y[t] = scan Flip<d>(u0, x[t])
  return last, y
}
""", "delays.diag")


def test_yank_rewrites_a_box_less_cell_inside_a_simd_box():
    """``yank``'s cell has no boxes and its ``m`` is named only in ``m + 1``: a loop of a
    user's symmetry (``Flip``, by body, not name) over ``s + 1`` steps, per head, binds
    ``m`` to ``s`` and becomes a delay, checked against one written by hand; and back."""
    heads = DELAYS["Heads"].expand()
    (m,) = find_matches(heads, LAWS["yank"])
    assert m.slots and m.dims["m"] == Dim.var("s")
    out = rewrite(heads, m)
    assert scans(out) == []
    u0, x = rand(2, 3), rand(2, 5, 3)  # h = 2 heads, s + 1 = 5 steps, d = 3
    got = compile(out, dims={"s": 4, "d": 3, "h": 2}, dtype=torch.float64)(u0, x)
    close(tuple(got), (x[:, -1], torch.cat([u0[:, None], x[:, :-1]], dim=1)))
    (m,) = find_matches(out, LAWS["yank"], reverse=True)
    back = rewrite(out, m)
    assert scans(back) == ["Swap"] and equal(back, heads)[0]
    # over a bare s, m would be s - 1, which is no dimension: not found
    assert find_matches(DELAYS["Bare"], LAWS["yank"]) == []


def test_same_cell_a_recurrent_cell_is_not_a_pass_through(monkeypatch):
    """``same_cell``: the cell ``Recur`` reads its carry but makes a new one; it is not the
    pattern's ``Keep`` (which passes its carry on), and lifting the condition lets the law
    wrongly match there."""
    loop2 = TARGET["Loop2"]
    assert find_matches(loop2, LAWS["simd_scan"]) == []
    monkeypatch.setattr(search, "same_cell", lambda pn, tn, uni, match_body: {})
    assert len(find_matches(loop2, LAWS["simd_scan"])) == 1


def test_same_cell_a_learnable_cell_has_no_body():
    """A scanned learnable (an RNN cell) has no body a cell pattern could match."""
    assert find_matches(TARGET["Rnn"], LAWS["simd_scan"]) == []


def test_tightening_laws_hold_by_construction():
    """Fusion/fission, strength and moving a process through a copy (App. A.1.3): the
    elaborator places each box in the SIMD boxes its inputs depend on, so the two spellings
    of each are one graph (which is why they are not rules)."""
    p = stringdiag.loads("""
dim n : seq
dim a, b, c : fixed
learn F : [a] -> [b]
learn G : [b] -> [c]
learn K : [c] -> [a]
learn M : [a], [a] -> [c]
diagram Fused(x: [n, a]) -> [n, c] {
  y[i] = G(F(x[i]))
  return y
}
diagram Fissioned(x: [n, a]) -> [n, c] {
  u[i] = F(x[i])
  y[i] = G(u[i])
  return y
}
diagram Inside(x: [n, a], z: [c]) -> [n, c] {
  y[i] = M(x[i], K(z))
  return y
}
diagram Outside(x: [n, a], z: [c]) -> [n, c] {
  kz = K(z)
  y[i] = M(x[i], kz)
  return y
}
""", "tight.diag")
    assert p["Fused"].isomorphic(p["Fissioned"]) and p["Inside"].isomorphic(p["Outside"])


GALLERY = sorted(str(p) for p in (Path(__file__).resolve().parents[1] / "gallery").glob("*.diag"))


@pytest.mark.parametrize("path", GALLERY, ids=lambda p: Path(p).name)
def test_normalize_reaches_a_fixpoint_on_the_gallery(path):
    prog = load(path)
    for name in prog.own:
        d = prog[name]
        if d.generics:
            continue
        result = normalize(d, DEFAULT_RULES)
        assert result.fixpoint, f"{name}: {result.stop}"
        # where a step was taken, the normal form computes what the diagram computes
        assert not result.rewrites or equal(d, result.diagram)[0], f"{name}: {result.rewrites} rewrites"


def test_normalize_leaves_the_function_unchanged_by_an_independent_evaluation():
    """The gallery is normal already (its test above rewrites nothing); these diagrams are not:
    each normalised form computes what the diagram computes, by tests/numpy_eval.py with one
    set of random weights per weight set, and at least one step was taken."""
    import numpy as np
    from numpy_eval import SeededWeights, evaluate

    sizes = {"s": 5, "d": 3, "k": 2, "k2": 4, "o": 3}
    rewrites = 0
    for name in ("Loop", "Rnn", "Slid", "Loop2"):
        d = TARGET[name]
        result = normalize(d)
        assert result.fixpoint, f"{name}: {result.stop}"
        rewrites += result.rewrites
        rng = np.random.default_rng(len(name))
        xs = [rng.normal(size=(2, *[x.evaluate(sizes) for x in t])) for t in d.input_types]
        before = evaluate(d, xs, sizes, SeededWeights())
        after = evaluate(result.diagram, xs, sizes, SeededWeights())
        for a, b in zip(before, after, strict=True):
            assert a.shape == b.shape and np.abs(a - b).max() <= 1e-12 * np.abs(a).max(), name
    assert rewrites > 0


def test_normalize_removes_a_loop_that_carries_nothing():
    result = normalize(TARGET["Loop"])
    assert result.fixpoint and result.rewrites == 1 and scans(result.diagram) == []
