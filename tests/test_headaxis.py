"""Heads on a leading head axis (lower/headaxis.py), the layout BatchedHeads gives torch.compile:
the M1 heads of the study's model against the same heads written out by hand in float64, eager and
under ``torch.compile``, value and gradient; a head with an operation the rewrite has no form for
keeps vmap."""
from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import stringdiag
from stringdiag.lower.headaxis import flatten_batch, head_axis, unflatten_batch
from stringdiag.train.model import BatchedHeads, LanguageModel

ANATOMY = stringdiag.load(Path(__file__).resolve().parents[1] / "gallery" / "anatomy.diag")
H, W = 3, 4


def heads(name: str) -> BatchedHeads:
    """One layer's heads as the study's model builds them (a layer norm after AttApply), in float64."""
    torch.manual_seed(0)
    model = LanguageModel(ANATOMY[name], vocab=7, d_model=H * W, n_layers=1, n_heads=H, approximator="mlp")
    for p in model.parameters():  # gains and biases away from 1 and 0: a dropped one shows
        p.data.normal_()
    b = model.double().layers[0].heads
    assert isinstance(b, BatchedHeads)
    return b


def by_hand(b: BatchedHeads, x: torch.Tensor) -> torch.Tensor:
    """M1 written out head by head: MLP query, key and value maps, causally masked softmax of
    q·k / sqrt(k), the values summed, then the layer norm the model puts after AttApply."""
    p = dict(b.head.named_parameters())
    mlp = (lambda name, i, z: F.linear(torch.relu(F.linear(z, p[f"{name}.0.weight"][i], p[f"{name}.0.bias"][i])),
                                       p[f"{name}.2.weight"][i], p[f"{name}.2.bias"][i]))
    norm = [k[: -len(".weight")] for k in p if k.startswith("layernorm") and k.endswith(".weight")]
    assert len(norm) == 1
    s = x.shape[-2]
    mask = torch.ones(s, s, dtype=torch.bool).tril()
    out = []
    for i, z in enumerate(x.chunk(H, -1)):
        q, k, v = mlp("AttPrep_1.Q", i, z), mlp("AttPrep_1.K", i, z), mlp("AttApply_1.V", i, z)
        e = (q @ k.transpose(-1, -2) / math.sqrt(W)).masked_fill(~mask, -math.inf)
        y = torch.softmax(e, -1) @ v
        for n in norm:
            y = F.layer_norm(y, (W,)) * p[f"{n}.weight"][i] + p[f"{n}.bias"][i]
        out.append(y)
    return torch.cat(out, -1)


def test_m1_heads_run_on_a_head_axis_and_equal_the_heads_written_by_hand():
    b = heads("M1")
    assert b.stacked, "M1's operations all have a head-axis form"
    x = torch.randn(2, 3, 5, H * W, dtype=torch.float64, requires_grad=True)  # two batch axes
    got, want = b(x), by_hand(b, x)
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    g = torch.randn_like(got)
    gx, = torch.autograd.grad(got, x, g)
    hx, = torch.autograd.grad(want, x, g)
    torch.testing.assert_close(gx, hx, rtol=1e-10, atol=1e-12)


def test_compiled_head_axis_equals_eager():
    b = heads("M1")
    x = torch.randn(2, 6, H * W, dtype=torch.float64)
    torch._dynamo.reset()
    fast = torch.compile(b, backend="aot_eager", fullgraph=True)  # no graph break either
    torch.testing.assert_close(fast(x), by_hand(b, x), rtol=1e-12, atol=1e-12)
    torch._dynamo.reset()


def test_a_head_with_an_operation_without_a_head_axis_form_keeps_vmap():
    b = heads("M0")  # causal linear attention's kernel: no rule, vmap runs it
    assert not b.stacked
    torch.manual_seed(1)
    one = [stringdiag.compile(ANATOMY["M0"], dims={"d": W, "k": W}, dtype=torch.float64) for _ in range(H)]
    x = torch.randn(2, 5, H * W, dtype=torch.float64)
    assert head_axis(one[0]) is None
    torch.testing.assert_close(BatchedHeads(one)(x), torch.cat([m(z) for m, z in zip(one, x.chunk(H, -1))], -1))


@pytest.mark.parametrize("batch", [(5,), (2, 3), (1,)])
def test_batch_helpers_on_the_head_axis_fold_and_restore_every_batch_axis(batch):
    x = torch.randn(H, *batch, 7, 2)
    y, shape, n = flatten_batch(x, 2)
    assert y.shape == (H, math.prod(batch), 7, 2) and shape == batch and n == math.prod(batch)
    assert torch.equal(unflatten_batch(y, shape, n), x)
    assert unflatten_batch(torch.ones(H, 1, 2), shape, n).shape == (H, *batch, 2)  # a value the batch did not change
