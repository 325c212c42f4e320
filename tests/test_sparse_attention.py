"""Sparse attention that is sparse (issue 9, item 3).

The compiler gives softmax attention under a sliding-window mask ``window<s, w>`` (|i - j| < w)
a banded computation (``rules/fastpath.rules`` -> the prelude's ``window_sdpa`` -> the native
``window_attention``, no s x s matrix); here it is checked against dense masked attention
written by hand in float64, values and gradients, for windows narrower than, equal to and
wider than the sequence, and w = 1; so are Longformer's window with g global tokens and the
global tokens alone (``window_global_sdpa`` -> ``window_global_attention``). The analysis
counts the masked attention by the mask's support: O(s·w) for a window, O(s·g) for g global
tokens, and what it counts is what the compiler computes.
"""
from __future__ import annotations

import math

import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import stringdiag
from stringdiag import compile
from stringdiag.analysis.complexity import analyse
from stringdiag.lower import primitives as P
from helpers import rel_max

F64 = torch.float64
GALLERY = stringdiag.load("gallery/taxonomy.diag")


def dense(q, k, v, w: int, scale: float):
    """The reference: the whole [s, s] score matrix, masked outside |i - j| < w."""
    s = q.shape[-2]
    i = torch.arange(s)
    keep = (i[:, None] - i[None, :]).abs() < w
    e = (q @ k.transpose(-1, -2) * scale).masked_fill(~keep, -math.inf)
    return torch.softmax(e, dim=-1) @ v


@settings(max_examples=25, deadline=None)
@given(s=st.integers(1, 9), w=st.integers(1, 12), f=st.integers(1, 3), e=st.integers(1, 3),
       seed=st.integers(0, 2**16))
def test_window_attention_is_dense_masked_attention_values_and_gradients(s, w, f, e, seed):
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(2, s, n, generator=g, dtype=F64, requires_grad=True) for n in (f, f, e))
    y = P.window_attention(q, k, v, w, 0.7)
    ref = dense(q, k, v, w, 0.7)
    assert rel_max(y, ref) < 1e-10
    gy = torch.randn(y.shape, generator=g, dtype=F64)
    got = torch.autograd.grad(y, (q, k, v), gy)
    want = torch.autograd.grad(ref, (q, k, v), gy)
    for a, b in zip(got, want):  # w = 1: the gradients of q and k vanish; fused SDPA's meet 0 to round-off
        assert torch.isfinite(a).all() and (a - b).abs().max() <= 1e-10 * max(1.0, b.abs().max().item())


@pytest.mark.parametrize("w", [1, 3, 7, 50])  # w = 1: the diagonal only; 7 = s and 50 > s: no mask at all
def test_compiled_sliding_window_attention_is_banded_and_agrees_with_dense(w):
    d = GALLERY["SlidingWindowAttention"]
    torch.manual_seed(1)
    m = compile(d, dims={"d": 5, "k": 3, "w": w}, approximator="linear", dtype=F64)
    called = [n.target for n in m.graph.nodes if n.op == "call_function"]
    assert P.window_attention in called and P.window not in called  # no [s, s] mask is built
    x = torch.randn(2, 7, 5, dtype=F64, requires_grad=True)
    y = m(x)
    ref = dense(m.Q(x), m.K(x), m.V(x), w, 1 / math.sqrt(3))
    assert rel_max(y, ref) < 1e-10
    gy = torch.randn(y.shape, dtype=F64)
    (gx,) = torch.autograd.grad(y, x, gy)
    (gr,) = torch.autograd.grad(ref, x, gy)
    assert rel_max(gx, gr) < 1e-10


def test_window_attention_memory_does_not_hold_an_s_by_s_matrix():
    """Every tensor window_attention saves for the backward pass is O(s·w), not O(s²)."""
    s, w = 512, 4
    q, k, v = (torch.randn(s, 2, dtype=F64, requires_grad=True) for _ in range(3))
    sizes = []

    def pack(t):
        sizes.append(t.numel())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        P.window_attention(q, k, v, w, 1.0).sum()
    assert sizes and max(sizes) <= s * (2 * w - 1) * 2 + 2 * (s + 2 * w)


