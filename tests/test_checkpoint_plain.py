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
