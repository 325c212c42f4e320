"""Theorems 4.3-4.5 of Alberti, Dern, Thesing and Kutyniok, "Sumformer: Universal Approximation
for Efficient Transformers" (2023): one attention layer represents the Sumformer's sum
Sigma = sum_k phi(x_k).

Two independent checks of each construction: the gallery derivation (every step checked, every
equality evaluated by the oracle, the result isomorphic to its target), and the theorem's claim
computed directly in hand-written float64 PyTorch from the paper's matrices (eqs. (22)-(28)),
which is where the constant of Theorem 4.4 is found off by the factor n/k.
"""
from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from stringdiag.cli.main import main
from stringdiag.derive.derivation import EQ, RED, load_derivation
from helpers import rel_max

GALLERY = Path(__file__).resolve().parents[1] / "gallery"
RULES = Path(__file__).resolve().parents[1] / "rules" / "sumformer.rules"

# derivation -> (target, relations of its steps)
DERIVATIONS = {
    "sumformer_thm43_softmax.deriv": ("SumformerSumRows", RED * 3 + EQ * 12),
    "sumformer_thm44_linformer.deriv": ("LinformerSumRows", RED * 5 + EQ * 17),
    "sumformer_thm45_performer.deriv": ("SumformerSumRows", RED * 4 + EQ * 23),
}


@pytest.mark.parametrize("name", sorted(DERIVATIONS))
def test_derivation_verifies_and_reaches_the_sum(name):
    d = load_derivation(GALLERY / name, verify=True)
    target, relations = DERIVATIONS[name]
    assert d.target is not None and d.target.name == target
    assert "".join(s.relation for s in d.steps[1:]) == relations
    for s in d.steps[1:]:
        if s.relation == EQ:
            assert s.verified is not None and s.verified < 1e-9, s.text


def test_the_rules_verify(capsys):
    assert main(["check", str(RULES), "--verify"]) == 0
    out = capsys.readouterr().out
    assert "cannot" not in out and out.count("verified, relative error") == out.count("≡")


# == the paper's matrices, by hand ================================================================
N, D, E_, K, P = 7, 2, 3, 4, 5   # n tokens of width d, d' = e, Linformer's k, Performer's k
W = 1 + D + 2 * E_               # the width of the rows of eq. (22)
PHI = slice(1 + D, 1 + D + E_)   # the phi(x_i) block
LAST = slice(1 + D + E_, W)      # the block that receives Sigma


def rows(gen) -> tuple[torch.Tensor, torch.Tensor]:
    """eq. (22): [1, x_i, phi(x_i), 0] for random x_i and phi(x_i); and Sigma = sum_i phi(x_i)."""
    x = torch.randn(N, D, generator=gen, dtype=torch.float64)
    phi = torch.randn(N, E_, generator=gen, dtype=torch.float64)
    X = torch.cat([torch.ones(N, 1, dtype=torch.float64), x, phi, torch.zeros(N, E_, dtype=torch.float64)], 1)
    return X, phi.sum(0)


def e1_matrix() -> torch.Tensor:
    """eq. (23): W_Q = W_K = [e_1, 0], the first column e_1 and zeros elsewhere."""
    m = torch.zeros(W, W, dtype=torch.float64)
    m[0, 0] = 1.0
    return m


def value_matrix(scale: float) -> torch.Tensor:
    """W_V of Theorem 4.3 ("such that we get (24)"): the phi block moved to the last block,
    times ``scale`` (n, so that the average 1/n sum becomes the sum)."""
    m = torch.zeros(W, W, dtype=torch.float64)
    m[PHI, LAST] = torch.eye(E_, dtype=torch.float64) * scale
    return m


def sum_rows(sigma: torch.Tensor) -> torch.Tensor:
    """[0_(n x 1+d+d'), Sigma]: Sigma in the last block of every row."""
    out = torch.zeros(N, W, dtype=torch.float64)
    out[:, LAST] = sigma
    return out


@pytest.fixture
def gen():
    return torch.Generator().manual_seed(4)