# == the analysis counts a masked attention on its mask's support ================================
ANALYSED = stringdiag.loads("""\
dim s : seq
dim d, w, g : fixed
learn Q, K, V : [d] -> [d]

diagram Masked(x: [s, d], mk: [s, s]) -> [s, d] {
  e[i, j] = sum_f Q(x)[i, f] * K(x)[j, f]
  a = softmax(where(e / sqrt(d), mk))
  y[i] = sum_j a[i, j] * V(x)[j]
  return y
}
diagram Window(x: [s, d]) -> [s, d] { return Masked(x, window<s, w>()) }
diagram Global(x: [s, d]) -> [s, d] { return Masked(x, global<s, g>()) }
diagram Longformer(x: [s, d]) -> [s, d] { return Masked(x, max(window<s, w>(), global<s, g>())) }
diagram Causal(x: [s, d]) -> [s, d] { return Masked(x, causal<s>()) }

# the scores are also returned: they are needed everywhere, not on the band only
diagram Scores(x: [s, d]) -> [s, d], [s, s] {
  e[i, j] = sum_f Q(x)[i, f] * K(x)[j, f]
  a = softmax(where(e, window<s, w>()))
  y[i] = sum_j a[i, j] * V(x)[j]
  return y, e
}

# a dense bias added after the exponential: off the band, exp(-inf) + bias is not 0
learn B : [d] -> []
diagram Biased(x: [s, d]) -> [s, d] {
  e[i, j] = sum_f Q(x)[i, f] * K(x)[j, f]
  p = exp(where(e, window<s, w>()))
  b[j] = B(x[j])
  y[i] = sum_j (p[i, j] + b[j]) * V(x)[j]
  return y
}
""", "analysed.diag")


@pytest.mark.parametrize("name, seq_time, seq_memory", [
    ("Window", "s·w", "s·w"), ("Global", "s·g", "s·g"), ("Longformer", "s·g + s·w", "s·g + s·w"),
    ("Causal", "s^2", "s^2"), ("Masked", "s^2", "s^2")])
def test_masked_attention_costs_its_mask_support(name, seq_time, seq_memory):
    c = analyse(ANALYSED[name])
    assert (c.seq_time, c.seq_memory) == (seq_time, seq_memory)


def test_the_window_replaces_one_s_in_every_quadratic_term_and_nothing_else():
    assert analyse(ANALYSED["Window"]).time == "s·w·d + s·d^2"
    assert analyse(ANALYSED["Causal"]).time == "s^2·d + s·d^2"
    assert analyse(GALLERY["SlidingWindowAttention"]).seq_time == "s·w"


@pytest.mark.parametrize("name", ["Scores", "Biased"])
def test_the_support_does_not_spread_where_it_does_not_hold(name):
    assert analyse(ANALYSED[name]).seq_time == "s^2"


def test_global_tokens_mask_is_the_first_g_rows_and_columns():
    m = P.global_tokens(6, 2, torch.zeros((), dtype=F64))[0]
    want = torch.tensor([[1.0 if (i < 2 or j < 2) else 0.0 for j in range(6)] for i in range(6)], dtype=F64)
    assert torch.equal(m, want)


def dense_longformer(q, k, v, w: int, g: int, scale: float):
    """The reference: the whole [s, s] score matrix, masked outside the window and the first
    g rows and columns (Beltagy et al.'s global tokens)."""
    s = q.shape[-2]
    i = torch.arange(s)
    keep = ((i[:, None] - i[None, :]).abs() < w) | (i[:, None] < g) | (i[None, :] < g)
    e = (q @ k.transpose(-1, -2) * scale).masked_fill(~keep, -math.inf)
    return torch.softmax(e, dim=-1) @ v


@settings(max_examples=30, deadline=None)
@given(s=st.integers(1, 10), w=st.integers(0, 12), g=st.integers(0, 12), f=st.integers(1, 3),
       e=st.integers(1, 3), seed=st.integers(0, 2**16))
