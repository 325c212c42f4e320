"""The exact hardmax classifier (Alcalde, Fantuzzi and Zuazua 2025, Theorem 2.4, Sec. 3).

Reference: a hand-written float64 NumPy evaluation of (2.3), (2.4a-c), (2.5) and (2.2) applied to
the constructed weights (read back by their compiled-module names), independent of stringdiag."""
from __future__ import annotations

import json

import numpy as np
import pytest

from stringdiag.construct.instance import grid_instance
from stringdiag.cli.main import main
from stringdiag.construct import hardmax_classifier, make_instance
from stringdiag.construct.artefacts import weights
from stringdiag.construct.hardmax import PAPER, choose_blocks


def reference(state: dict, z: np.ndarray) -> np.ndarray:
    """Every block k: x = z + W relu(U z + b); e_il = <v,x_i><v,x_l>; ties averaged; rho x + lam mean."""
    k = 1
    while f"z{k}.U.weight" in state:
        g = lambda n: np.asarray(state[f"z{k}.{n}"], dtype=np.float64)  # noqa: E731
        x = z + np.maximum(z @ g("U.weight").T + g("U.bias"), 0) @ g("W.weight").T + g("W.bias")
        p = x @ g("vA.weight")
        e = np.outer(p, p)
        lam = (e == e.max(axis=1, keepdims=True)).astype(float)
        lam /= lam.sum(axis=1, keepdims=True)
        z = g("rho.weight") * x + g("lam.weight") * (lam @ x)
        k += 1
    return z.mean(axis=0)


instance = grid_instance  # the random instances: token sets from a small grid pool


@pytest.mark.parametrize("d", [2, 3])
def test_random_instances_classified_exactly_within_8n_plus_4(d):
    rng = np.random.default_rng(d)
    for n in range(1, 21):
        inst = make_instance(*instance(rng, n, d))
        blocks = choose_blocks(inst)
        state = {k: v.numpy() for k, v in weights(blocks).items()}
        for z, c in zip(inst.sequences, inst.labels):
            assert inst.targets[c].holds(reference(state, z))
        assert len(blocks) <= 8 * n + 4
        for stage, bound in PAPER.items():
            assert sum(b.stage == stage for b in blocks) <= bound(n)
        params = sum(v.size for v in state.values())
        assert params == len(blocks) * (4 * d + 3) <= 60 * n * d + 12  # O(N d): c = 60, c' = 12


def test_compiled_module_agrees_with_the_reference():
    seqs = [np.array([[0., 0.], [2., 0.]]), np.array([[0., 0.], [2., 0.], [1., 0.]]),  # equal means
            np.array([[0., 0.], [2., 0.], [0.5, 0.]]), np.array([[1., 1.]])]
    con = hardmax_classifier(seqs, ["a", "b", "a", "c"])
    state = {k: v.numpy() for k, v in con.weights.items()}
    for z, y in zip(con.instance.sequences, con.readouts):
        assert np.abs(reference(state, z) - y).max() < 1e-9
    assert con.parameters == len(con.blocks) * 11 and len(con.blocks) <= con.bound
    assert any("Case 3" in b.note for b in con.blocks)


def fails(capsys, tmp_path, data) -> str:
    f = tmp_path / "in.json"
    f.write_text(data if isinstance(data, str) else json.dumps(data))
    assert main(["construct", "hardmax-classifier", "--sequences", str(f), "-o", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err.strip()
    assert "error:" in err and "Traceback" not in err
    return err


def test_bad_inputs_are_refused(capsys, tmp_path):
    seq = lambda toks, c="a": {"label": c, "tokens": toks}  # noqa: E731
    assert "closer than rounding" in fails(capsys, tmp_path, {"sequences": [seq([[0, 0], [1, 1], [1e-12, 0]])]})
    err = fails(capsys, tmp_path, {"sequences": [seq([[0, 0], [1, 0]]), seq([[1, 0], [0, 0], [0, 0], [1, 0]], "b")]})
    assert "sequences 1 and 2" in err and "same share" in err and "assumes i)" in err
    err = fails(capsys, tmp_path, {"sequences": [seq([[0, 0], [1, 0]]), seq([[1, 0], [0, 0]], "b")]})
    assert "sequences 1 and 2" in err and "assumes i)" in err and "another order" in err
    assert "d >= 2" in fails(capsys, tmp_path, {"sequences": [seq([[0], [1]])]})
    assert "in.json:1:" in fails(capsys, tmp_path, '{"sequences": [')
    assert "overlap" in fails(capsys, tmp_path, {"sequences": [seq([[0, 0]]), seq([[1, 0]], "b")],
                                                 "targets": {"a": {"center": [0, 0], "radius": 1},
                                                             "b": {"center": [1, 0], "radius": 1}}})


def test_a_rare_bad_generic_choice_is_drawn_again(monkeypatch):
    """The proof's directions are generic: a choice that ties is redrawn from the next seed, and
    only when every try fails is the user told, without an internal error."""
    import stringdiag.construct.hardmax as H
    from stringdiag import DiagError

    seqs, labels = instance(np.random.default_rng(3), 3, 2)
    real, seen = H.choose_blocks, []

    def first_fails(inst, seed):
        seen.append(seed)
        if len(seen) == 1:
            raise DiagError("internal: no direction singles out a point")
        return real(inst, seed)

    monkeypatch.setattr(H, "choose_blocks", first_fails)
    con = hardmax_classifier(seqs, labels, seed=5)
    assert seen == [5, 6] and len(con.blocks) <= 8 * 3 + 4
    monkeypatch.setattr(H, "choose_blocks", lambda inst, seed: (_ for _ in ()).throw(
        DiagError("internal: no direction singles out a point")))
    with pytest.raises(DiagError) as e:
        hardmax_classifier(seqs, labels, seed=0)
    assert "internal" not in e.value.message and "seeds 0 to 7" in e.value.message