def test_thm43_e1_queries_and_keys_give_uniform_attention_and_the_sum(gen):
    X, sigma = rows(gen)
    WQ = WK = e1_matrix()
    A = torch.softmax((X @ WQ) @ (X @ WK).T / math.sqrt(W), dim=-1)
    assert torch.allclose(A, torch.full((N, N), 1.0 / N, dtype=torch.float64), rtol=0, atol=1e-15)
    head = A @ X @ value_matrix(N)
    assert rel_max(head, sum_rows(sigma)) < 1e-13
    # with the skip connection: eq. (24), [1, x_i, phi(x_i), Sigma]
    eq24 = X.clone()
    eq24[:, LAST] = sigma
    assert rel_max(X + head, eq24) < 1e-13


def linformer(X, E, F, WV) -> torch.Tensor:
    """Definition 2.5: softmax(X W_Q (E X W_K)^T / sqrt(width)) F X W_V."""
    WQ = WK = e1_matrix()
    return torch.softmax((X @ WQ) @ (E @ X @ WK).T / math.sqrt(W), dim=-1) @ (F @ X @ WV)


def test_thm44_the_papers_linformer_gives_n_over_k_times_the_sum(gen):
    X, sigma = rows(gen)
    ones = torch.ones(K, N, dtype=torch.float64)
    E, F = ones / N, ones / K                       # the proof of Theorem 4.4
    out = linformer(X, E, F, value_matrix(N))       # W_V as in Theorem 4.3
    assert rel_max(out, sum_rows(sigma) * N / K) < 1e-13
    assert rel_max(out, sum_rows(sigma)) > 0.5          # eq. (26) claims Sigma: off by n/k = 7/4
    # F = (1/n) 1 gives eq. (26) exactly; E's constant does not matter (any c 1 gives constant rows)
    assert rel_max(linformer(X, E, ones / N, value_matrix(N)), sum_rows(sigma)) < 1e-13
    assert rel_max(linformer(X, 3.0 * ones, ones / N, value_matrix(N)), sum_rows(sigma)) < 1e-13
    # and the Transformer of Theorem 4.3 with the same W_V gives Sigma: the Linformer alone is off
    A = torch.softmax((X @ e1_matrix()) @ (X @ e1_matrix()).T / math.sqrt(W), dim=-1)
    assert rel_max(out, A @ X @ value_matrix(N) * N / K) < 1e-13


def features(Z: torch.Tensor, omega: torch.Tensor) -> torch.Tensor:
    """Definition 2.6: a(x) = exp(-|x|^2 / 2) [exp(w_l . x)]_l / sqrt(k), row by row."""
    return torch.exp(Z @ omega.T - (Z * Z).sum(-1, keepdim=True) / 2) / math.sqrt(omega.shape[0])


def test_thm45_performer_with_the_extra_feed_forward_gives_the_sum(gen):
    X, sigma = rows(gen)
    omega = torch.randn(P, W, generator=gen, dtype=torch.float64)   # w_1 .. w_k, fixed
    WQ = WK = e1_matrix()
    aq, ak = features(X @ WQ, omega), features(X @ WK, omega)
    scores = aq @ ak.T
    lam = scores[0, 0]
    assert torch.allclose(scores, torch.full((N, N), lam.item(), dtype=torch.float64), rtol=1e-14, atol=0)
    e1 = torch.zeros(W, dtype=torch.float64)
    e1[0] = 1.0
    assert math.isclose(lam.item(), (features(e1[None], omega)[0] ** 2).sum().item(), rel_tol=1e-14)
    head = aq @ (ak.T @ (X @ value_matrix(N)))         # eq. (8), right to left
    Wff = torch.eye(W, dtype=torch.float64) / (lam * N)  # the extra feed-forward layer, b = 0
    assert rel_max(head @ Wff, sum_rows(sigma)) < 1e-13      # eq. (28), W applied row-wise
    assert rel_max(head, sum_rows(sigma) * lam * N) < 1e-13  # without it: lambda n Sigma


