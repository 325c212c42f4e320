"""benchmarks/sumformer_fig1.py's pieces (Alberti et al. 2023, Sec. 5 Fig. 1): the monomial map of
Theorem 4.1's continuous proof has C(n + d, d) - 1 coordinates, every x^alpha with 1 <= |alpha| <= n
once, against a brute-force enumeration and products written out here; the target functions are
equivariant (permuting the tokens permutes the values)."""
from __future__ import annotations

import importlib.util
import itertools
import math
from pathlib import Path

import pytest
import torch

PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "sumformer_fig1.py"
spec = importlib.util.spec_from_file_location("sumformer_fig1", PATH)
fig1 = importlib.util.module_from_spec(spec)
spec.loader.exec_module(fig1)


@pytest.mark.parametrize("d, n", [(4, 5), (3, 3), (2, 4), (1, 6)])
def test_exponents_are_every_monomial_of_degree_1_to_n_once(d, n):
    got = fig1.exponents(d, n)
    brute = {a for a in itertools.product(range(n + 1), repeat=d) if 1 <= sum(a) <= n}
    assert len(got) == len(set(got)) == len(brute) == math.comb(n + d, d) - 1
    assert set(got) == brute


def test_monomials_are_the_products():
    x = torch.rand(3, 5, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    alphas = fig1.exponents(4, 5)
    m = fig1.monomials(x, alphas)
    assert m.shape == (3, 5, 125)
    for k in (0, 7, 60, 124):
        a = alphas[k]
        want = x[..., 0] ** a[0] * x[..., 1] ** a[1] * x[..., 2] ** a[2] * x[..., 3] ** a[3]
        assert torch.allclose(m[..., k], want, rtol=1e-12, atol=0)


@pytest.mark.parametrize("name", sorted(fig1.FUNCTIONS))
def test_target_functions_are_equivariant(name):
    f = fig1.FUNCTIONS[name]
    x = torch.rand(4, 5, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    perm = torch.tensor([3, 0, 4, 1, 2])
    assert torch.allclose(f(x[:, perm]), f(x)[:, perm], rtol=1e-12, atol=1e-12)
    assert not torch.allclose(f(x[:, perm]), f(x), rtol=1e-6, atol=1e-6)  # not invariant: tokens differ
