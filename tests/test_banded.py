"""The banded attention kernels (``stringdiag/lower/banded.py``) against dense masked attention
written by hand in float64, values and gradients, on both sides of the size rule: the band
(forced by ``DENSE_WITHIN = 0``) and fused dense SDPA (forced by a large ``DENSE_WITHIN``), at
the window's edges (|i - j| = w - 1 kept, w dropped), across block boundaries and with a last
block padded; and the masks made once per shape and never written to.
"""
from __future__ import annotations

import contextlib
import math

import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from stringdiag.lower import banded as B
from helpers import rel_max

F64 = torch.float64


def reference(q, k, v, scale: float, keep) -> torch.Tensor:
    """softmax over the kept keys, one query at a time in plain loops (no masks shared with the kernel)."""
    s = q.shape[-2]
    rows = []
    for i in range(s):
        js = [j for j in range(s) if keep(i, j)]
        e = torch.stack([(q[..., i, :] * k[..., j, :]).sum(-1) * scale for j in js], dim=-1)
        p = torch.exp(e - e.max(dim=-1, keepdim=True).values)
        p = p / p.sum(-1, keepdim=True)
        rows.append(sum(p[..., n, None] * v[..., j, :] for n, j in enumerate(js)))
    return torch.stack(rows, dim=-2)


@contextlib.contextmanager
def dense_within(n: int):
    old, B.DENSE_WITHIN = B.DENSE_WITHIN, n
    try:
        yield
    finally:
        B.DENSE_WITHIN = old


def agree(got_fn, want, xs) -> None:
    y = got_fn()
    assert y.shape == want.shape
    assert rel_max(y, want) < 1e-10
    gy = torch.randn(y.shape, generator=torch.Generator().manual_seed(7), dtype=F64)
    for a, b in zip(torch.autograd.grad(y, xs, gy), torch.autograd.grad(want, xs, gy)):
        # a gradient that vanishes exactly (w = 1: each softmax is one-hot) is met to round-off
        assert torch.isfinite(a).all() and (a - b).abs().max() <= 1e-10 * max(1.0, b.abs().max().item())


def qkv(lead: tuple, s: int, f: int, e: int, seed: int, kv_lead: tuple | None = None):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(*lead, s, f, generator=g, dtype=F64, requires_grad=True)
    k, v = (torch.randn(*(kv_lead or lead), s, n, generator=g, dtype=F64, requires_grad=True) for n in (f, e))
    return q, k, v


@pytest.mark.parametrize("within", [0, 1000])  # the band always; dense SDPA always
@settings(max_examples=10, deadline=None)
@given(s=st.integers(1, 23), w=st.integers(1, 9), seed=st.integers(0, 2**16))
def test_window_attention_on_both_sides_of_the_size_rule(within, s, w, seed):
    q, k, v = qkv((2,), s, 3, 2, seed)
    want = reference(q, k, v, 0.6, lambda i, j: abs(i - j) < w)
    with dense_within(within):
        agree(lambda: B.window_attention(q, k, v, w, 0.6), want, (q, k, v))


@pytest.mark.parametrize("within", [0, 1000])
@settings(max_examples=10, deadline=None)
@given(s=st.integers(1, 19), w=st.integers(0, 7), g=st.integers(0, 5), seed=st.integers(0, 2**16))
def test_longformer_on_both_sides_of_the_size_rule(within, s, w, g, seed):
    assume(w > 0 or g > 0)
    q, k, v = qkv((2,), s, 2, 3, seed)
    want = reference(q, k, v, 0.6, lambda i, j: abs(i - j) < w or i < g or j < g)
    with dense_within(within):
        agree(lambda: B.window_global_attention(q, k, v, w, g, 0.6), want, (q, k, v))


@pytest.mark.parametrize("within", [0, 1000])
@settings(max_examples=10, deadline=None)
@given(s=st.integers(1, 19), w=st.integers(1, 8), shared=st.booleans(), seed=st.integers(0, 2**16))
def test_causal_window_on_both_sides_of_the_size_rule(within, s, w, shared, seed):
    """shared: one key/value head read by two query heads (the band then, whatever the rule says)."""
    q, k, v = qkv((2, 2), s, 2, 2, seed, kv_lead=(2, 1) if shared else None)
    want = reference(q, k, v, 0.6, lambda i, j: 0 <= i - j < w)
    with dense_within(within):
        agree(lambda: B.causal_window_attention(q, k, v, w, 0.6), want, (q, k, v))


def test_the_window_edge_across_blocks():
    """s = 3w + 1 (a padded last block), each key one position past the window gets a huge score:
    a kernel that kept it would be far off."""
    s, w = 13, 4
    q, k, v = qkv((), s, 1, 1, 0)
    with torch.no_grad():
        q.fill_(1.0)
        k.copy_(torch.linspace(-1, 1, s)[:, None])
    want = reference(q, k, v, 50.0, lambda i, j: abs(i - j) < w)
    with dense_within(0):
        agree(lambda: B.window_attention(q, k, v, w, 50.0), want, (q, k, v))


def test_the_rule_picks_dense_for_short_sequences_and_the_band_for_long_ones(monkeypatch):
    seen = []
    real = B._dense
    monkeypatch.setattr(B, "_dense", lambda *a: seen.append("dense") or real(*a))
    q, k, v = qkv((1,), 8 * 4, 2, 2, 1)
    B.window_attention(q, k, v, 4, 1.0)
    q, k, v = qkv((1,), 8 * 4 + 1, 2, 2, 1)
    B.window_attention(q, k, v, 4, 1.0)
    assert seen == ["dense"]


def test_masks_are_made_once_per_shape_and_not_written():
    B._MASKS.clear()
    q, k, v = qkv((2,), 40, 2, 2, 3)
    with dense_within(0):
        y1 = B.window_attention(q, k, v, 3, 1.0)
        masks = {key: m.clone() for key, m in B._MASKS.items()}
        y2 = B.window_attention(q, k, v, 3, 1.0)
    assert len(masks) == 1 and torch.equal(y1, y2)
    for key, m in B._MASKS.items():
        assert torch.equal(m, masks[key])
    assert math.isfinite(float(y1.detach().sum()))