# == what the engine gained for these derivations =================================================
from stringdiag import loads  # noqa: E402
from stringdiag.errors import DiagError  # noqa: E402
from stringdiag.graph.constants import as_dim  # noqa: E402
from stringdiag.graph.types import Dim  # noqa: E402
from stringdiag.rewrite.match import find_matches  # noqa: E402
from stringdiag.rewrite.rule import loads_rules  # noqa: E402
from stringdiag.verify.oracle import equal  # noqa: E402

SMALL = """dim s : seq
dim d, k : fixed
learn F, G : [d] -> [d]
diagram Dead(x: [s, d]) -> [s, d] {
  junk = G(F(x))
  c = sqrt(k)
  return x
}
diagram Id(x: [s, d]) -> [s, d] {
  return x
}
diagram ScaleK(x: [d]) -> [d] {
  return x / sqrt(k)
}
diagram ScaleD(x: [d]) -> [d] {
  return x / sqrt(d)
}
diagram ScaleSum(x: [d]) -> [d] {
  return x / sqrt(1 + d + k)
}
"""


def test_prune_deletes_what_nothing_reads_and_is_an_equality(tmp_path):
    (tmp_path / "small.diag").write_text(SMALL)
    (tmp_path / "p.deriv").write_text("# Khatri et al. (2024), Sec. 2\nstart small.diag:Dead\nprune\n"
                                      "target small.diag:Id\n")
    d = load_derivation(tmp_path / "p.deriv", verify=True)
    assert d.steps[1].relation == EQ and d.steps[1].verified == 0.0
    assert len(d.steps[0].diagram) == 3 and len(d.result) == 0   # G, F and the constant go
    assert "deletes 3 unread boxes" in d.steps[1].note


def test_prune_with_nothing_to_delete_is_refused_where_it_is_written(tmp_path):
    (tmp_path / "small.diag").write_text(SMALL)
    (tmp_path / "p.deriv").write_text("start small.diag:Id\n  prune\n")
    with pytest.raises(DiagError) as e:
        load_derivation(tmp_path / "p.deriv")
    assert "nothing to prune" in e.value.message and (e.value.pos.line, e.value.pos.col) == (2, 3)


def test_a_constant_that_is_a_polynomial_of_dimensions_is_that_dimension():
    from stringdiag.graph.constants import ConstDim as D, ConstNum as N, ConstOp as Op

    d, k = Dim.var("d"), Dim.var("k")
    assert as_dim(Op("add", Op("add", N(1.0), D(d)), D(k))) == d + k + 1
    assert as_dim(Op("mul", N(2.0), D(d))) == d * 2
    assert as_dim(N(0.5)) is None and as_dim(Op("sqrt", D(d))) is None
    assert as_dim(Op("sub", D(d), N(1.0))) is None


def test_a_rule_dimension_in_a_constant_matches_a_sum_of_dimensions_written_out():
    (rule,) = loads_rules("rule unscale<m>(x: []) -> [] {\n  return x / sqrt(m)\n} == {\n  return x\n}\n")
    prog = loads(SMALL)
    assert len(find_matches(prog["ScaleSum"], rule)) == 1      # m := d + k + 1
    assert len(find_matches(prog["ScaleK"], rule)) == 1
    (exp_rule,) = loads_rules("rule unexp<m>(x: []) -> [] {\n  return x / sqrt(m)\n} == {\n  return x\n}\n")
    other = loads(SMALL.replace("x / sqrt(1 + d + k)", "x / sqrt(exp(d))"))
    assert find_matches(other["ScaleSum"], exp_rule) == []       # not a polynomial: no dimension


def test_the_oracle_sizes_a_dimension_only_a_constant_names():
    prog = loads(SMALL)
    assert equal(prog["ScaleK"], prog["ScaleK"]) == (True, 0.0)
    ok, err = equal(prog["ScaleK"], prog["ScaleD"])             # k and d get different sizes
    assert not ok and err > 0.05
