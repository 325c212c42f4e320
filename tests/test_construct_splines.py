"""Lai, Lim and Liu (2024), Sec. 3.3: encoders built from the proofs of Lemma 3.6, Lemma 3.7 and
Theorem 3.8, against targets computed here in float64 NumPy: the monomials by brute-force
enumeration, the network and the max-min polynomials evaluated directly, and the blocks themselves
by a hand-written evaluation of (3)-(6) with position biases, read from the weights by name."""
from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from stringdiag.cli.main import main
from stringdiag.construct.maxdef import parse
from stringdiag.construct.splines import nn_block, spline_encoder, veronese


def block_reference(state: dict, x: np.ndarray) -> np.ndarray:
    """Each block k: q_i = A_Q x_i + B_Q[i] (likewise k, v), head c's output at i is
    sum_j ReLU(q_ic k_jc) v_jc, then A2 ReLU(A1 z + b1) + b2 on every token."""
    k = 1
    while f"x{k}.A1.weight" in state:
        g = lambda name: np.asarray(state[f"x{k}.{name}"], dtype=np.float64)  # noqa: E731
        p = x.shape[0]
        q, kk, v = (x @ g(f"z.A{t}.weight").T + g(f"z.B{t}.weight")[:p] for t in "QKV")
        scores = np.maximum(np.einsum("ic,jc->cij", q, kk), 0.0)
        z = np.einsum("cij,jc->ic", scores, v)
        x = np.maximum(z @ g("A1.weight").T + g("A1.bias"), 0.0) @ g("A2.weight").T + g("A2.bias")
        k += 1
    return x


def run(enc, x: np.ndarray) -> np.ndarray:
    import torch

    with torch.no_grad():
        return enc.module(torch.as_tensor(x)).numpy()


