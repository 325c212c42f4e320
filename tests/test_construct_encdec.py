"""Partially autoregressive splines as encoder-decoders (Lai, Lim and Liu 2024, the remark after
Corollary 3.10; our reconstruction): the compiled encoder-decoder against f(X, Y) written out in NumPy,
its partial autoregressiveness probed directly, and the refusals."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from stringdiag.cli.main import main
from stringdiag.construct.maxdef import parse
from stringdiag.construct.splines import spline_encoder_decoder
from stringdiag.errors import DiagError

ROWS = [["x[1,3]*y[1,1]", "max(y[1,2] - x[1,1], x[1,2]*y[1,1])", "min(y[1,3]^2, x[1,1] + y[1,2])"]]


def by_hand(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """ROWS for X (3 positions, 1 feature) and Y (3, 1), written out: one output row, entry j at position j."""
    x, y = x[:, 0], y[:, 0]
    return np.array([[x[2] * y[0]], [max(y[1] - x[0], x[1] * y[0])], [min(y[2] ** 2, x[0] + y[1])]])


def build(rows, n=1, m=1, p=3):
    return spline_encoder_decoder([[parse(s, n, p, "f", m) for s in row] for row in rows], n, m, p)


def run(con, x, y):
    with torch.no_grad():
        return con.module(torch.as_tensor(x), torch.as_tensor(y)).numpy()


def test_encoder_decoder_computes_f_and_is_autoregressive_in_y_only():
    con = build(ROWS)
    rng = np.random.default_rng(0)
    for _ in range(10):
        x, y = rng.standard_normal((3, 1)), rng.standard_normal((3, 1))
        got = run(con, x, y)
        np.testing.assert_allclose(got, by_hand(x, y), rtol=1e-10, atol=1e-10)
        later = y.copy()
        later[2] += 5.0                                    # y at position 3: positions 1, 2 unchanged, to the bit
        assert np.array_equal(run(con, x, later)[:2], got[:2])
        moved = x.copy()
        moved[2] += 5.0                                    # x at position 3 is read by position 1
        assert not np.allclose(run(con, moved, y)[0], got[0])
    assert "EncDecSplineBlock" in con.source and con.error < 1e-12


def test_two_features_each():
    rows = [["x[1,1]*x[2,2] + y[2,1]", "max(y[1,1]*y[2,2], x[2,1])"], ["min(y[1,1], x[1,2]^2)", "y[1,2] - 1"]]
    con = build(rows, n=2, m=2, p=2)
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal((2, 2)), rng.standard_normal((2, 2))
    want = np.array([[x[0, 0] * x[1, 1] + y[0, 1], min(y[0, 0], x[1, 0] ** 2)],   # position 1: rows 1, 2
                     [max(y[0, 0] * y[1, 1], x[0, 1]), y[1, 0] - 1]])
    np.testing.assert_allclose(run(con, x, y), want, rtol=1e-10, atol=1e-10)


def test_refusals(tmp_path, capsys):
    with pytest.raises(DiagError, match=r"reads y\[1,2\], a later position of Y"):
        build([["y[1,2]", "x[1,2]"]], p=2)
    f = tmp_path / "f.json"
    f.write_text(json.dumps({"n": 1, "p": 2, "f": [["y[1,1]", "x[1,1]"]]}))
    assert main(["construct", "spline-encoder-decoder", "--function", str(f), "-o", str(tmp_path / "o")]) == 1
    assert "exactly f, m, n, p" in capsys.readouterr().err
    assert main(["construct", "spline-encoder", "--function", str(f), "-o", str(tmp_path / "o")]) == 1
    assert "no decoder input Y" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["EncoderDecoderBlock", "CrossReluHeads"])
def test_gallery_encoder_decoder_blocks_are_partially_autoregressive(name):
    """Theorem 3.3's remark: the encoder-decoder attention and block are autoregressive in Y (the decoder's
    t positions), not in X: perturbing y at a later position leaves earlier outputs equal to the bit,
    perturbing x anywhere moves them."""
    from pathlib import Path

    import stringdiag

    prog = stringdiag.load(Path(__file__).resolve().parents[1] / "gallery" / "splines.diag")
    d = prog[name]
    torch.manual_seed(0)  # the weights fixed: under some draws a ReLU zeroes query 0's scores, hiding x
    m = stringdiag.compile(d, dims={"d": 4, "k": 3, "m": 2, "h": 2, "df": 5}, approximator="linear",
                           dtype=torch.float64)
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(6, 4, generator=gen, dtype=torch.float64)
    y = torch.randn(5, d.input_types[1][1].evaluate({"d": 4, "m": 2, "h": 2}), generator=gen, dtype=torch.float64)
    with torch.no_grad():
        base = m(x, y)
        later = y.clone()
        later[3:] += 1.0
        assert torch.equal(m(x, later)[:3], base[:3]) and not torch.equal(m(x, later)[3:], base[3:])
        moved = []  # x's last position pushed along each axis both ways: a ReLU may hide one push, not all
        for j in range(x.shape[1]):
            for c in (-3.0, 3.0):
                moved.append(x.clone())
                moved[-1][5, j] += c
        assert any(not torch.allclose(m(xm, y)[0], base[0]) for xm in moved)
