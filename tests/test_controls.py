"""The study's controls (gallery/control.diag) compute what their comments say: each compiled head
against a hand-written PyTorch definition in float64, causal, with the parameter counts the docs give."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

import stringdiag

ROOT = Path(__file__).resolve().parents[1]
PROG = stringdiag.load(str(ROOT / "gallery" / "control.diag"))
D = 5


def _mlp(m, x):
    """The learnable F: one hidden layer as wide as its input, ReLU (the default approximator)."""
    return m.F(x)


def _token_ff(m, x):
    return _mlp(m, x)


def _running_mean(m, x):
    n = torch.arange(1, x.shape[-2] + 1, dtype=x.dtype)[:, None]
    return _mlp(m, torch.cat([x, x.cumsum(-2) / n], -1))


def _short_conv(m, x):
    k = dict(m.named_parameters())["K.weight"]  # [d, w]
    w = k.shape[-1]
    s = x.shape[-2]
    conv = torch.zeros_like(x)
    for j in range(s):  # y[j, c] = sum_u K[c, u] x[j + u - w + 1, c], zeros before the start
        for u in range(w):
            if 0 <= j + u - w + 1:
                conv[..., j, :] += k[:, u] * x[..., j + u - w + 1, :]
    return _mlp(m, torch.cat([x, conv], -1))


def _causal_mixer(m, x):
    s = x.shape[-2]
    W = dict(m.named_parameters())["W.weight"][:s, :s]
    mixed = torch.einsum("ij,...jc->...ic", torch.tril(W), x)
    return _mlp(m, torch.cat([x, mixed], -1))


REFERENCE = {"TokenFF": _token_ff, "RunningMean": _running_mean, "ShortConv": _short_conv,
             "CausalMixer": _causal_mixer}


@pytest.mark.parametrize("name", sorted(REFERENCE))
@pytest.mark.parametrize("length", [1, 6, 35])
def test_a_control_against_its_hand_written_definition(name, length):
    torch.manual_seed(length)
    m = stringdiag.compile(PROG[name], dims={"d": D}, dtype=torch.float64)
    with torch.no_grad():
        for p in m.parameters():
            p.normal_()
    x = torch.randn(3, length, D, dtype=torch.float64)
    torch.testing.assert_close(m(x), REFERENCE[name](m, x), rtol=1e-12, atol=1e-12)
    # causal: a change at the last position leaves every earlier output as it was
    y = m(x)
    x2 = x.clone()
    x2[:, -1] += 1
    torch.testing.assert_close(m(x2)[:, :-1], y[:, :-1], rtol=0, atol=0)


def test_the_mixer_refuses_a_context_longer_than_its_table_and_never_trains_above_its_diagonal():
    m = stringdiag.compile(PROG["CausalMixer"], dims={"d": D}, dtype=torch.float64)
    m(torch.randn(2, 35, D, dtype=torch.float64)).square().sum().backward()
    grad = dict(m.named_parameters())["W.weight"].grad
    assert torch.count_nonzero(torch.triu(grad, 1)) == 0 and torch.count_nonzero(torch.tril(grad)) > 0
    with pytest.raises(Exception, match="at most 35"):
        m(torch.randn(1, 36, D, dtype=torch.float64))


def test_parameters_per_head_as_documented():
    counts = {n: sum(p.numel() for p in stringdiag.compile(PROG[n], dims={"d": 32}).parameters()) for n in REFERENCE}
    assert counts == {"TokenFF": 2112, "RunningMean": 6240, "ShortConv": 6368, "CausalMixer": 7465}
    # M1's head: queries, keys and values, each an MLP [32] -> [32]
    anatomy = stringdiag.load(str(ROOT / "gallery" / "anatomy.diag"))
    m1 = sum(p.numel() for p in stringdiag.compile(anatomy["M1"], dims={"d": 32, "k": 32}).parameters())
    assert m1 == 6336
    used_mixer = counts["CausalMixer"] - 35 * 34 // 2  # the entries above the diagonal never reach the output
    for n in ("RunningMean", "ShortConv"):
        assert abs(counts[n] / m1 - 1) < 0.10
    assert abs(used_mixer / m1 - 1) < 0.10
