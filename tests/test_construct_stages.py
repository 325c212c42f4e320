"""Alcalde, Fantuzzi and Zuazua (2025): the stages of the constructed classifier (Fig. 2) and Remark 2.3's
softmax block (gallery/hardmax.diag's ScalarSoftmaxBlock) against a hand-written NumPy softmax block."""
from __future__ import annotations

import numpy as np
import torch

from stringdiag.cli.main import main
from stringdiag.construct import hardmax_classifier
from stringdiag.construct.artefacts import GALLERY, NAME, source, weights
from stringdiag.construct.hardmax_stages import stage_tokens
from stringdiag.elaborate.loader import loads
from stringdiag.lower import compile as lower

SEQS = [np.array([[0.0, 1.0], [2.0, 0.5]]), np.array([[1.0, 1.0]]), np.array([[1.0, 1.0], [0.0, 2.0], [3.0, 1.0]])]
LABELS = ["pos", "neg", "pos"]


def test_stages_start_at_the_data_and_end_at_the_compiled_readouts():
    con = hardmax_classifier(SEQS, LABELS)
    panels = stage_tokens(con)
    assert len(panels) == 1 + len({b.stage for b in con.blocks})
    assert all(np.array_equal(a, b) for a, b in zip(panels[0][1], SEQS))
    np.testing.assert_allclose([z.mean(axis=0) for z in panels[-1][1]], con.readouts, atol=1e-9)


def test_stages_figure_from_the_command_line(tmp_path, capsys):
    seqs = tmp_path / "s.json"
    seqs.write_text('{"sequences": [{"label": 0, "tokens": [[0, 1], [2, 0.5]]}, {"label": 1, "tokens": [[1, 1]]}]}')
    figure = tmp_path / "stages.svg"
    assert main(["construct", "hardmax-classifier", "--sequences", str(seqs), "-o", str(tmp_path / "c"),
                 "--stages", str(figure)]) == 0
    assert figure.read_text().lstrip().startswith("<?xml") and "stages.svg" in capsys.readouterr().out


def softmax_reference(state: dict, z: np.ndarray, tau: float) -> np.ndarray:
    """x = z + W relu(U z + b); e_il = <v,x_i><v,x_l>; rho x + lam softmax(e / tau) x; then the mean."""
    k = 1
    while f"z{k}.U.weight" in state:
        g = lambda n: np.asarray(state[f"z{k}.{n}"], dtype=np.float64)  # noqa: E731
        x = z + np.maximum(z @ g("U.weight").T + g("U.bias"), 0) @ g("W.weight").T + g("W.bias")
        p = x @ g("vA.weight")
        e = np.outer(p, p) / tau
        a = np.exp(e - e.max(axis=1, keepdims=True))
        z = g("rho.weight") * x + g("lam.weight") * ((a / a.sum(axis=1, keepdims=True)) @ x)
        k += 1
    return z.mean(axis=0)


def test_softmax_blocks_compute_the_reference_and_tend_to_hardmax():
    con = hardmax_classifier(SEQS, LABELS)
    text = source(list(con.blocks), con.n, 2).replace("ScalarHardmaxBlock(", "ScalarSoftmaxBlock(")
    module = lower(loads(text, str(GALLERY.with_name("<t>.diag")))[NAME], dims={"d": 2, "m": 1},
                   approximator="linear", dtype=torch.float64)
    state = weights(list(con.blocks))
    for tau, close in ((2.0, False), (1e-6, True)):
        taus = {f"z{k}.tau.weight": torch.tensor(tau, dtype=torch.float64) for k in range(1, len(con.blocks) + 1)}
        module.load_state_dict(state | taus, strict=True)
        plain = {k: v.numpy() for k, v in state.items()}
        with torch.no_grad():
            out = np.array([module(torch.as_tensor(z)).numpy() for z in SEQS])
        ref = np.array([softmax_reference(plain, z, tau) for z in SEQS])
        np.testing.assert_allclose(out, ref, rtol=1e-9, atol=1e-9)
        assert np.allclose(out, con.readouts, atol=1e-9) == close
