"""Alcalde, Fantuzzi and Zuazua (2025): the weighted attention of Remark 2.6 (2.7), and the multi-head (4.1)
and masked (4.2) blocks the conclusion poses (gallery/hardmax.diag), each compiled by stringdiag and
compared with hand-written float64 NumPy; and the classifier built for sequences with repeated tokens."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from stringdiag.construct import hardmax_classifier
from stringdiag.elaborate.loader import loads
from stringdiag.lower import compile as lower

GALLERY = Path(__file__).resolve().parents[1] / "gallery" / "hardmax.diag"


def hardmax_rows(e: np.ndarray) -> np.ndarray:
    """(2.4b) on the last axis: 1/|C| on every maximiser (-inf never is one)."""
    hit = (e == e.max(axis=-1, keepdims=True)).astype(np.float64)
    return hit / hit.sum(axis=-1, keepdims=True)


def module(name: str, state: dict, h: int = 2):
    defs = loads(GALLERY.read_text(), str(GALLERY))
    m = lower(defs[name], dims={"d": 2, "m": 1, "h": h}, approximator="linear", dtype=torch.float64)
    m.load_state_dict({k: torch.as_tensor(v, dtype=torch.float64) for k, v in state.items()}, strict=True)
    return m


def run(m, *xs) -> np.ndarray:
    with torch.no_grad():
        return m(*(torch.as_tensor(x, dtype=torch.float64) for x in xs)).numpy()


def affine(rng, out: int, inp: int, prefix: str) -> dict:
    return {f"{prefix}.weight": rng.integers(-2, 3, (out, inp)).astype(float),
            f"{prefix}.bias": rng.integers(-1, 2, out).astype(float)}


def weighted_reference(st: dict, z: np.ndarray, w: np.ndarray) -> np.ndarray:
    """(2.7): Lambda_il = w_l / sum_{k in C_i} w_k on the maximisers of <A z_i, z_l>."""
    e = (z @ st["A.weight"].T + st["A.bias"]) @ z.T
    c = (e == e.max(axis=1, keepdims=True)) * w[None, :]
    lam = c / c.sum(axis=1, keepdims=True)
    return st["rho.weight"] * z + (lam @ z) @ st["V.weight"].T + st["V.bias"]


def test_weighted_attention_is_plain_hardmax_on_the_repeated_tokens():
    rng = np.random.default_rng(0)
    for _ in range(20):
        st = affine(rng, 2, 2, "A") | affine(rng, 2, 2, "V") | {"rho.weight": np.array(rng.uniform(-1, 1))}
        weighted, plain = module("WeightedHardmaxAttention", st), module("HardmaxAttention", st)
        z = np.unique(rng.integers(-2, 3, (5, 2)).astype(float), axis=0)
        w = rng.integers(1, 4, len(z)).astype(float)
        got = run(weighted, z, w)
        np.testing.assert_allclose(got, weighted_reference(st, z, w), rtol=1e-12, atol=1e-12)
        repeated = np.repeat(z, w.astype(int), axis=0)
        np.testing.assert_allclose(run(plain, repeated), np.repeat(got, w.astype(int), axis=0), rtol=1e-12, atol=1e-12)


def test_multi_head_attention_is_4_1():
    rng = np.random.default_rng(1)
    h = 3
    for _ in range(10):
        st = affine(rng, 2 * h, 2, "A") | affine(rng, 2, 2 * h, "V") | {"rho.weight": np.array(0.5)}
        z = rng.integers(-2, 3, (6, 2)).astype(float)
        a = (z @ st["A.weight"].T + st["A.bias"]).reshape(len(z), h, 2)  # A^h z_i (+ bias)
        heads = [hardmax_rows(a[:, k, :] @ z.T) @ z for k in range(h)]
        vs = st["V.weight"].reshape(2, h, 2)
        want = 0.5 * z + sum(heads[k] @ vs[:, k, :].T for k in range(h)) + st["V.bias"]
        np.testing.assert_allclose(run(module("MultiHeadHardmaxAttention", st, h), z), want, rtol=1e-12, atol=1e-12)


def test_masked_block_is_4_2_and_causal():
    rng = np.random.default_rng(2)
    for _ in range(10):
        u, w, v = rng.standard_normal(2), rng.standard_normal(2), rng.integers(-2, 3, 2).astype(float)
        st = {"U.weight": u[None, :], "U.bias": np.array([0.3]), "W.weight": w[:, None], "W.bias": np.zeros(2),
              "vA.weight": v, "lam.weight": np.array(0.7), "rho.weight": np.array(0.3)}
        z = rng.integers(-2, 3, (6, 2)).astype(float)
        x = z + np.maximum(z @ u + 0.3, 0)[:, None] * w[None, :]
        p = x @ v
        e = np.where(np.tril(np.ones((6, 6))) > 0, np.outer(p, p), -np.inf)  # (4.2): l <= i only
        want = 0.3 * x + 0.7 * hardmax_rows(e) @ x
        m = module("MaskedScalarHardmaxBlock", st)
        got = run(m, z)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
        later = z.copy()
        later[4:] += 1.0
        assert np.array_equal(run(m, later)[:4], got[:4])


@pytest.mark.parametrize("seed", [0, 1])
def test_classifier_for_sequences_with_repeated_tokens(seed):
    """Remark 2.6: repeated tokens are tokens of more mass; the compiled classifier (plain hardmax, ties
    averaged over the copies) puts each sequence in its target, and {a, b} differs from {a, a, b}."""
    rng = np.random.default_rng(seed)
    pool = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    seqs = [pool[[0, 1]], pool[[0, 0, 1]], pool[[0, 1, 1, 1]], pool[[2, 3, 3]], pool[[0, 1, 2, 3, 3]]]
    labels = rng.integers(0, 2, len(seqs)).tolist()
    con = hardmax_classifier(seqs, labels, seed=seed)
    state = {k: v.numpy() for k, v in con.weights.items()}
    for z, y, c in zip(seqs, con.readouts, con.instance.labels):
        assert con.instance.targets[c].holds(y)
        tokens, counts = np.unique(z, axis=0, return_counts=True)
        np.testing.assert_allclose(masses_reference(state, tokens, counts.astype(float)), y, rtol=1e-9, atol=1e-9)
    assert len(con.blocks) <= 8 * len(seqs) + 4


def masses_reference(state: dict, z: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The classifier on distinct tokens with masses: every block's FF, then (2.7); the readout (2.2)
    weighted by the masses."""
    k = 1
    while f"z{k}.U.weight" in state:
        g = lambda n: np.asarray(state[f"z{k}.{n}"], dtype=np.float64)  # noqa: E731
        x = z + np.maximum(z @ g("U.weight").T + g("U.bias"), 0) @ g("W.weight").T + g("W.bias")
        p = x @ g("vA.weight")
        e = np.outer(p, p)
        c = (e == e.max(axis=1, keepdims=True)) * w[None, :]
        z = g("rho.weight") * x + g("lam.weight") * ((c / c.sum(axis=1, keepdims=True)) @ x)
        k += 1
    return (w[:, None] * z).sum(axis=0) / w.sum()


