"""Alberti et al. (2023), Theorem 4.1's continuous proof: a Polynomial Sumformer built for a given
equivariant polynomial, against that polynomial written out here in NumPy (not through the parser)."""
from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
import torch

from stringdiag.cli.main import main
from stringdiag.construct.maxdef import parse
from stringdiag.construct.sumformer_poly import exponents, sumformer


def run(con, x: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        return con.module(torch.as_tensor(x)).numpy()


@pytest.mark.parametrize("n, d", [(2, 1), (3, 2), (4, 3)])
def test_phi_lists_every_monomial_of_degree_one_to_n(n, d):
    brute = {a for a in itertools.product(range(n + 1), repeat=d) if 1 <= sum(a) <= n}
    assert sorted(exponents(d, 1, n)) == sorted(brute) and len(brute) == math.comb(n + d, d) - 1


def test_fig2_function_n3():
    """Sec. 5's g(x_i, X) = x_i + 7 x_i^2 + 3 x_i (sum_{j != i} x_j)^3, n = 3, d = 1."""
    con = sumformer([parse("x[1,1] + 7*x[1,1]^2 + 3*x[1,1]*(x[1,2] + x[1,3])^3", 1, 3)], 3, 1)
    assert con.latent == 3
    rng = np.random.default_rng(3)
    for _ in range(10):
        x = rng.uniform(-1.5, 1.5, size=(3, 1))
        rest = x.sum() - x
        np.testing.assert_allclose(run(con, x), x + 7 * x ** 2 + 3 * x * rest ** 3, rtol=1e-10, atol=1e-10)


def test_two_coordinates_with_an_elementary_symmetric_term():
    """e_2 of the others is not a power sum: psi needs (p_1^2 - p_2) / 2, found by the construction."""
    g = ["x[1,1]*x[2,2]*x[2,3] + x[2,1]", "x[2,1]^2 * (x[1,2] + x[1,3]) - x[1,2]*x[1,3]"]
    con = sumformer([parse(s, 2, 3) for s in g], 3, 2)
    assert con.latent == math.comb(5, 2) - 1
    rng = np.random.default_rng(4)
    x = rng.uniform(-1, 1, size=(3, 2))
    want = np.zeros((3, 2))
    for i in range(3):
        j, k = [t for t in range(3) if t != i]
        want[i, 0] = x[i, 0] * x[j, 1] * x[k, 1] + x[i, 1]
        want[i, 1] = x[i, 1] ** 2 * (x[j, 0] + x[k, 0]) - x[j, 0] * x[k, 0]
    np.testing.assert_allclose(run(con, x), want, rtol=1e-10, atol=1e-10)
    perm = [2, 0, 1]
    np.testing.assert_allclose(run(con, x[perm]), want[perm], rtol=1e-10, atol=1e-10)  # equivariant


def test_cli_and_refusals(tmp_path, capsys):
    spec = tmp_path / "f.json"
    spec.write_text(json.dumps({"n": 3, "d": 1, "g": ["x[1,1] * (x[1,2]^2 + x[1,3]^2)"]}))
    assert main(["construct", "sumformer", "--function", str(spec), "-o", str(tmp_path / "out")]) == 0
    assert "largest relative error" in capsys.readouterr().out
    assert main(["info", str(tmp_path / "out" / "sumformer.diag"), "--equivariance"]) == 0
    assert "s: equivariant" in capsys.readouterr().out
    spec.write_text(json.dumps({"n": 3, "d": 1, "g": ["x[1,1] * x[1,2]"]}))  # not symmetric in tokens 2, 3
    assert main(["construct", "sumformer", "--function", str(spec), "-o", str(tmp_path / "o2")]) == 1
    assert "not symmetric in the other tokens" in capsys.readouterr().err
    spec.write_text(json.dumps({"n": 3, "d": 1, "g": ["max(x[1,1], 0)"]}))
    assert main(["construct", "sumformer", "--function", str(spec), "-o", str(tmp_path / "o3")]) == 1
    assert "without max or min" in capsys.readouterr().err
    spec.write_text(json.dumps({"n": 1000, "d": 3, "g": ["x[1,1]", "x[2,1]", "x[3,1]"]}))
    assert main(["construct", "sumformer", "--function", str(spec), "-o", str(tmp_path / "o4")]) == 1
    assert "features" in capsys.readouterr().err  # d' = C(1003, 3) - 1: refused before any enumeration