def test_window_global_attention_is_dense_masked_attention_values_and_gradients(s, w, g, f, e, seed):
    """w = 0: the global tokens alone (some key for every query needs w > 0 or g > 0)."""
    assume(w > 0 or g > 0)
    gen = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(2, s, n, generator=gen, dtype=F64, requires_grad=True) for n in (f, f, e))
    y = P.window_global_attention(q, k, v, w, g, 0.7)
    ref = dense_longformer(q, k, v, w, g, 0.7)
    assert rel_max(y, ref) < 1e-10
    gy = torch.randn(y.shape, generator=gen, dtype=F64)
    for a, b in zip(torch.autograd.grad(y, (q, k, v), gy), torch.autograd.grad(ref, (q, k, v), gy)):
        assert torch.isfinite(a).all() and (a - b).abs().max() <= 1e-10 * max(1.0, b.abs().max().item())


@pytest.mark.parametrize("w, g", [(1, 1), (2, 3), (9, 2)])
def test_compiled_longformer_builds_no_s_by_s_mask_and_agrees_with_dense(w, g):
    d = stringdiag.load("gallery/taxonomy_sparse.diag")["Longformer"]
    m = compile(d, dims={"d": 5, "k": 3, "w": w, "g": g}, approximator="linear", dtype=F64)
    called = [n.target for n in m.graph.nodes if n.op == "call_function"]
    assert P.window_global_attention in called and P.global_tokens not in called and P.window not in called
    x = torch.randn(2, 8, 5, dtype=F64, requires_grad=True)
    y = m(x)
    ref = dense_longformer(m.Q(x), m.K(x), m.V(x), w, g, 1 / math.sqrt(3))
    assert rel_max(y, ref) < 1e-10
    gy = torch.randn(y.shape, dtype=F64)
    assert rel_max(torch.autograd.grad(y, x, gy)[0], torch.autograd.grad(ref, x, gy)[0]) < 1e-10


@pytest.mark.parametrize("w, g", [(1, 0), (2, 0), (6, 0), (7, 0), (1, 1), (2, 3), (3, 2), (9, 2)])
def test_the_dense_forms_build_the_masks_and_agree_with_dense_attention_at_the_window_edge(w, g):
    """Compiled without the fast paths, the sliding window and Longformer build their masks with
    window and global ([s, s]) and agree with the hand-written references; s = 7, so that a key
    at |i - j| = w is there to be wrongly kept for every w < 7."""
    name = "Longformer" if g else "SlidingWindowAttention"
    d = stringdiag.load("gallery/taxonomy_sparse.diag" if g else "gallery/taxonomy.diag")[name]
    m = compile(d, dims={"d": 5, "k": 3, "w": w, **({"g": g} if g else {})}, approximator="linear", dtype=F64,
                fast=False)
    called = [n.target for n in m.graph.nodes if n.op == "call_function"]
    assert P.window in called and (P.global_tokens in called) == bool(g)
    x = torch.randn(2, 7, 5, dtype=F64, generator=torch.Generator().manual_seed(w + 10 * g))
    scale = 1 / math.sqrt(3)
    ref = dense_longformer(m.Q(x), m.K(x), m.V(x), w, g, scale) if g else dense(m.Q(x), m.K(x), m.V(x), w, scale)
    assert rel_max(m(x), ref) < 1e-10


def test_compiled_global_tokens_alone_use_the_kernel_without_a_band():
    m = compile(ANALYSED["Global"], dims={"d": 4, "g": 2}, approximator="linear", dtype=F64)
    called = [n.target for n in m.graph.nodes if n.op == "call_function"]
    assert P.window_global_attention in called and P.global_tokens not in called
    x = torch.randn(7, 4, dtype=F64)
    assert rel_max(m(x), dense_longformer(m.Q(x), m.K(x), m.V(x), 0, 2, 1 / math.sqrt(4))) < 1e-10


def test_window_global_attention_memory_grows_linearly():
    """What the kernel saves for the backward pass, at s and 2s (w, g fixed): about twice, not four times."""
    def saved(s: int) -> int:
        q, k, v = (torch.randn(s, 4, dtype=F64, requires_grad=True) for _ in range(3))
        total = 0

        def pack(t):
            nonlocal total
            total += t.numel()
            return t
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            P.window_global_attention(q, k, v, 4, 2, 1.0).sum()
        return total
    assert saved(512) / saved(256) < 2.2