CASES = Path(__file__).resolve().parents[1] / "gallery" / "hardmax_cases"


@pytest.mark.parametrize("case,panels", [(1, 3), (2, 2), (3, 3)])
def test_separation_cases_of_lemma_3_5(case, panels):
    """Figs. 3-5: each instance makes the construction take its case; the panels step through the
    separation block's layers, and after it no token is shared (Case 3: the FF layer parts the centres)."""
    import json

    from stringdiag.construct.hardmax_cases import separation_panels
    from stringdiag.construct.hardmax_stages import stage_tokens

    data = json.loads((CASES / f"case{case}.json").read_text())
    seqs = [np.array(s["tokens"], dtype=float) for s in data["sequences"]]
    con = hardmax_classifier(seqs, [s["label"] for s in data["sequences"]])
    assert [b.note.split(": ")[1].split(" ")[:2] for b in con.blocks if b.stage == "separation"] == [["Case", str(case)]]
    got = separation_panels(con)
    assert len(got) == panels
    first, last = got[0][1], got[-1][1]
    assert np.linalg.norm(first[0][:, None] - first[1][None], axis=2).min() == 0  # a shared token
    assert np.linalg.norm(last[0][:, None] - last[1][None], axis=2).min() > 1e-3
    if case == 3:
        assert np.abs(first[0].mean(0) - first[1].mean(0)).max() < 1e-12
        assert np.abs(got[1][1][0].mean(0) - got[1][1][1].mean(0)).max() > 1e-3
    after = dict((t.split(" after ")[-1].split(" (")[0], z) for t, z in stage_tokens(con))["separation"]
    assert all(np.array_equal(a, b) for a, b in zip(after, last))
