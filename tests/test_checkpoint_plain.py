"""The checkpoint format on a plain torch module (no ``upgrade_checkpoint`` of its own, unlike the
language model): saved and loaded back, the weights, the optimizer's moments and the random
state are what they were, and a model of another shape is refused before anything changes."""
from __future__ import annotations

import pytest
import torch

from stringdiag import DiagError
from stringdiag.train import checkpoint


def _trained(seed: int):
    torch.manual_seed(seed)
    model = torch.nn.Linear(3, 2).double()
    opt = torch.optim.Adam(model.parameters(), lr=0.1)
    for _ in range(2):
        opt.zero_grad()
        model(torch.randn(4, 3, dtype=torch.float64)).square().sum().backward()
        opt.step()
    return model, opt


def test_a_plain_module_round_trips(tmp_path):
    model, opt = _trained(0)
    path = tmp_path / "c.safetensors"
    checkpoint.save(path, model, opt, {"step": 2, "history": []})
    rng = torch.get_rng_state()
    other, other_opt = _trained(1)
    torch.manual_seed(5)
    meta = checkpoint.load(path, other, other_opt)
    assert meta["step"] == 2
    for a, b in zip(model.state_dict().values(), other.state_dict().values()):
        assert torch.equal(a, b)
    for a, b in zip(opt.state_dict()["state"].values(), other_opt.state_dict()["state"].values()):
        assert all(torch.equal(a[k], b[k]) for k in ("exp_avg", "exp_avg_sq"))
    assert torch.equal(torch.get_rng_state(), rng)


def test_a_model_of_another_shape_is_refused_and_left_unchanged(tmp_path):
    model, opt = _trained(0)
    path = tmp_path / "c.safetensors"
    checkpoint.save(path, model, opt, {"step": 2, "history": []})
    wider = torch.nn.Linear(4, 2).double()
    before = {k: v.clone() for k, v in wider.state_dict().items()}
    with pytest.raises(DiagError, match="does not fit this model"):
        checkpoint.load(path, wider)
    assert all(torch.equal(before[k], v) for k, v in wider.state_dict().items())


def test_a_saved_optimizer_setting_must_be_of_the_kind_it_replaces():
    """What may stand where the current setting does (Adam's betas a pair of numbers, a name a
    string, a flag a bool or nothing); a setting of another kind is accepted as it is."""
    same = checkpoint._same_kind
    assert same((0.8, 0.9), (0.9, 0.999)) and same([0.8, 0.9], (0.9, 0.999))
    assert not same((0.8,), (0.9, 0.999)) and not same("x", (0.9, 0.999)) and not same(("a", 0.9), (0.9, 0.999))
    assert same("sgd", "adam") and not same(3, "adam") and not same(None, "adam")
    assert same(1, 0.1) and not same(True, 0.1) and not same(float("nan"), 0.1) and not same("0.1", 0.1)
    assert same(None, False) and same(True, None) and not same(0, False)
    assert same({"any": 1}, {"thing": 2})