@pytest.mark.parametrize("n, p", [(1, 1), (1, 3), (2, 2)])
def test_veronese_two_layers_hold_every_quadratic_monomial_at_every_position(n, p):
    enc = veronese(n, p)
    brute = {e for e in itertools.product(range(3), repeat=n * p) if sum(e) <= 2}
    assert set(enc.monomials) == brute and len(enc.monomials) == (n * p + 2) * (n * p + 1) // 2
    assert len(enc.layers) == 2  # epsilon_2 = phi_2 alpha_2 phi_1 alpha_1 (19)
    rng = np.random.default_rng(n * 10 + p)
    for _ in range(3):
        x = rng.standard_normal((p, n))
        flat = x.reshape(-1)  # position-major: x[i, j] of the paper is flat[(j - 1) n + i - 1]
        values = np.array([np.prod([flat[v] ** e[v] for v in range(n * p)]) for e in enc.monomials])
        out = run(enc, x)
        width = len(values)
        for j in range(p):
            for b in range(p):
                want = values if b == j else np.zeros(width)
                np.testing.assert_allclose(out[j, b * width:(b + 1) * width], want, rtol=1e-12, atol=1e-12)
        state = {k: v.numpy() for k, v in enc.weights.items()}
        np.testing.assert_allclose(block_reference(state, x), out, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("p", [1, 3, 5])
def test_a_one_layer_network_is_one_encoder_block(p):
    rng = np.random.default_rng(p)
    n, w, m = 3, 6, 2
    a1, b1, a2, b2 = rng.standard_normal((w, n)), rng.standard_normal(w), rng.standard_normal((m, w)), rng.standard_normal(m)
    enc = nn_block(a1, b1, a2, b2, p)
    assert len(enc.layers) == 1 and enc.heads == [n * p]
    x = rng.standard_normal((p, n)) * 2
    want = np.array([a2 @ np.maximum(a1 @ t + b1, 0.0) + b2 for t in x])
    np.testing.assert_allclose(run(enc, x), want, rtol=1e-12, atol=1e-12)
    state = {k: v.numpy() for k, v in enc.weights.items()}
    np.testing.assert_allclose(block_reference(state, x), want, rtol=1e-12, atol=1e-12)


def test_a_given_spline_as_an_encoder():
    f = [["max(min(x[1,1]^2, x[1,2] + 1), x[1,1]*x[1,2] - 1)", "x[1,2]^3 - x[1,1]"]]
    enc = spline_encoder([[parse(s, 1, 2) for s in row] for row in f], 1, 2)
    rng = np.random.default_rng(0)
    for _ in range(20):
        x = rng.standard_normal((2, 1)) * 2
        a, b = x[0, 0], x[1, 0]
        want = [[max(min(a * a, b + 1), a * b - 1)], [b ** 3 - a]]
        np.testing.assert_allclose(run(enc, x), want, rtol=1e-11, atol=1e-11)
    # degree 3: gather, products to degree 2 then 4, a min layer, a max layer
    assert [layer.stage for layer in enc.layers] == ["gather", "products", "products", "min", "max"]


def test_piecewise_linear_needs_no_products():
    enc = spline_encoder([[parse("max(x[1,1], x[2,1], 0)", 2, 1)]], 2, 1)
    assert [layer.stage for layer in enc.layers] == ["gather", "max", "max"]
    x = np.array([[-0.5, -2.0]])
    np.testing.assert_allclose(run(enc, x), [[0.0]], atol=1e-14)


def _random_entry(rng, n: int, p: int) -> tuple[str, list]:
    """A max of mins of random polynomials (degree <= 4), as text and as (coef, exponents) terms."""
    terms = []
    for _ in range(int(rng.integers(1, 4))):
        inner = []
        for _ in range(int(rng.integers(1, 4))):
            poly = [(float(rng.integers(-3, 4)), rng.multinomial(int(rng.integers(0, 5)), [1 / (n * p)] * (n * p)))
                    for _ in range(int(rng.integers(1, 4)))]
            inner.append(poly)
        terms.append(inner)

    def text(poly):
        monos = [" * ".join([f"{c}"] + [f"x[{v % n + 1},{v // n + 1}]^{e}" for v, e in enumerate(es) if e])
                 for c, es in poly]
        return " + ".join(f"({m})" for m in monos)

    return "max(" + ", ".join("min(" + ", ".join(text(q) for q in t) + ")" for t in terms) + ")", terms


def test_random_max_definable_functions_against_direct_evaluation():
    rng = np.random.default_rng(7)
    for n, p in [(1, 2), (2, 2), (1, 3)]:
        rows = [[_random_entry(rng, n, p) for _ in range(p)] for _ in range(2)]
        enc = spline_encoder([[parse(s, n, p) for s, _ in row] for row in rows], n, p)
        for _ in range(5):
            x = rng.uniform(-1.5, 1.5, size=(p, n))
            flat = x.reshape(-1)
            val = lambda poly: sum(c * np.prod(flat ** es) for c, es in poly)  # noqa: E731
            want = np.array([[max(min(val(q) for q in t) for t in terms) for _, terms in rows_j]
                             for rows_j in zip(*rows)])
            np.testing.assert_allclose(run(enc, x), want, rtol=1e-9, atol=1e-9)


def test_cli_writes_files_that_compile_back_and_refuses_bad_input(tmp_path, capsys):
    spec = tmp_path / "spline.json"
    spec.write_text(json.dumps({"n": 1, "p": 2, "f": [["min(x[1,1], x[1,2]^2)", "x[1,1] * x[1,2]"]]}))
    assert main(["construct", "spline-encoder", "--function", str(spec), "-o", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "largest relative error" in out and (tmp_path / "out" / "encoder.safetensors").is_file()
    assert main(["check", str(tmp_path / "out" / "encoder.diag")]) == 0
    spec.write_text(json.dumps({"n": 1, "p": 2, "f": [["x[2,1]", "1"]]}))
    assert main(["construct", "spline-encoder", "--function", str(spec), "-o", str(tmp_path / "o2")]) == 1
    assert "x[2,1] is outside X" in capsys.readouterr().err
    spec.write_text(json.dumps({"n": 1, "p": 2, "f": [["x[1,1] ** 2", "1"]]}))
    assert main(["construct", "spline-encoder", "--function", str(spec), "-o", str(tmp_path / "o3")]) == 1
    assert main(["construct", "veronese", "--n", "2", "-o", str(tmp_path / "o4")]) == 2
    assert main(["construct", "veronese", "--n", "64", "--p", "64", "-o", str(tmp_path / "o6")]) == 1
    assert "would need about" in capsys.readouterr().err  # estimated, refused before anything is built
    net = tmp_path / "net.json"
    net.write_text(json.dumps({"A1": [[1.0]], "b1": [0.0], "A2": [[1.0, 2.0]], "b2": [0.0]}))
    assert main(["construct", "nn-block", "--network", str(net), "--p", "2", "-o", str(tmp_path / "o5")]) == 1
    assert "shapes do not fit" in capsys.readouterr().err


def test_an_autoregressive_spline_as_a_decoder():
    """Corollary 3.10: entry j reads positions 1..j only; the decoder's masked heads see nothing later."""
    f = ["x[1,1]^2 - x[2,1]", "max(x[1,1]*x[1,2], x[2,2] - 1)", "min(x[1,3]^3, x[1,1] + x[2,2], 0.5)"]
    enc = spline_encoder([[parse(s, 2, 3) for s in f]], 2, 3, causal=True)
    assert "MaskedSplineBlock" in enc.source
    rng = np.random.default_rng(11)
    for _ in range(10):
        x = rng.standard_normal((3, 2))
        (a, b), (c, d), (e, _) = x
        want = [[a * a - b], [max(a * c, d - 1)], [min(e ** 3, a + d, 0.5)]]
        np.testing.assert_allclose(run(enc, x), want, rtol=1e-10, atol=1e-10)
        later = x.copy()
        later[2] += 5.0  # a later token changes: the first two outputs do not
        np.testing.assert_array_equal(run(enc, later)[:2], run(enc, x)[:2])
    import stringdiag
    import torch
    from stringdiag.construct.encoder_file import GALLERY

    prog = stringdiag.loads(enc.source, str(GALLERY.with_name("<decoder>.diag")))
    stringdiag.compile(prog["SplineEncoder"], incremental=True, approximator="linear", dtype=torch.float64)
    with pytest.raises(Exception, match="not autoregressive"):
        spline_encoder([[parse("x[1,2]", 1, 2), parse("x[1,1]", 1, 2)]], 1, 2, causal=True)
