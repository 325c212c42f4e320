"""The primitives of issue 22: each against a hand-written float64 torch reference, and its
cost as ``info`` reports it (``analysis/complexity.py``) against the count by hand."""
from __future__ import annotations

import math

import pytest
import torch

import stringdiag
from stringdiag import DiagError
from stringdiag.analysis.complexity import analyse
from stringdiag.graph.types import Dim
from stringdiag.lower.lower import compile

HEAD = "dim s : seq\ndim d, k : fixed\n"


def prog(body: str, name: str = "t.diag"):
    return stringdiag.loads(HEAD + body, name)


def run(body: str, *xs: torch.Tensor, dims: dict | None = None, **kw):
    p = prog(body)
    d = p[next(iter(n for n in p.defs))] if "diagram" in body else None
    m = compile(d, dims=dims or {"d": xs[0].shape[-1]}, dtype=torch.float64, **kw)
    with torch.no_grad():
        return m(*xs)


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# -- elementwise: sin, cos, pow, exp, log, floor, clamp ---------------------------------------
ELEMENTWISE = """diagram E(x: [s, d]) -> [s, d] {
  return pow(sin(x), 2) + cos(x) * exp(x) - log(x * x + 1) + floor(3 * x) + clamp(x, 0 - 0.5, 0.5)
}"""


def test_elementwise_primitives_agree_with_torch():
    x = torch.randn(2, 5, 4, generator=gen(0), dtype=torch.float64) * 2
    y = run(ELEMENTWISE, x)
    ref = torch.sin(x) ** 2 + torch.cos(x) * torch.exp(x) - torch.log(x * x + 1) + torch.floor(3 * x) \
        + x.clamp(-0.5, 0.5)
    torch.testing.assert_close(y, ref, rtol=1e-13, atol=1e-13)


def test_pow_takes_a_wire_exponent_and_an_integer_one_on_negative_bases():
    x = torch.randn(3, 6, 4, generator=gen(1), dtype=torch.float64)
    e = torch.rand(3, 6, 4, generator=gen(2), dtype=torch.float64) * 3
    y = run("diagram P(x: [s, d], e: [s, d]) -> [s, d] {\n  return pow(x, 3) + pow(x * x + 1, e)\n}", x, e)
    torch.testing.assert_close(y, x ** 3 + (x * x + 1) ** e, rtol=1e-13, atol=1e-13)


def test_elementwise_primitives_cost_one_touch_per_entry():
    c = analyse(prog(ELEMENTWISE)["E"])
    assert (c.time, c.memory, c.seq_time) == ("s·d", "s·d", "s")


# -- cumsum / cumprod along the last axis ------------------------------------------------------
CUM = """diagram C(x: [s, d]) -> [s, d], [s, d] {
  c[i] = cumsum(x[:, i])
  y[j, i] = c[i, j]
  return y, cumprod(x)
}"""


def test_cumsum_and_cumprod_run_along_the_last_axis_and_an_index_picks_another():
    x = torch.randn(2, 7, 3, generator=gen(3), dtype=torch.float64)
    y, p = run(CUM, x)
    torch.testing.assert_close(y, torch.cumsum(x, dim=-2), rtol=1e-13, atol=1e-13)
    torch.testing.assert_close(p, torch.cumprod(x, dim=-1), rtol=1e-13, atol=1e-13)


def test_cumsum_gradient_agrees_with_torch():
    x = torch.randn(7, 3, generator=gen(4), dtype=torch.float64, requires_grad=True)
    m = compile(prog(CUM)["C"], dims={"d": 3}, dtype=torch.float64)
    w = torch.randn(7, 3, generator=gen(5), dtype=torch.float64)
    (m(x[None])[0][0] * w).sum().backward()
    ref = torch.flip(torch.cumsum(torch.flip(w, [0]), 0), [0])  # d/dx_j sum_i w_i sum_{j<=i} x_j
    torch.testing.assert_close(x.grad, ref, rtol=1e-13, atol=1e-13)


def test_cumsum_costs_linear_in_the_sequence():
    c = analyse(prog(CUM)["C"])
    assert (c.time, c.seq_time, c.seq_memory) == ("s·d", "s", "s")


# -- parenthesised type arithmetic, integer indices and fixed ranges, indexed outputs -------------
def test_parenthesised_type_arithmetic_is_the_polynomial_it_writes():
    p = prog("learn WO : [d * k * (k + k)] -> [d]\n"
             "diagram O(x: [s, 2 * d * k * k]) -> [s, d] {\n  return WO(x)\n}")
    d, k = Dim.var("d"), Dim.var("k")
    assert p.boxes["WO"].ins == ((d * k * (k + k),),) == ((2 * d * k * k,),)
    m = compile(p["O"], dims={"d": 2, "k": 3}, dtype=torch.float64)
    assert m(torch.zeros(1, 4, 36, dtype=torch.float64)).shape == (1, 4, 2)


PICKS = """diagram P(x: [s, d, d]) -> [s, d], [s, k], [s, k, d], [s] {
  y[i] = x[i, 1, :]
  z = x[:, 0, 0:k]
  u = x[:, 1:k + 1]
  return y, z, u, x[:, 0, 2]
}"""


def test_integer_indices_and_fixed_ranges_agree_with_torch_slicing():
    x = torch.randn(2, 7, 5, 5, generator=gen(6), dtype=torch.float64, requires_grad=True)
    m = compile(prog(PICKS)["P"], dims={"d": 5, "k": 3}, dtype=torch.float64)
    outs = m(x)
    refs = (x[:, :, 1, :], x[:, :, 0, 0:3], x[:, :, 1:4], x[:, :, 0, 2])
    for y, ref in zip(outs, refs):
        assert torch.equal(y, ref)
    w = [torch.randn(y.shape, generator=gen(7 + j), dtype=torch.float64) for j, y in enumerate(outs)]
    g, = torch.autograd.grad(sum((y * v).sum() for y, v in zip(outs, w)), x)
    g_ref, = torch.autograd.grad(sum((y * v).sum() for y, v in zip(refs, w)), x)
    assert torch.equal(g, g_ref)


def test_a_pick_costs_what_it_returns_not_the_axis_it_reads():
    c = analyse(prog("diagram F(x: [s, d, s]) -> [s, s] {\n  return x[:, 0, :]\n}")["F"])
    assert (c.time, c.memory) == ("s^2", "s^2·d")  # reading s^2 entries; the input itself is s^2·d


def test_every_output_of_a_multi_output_call_takes_the_statement_indices():
    p = prog("diagram S(x: [s, k + k]) -> [s, k], [s, k] {\n"
             "  x1[i], x2[i] = split<k, k>(x[i])\n  return x1, x2\n}")
    x = torch.randn(3, 4, 6, generator=gen(9), dtype=torch.float64)
    a, b = compile(p["S"], dims={"k": 3}, dtype=torch.float64)(x)
    assert torch.equal(a, x[..., :3]) and torch.equal(b, x[..., 3:])


@pytest.mark.parametrize("body, at, message", [
    ("diagram F(x: [s, 3]) -> [s] {\n  return x[:, 3]\n}", (4, 15),
     "the index 3 does not lie within axis 2 of 'x' (3 entries): what follows it would be -1; "
     "its entries are 0 to 2"),
    ("diagram F(x: [s, 3]) -> [s, 0] {\n  return x[:, 2:1]\n}", (4, 15),
     "the range does not lie within axis 2 of 'x' (3 entries): its length would be -1; its entries are 0 to 2"),
    ("diagram F(x: [s, d]) -> [s, d] {\n  y[i, i] = x\n  return y\n}", (4, 8), "index 'i' appears twice on 'y'"),
    ("diagram F(x: [s, k + 2]) -> [s] {\n  return x[:, k]\n}", (4, 15),
     "'k' is a dimension, not an index: the entry at offset k of axis 2 of 'x' is the one-wide slice k:k + 1 "
     "(an axis of 1 entry, as y = x[:, k:k + 1]; then y[i, 0] drops it); an index is bound on the left "
     "(y[i] = ...) or summed (sum_i ...)"),
    ("diagram F(x: [k + 2, s, d]) -> [s, d] {\n  return x[k]\n}", (4, 12),
     "'k' is a dimension, not an index: the entry at offset k of axis 1 of 'x' is the one-wide slice k:k + 1 "
     "(an axis of 1 entry, as y = x[k:k + 1]; then y[0] drops it); an index is bound on the left "
     "(y[i] = ...) or summed (sum_i ...)"),
])
def test_a_misused_index_is_a_positioned_error_that_says_what_works(body, at, message):
    with pytest.raises(DiagError) as e:
        prog(body)
    assert (e.value.message, (e.value.pos.line, e.value.pos.col)) == (message, at)


def test_the_slice_a_dimension_index_error_names_is_the_entry_at_that_offset():
    """What the message above says to write, written: x[:, k:k + 1] then y[i, 0] is x[..., k]."""
    p = prog("diagram F(x: [s, k + 2]) -> [s] {\n  y = x[:, k:k + 1]\n  z[i] = y[i, 0]\n  return z\n}")
    x = torch.randn(2, 4, 5, generator=gen(12), dtype=torch.float64)
    assert torch.equal(compile(p["F"], dims={"k": 3}, dtype=torch.float64)(x), x[..., 3])


def test_an_entry_at_an_offset_expression_names_the_slice_that_works():
    """x[:, k + 1] is a parse error (an index is a name or a number); the message names the
    one-wide slice, and that slice, written, is x[..., k + 1]."""
    with pytest.raises(DiagError) as e:
        prog("diagram F(x: [s, k + 2]) -> [s] {\n  return x[:, k + 1]\n}")
    assert "the one-wide slice x[:, a + 1:a + 2], and y[i, 0] then drops its axis" in e.value.message
    p = prog("diagram F(x: [s, k + 2]) -> [s] {\n  y = x[:, k + 1:k + 2]\n  z[i] = y[i, 0]\n  return z\n}")
    x = torch.randn(2, 4, 5, generator=gen(13), dtype=torch.float64)
    assert torch.equal(compile(p["F"], dims={"k": 3}, dtype=torch.float64)(x), x[..., 4])


def test_a_range_past_its_axis_at_the_compiled_sizes_is_refused_when_compiling():
    p = prog("diagram F(x: [s, d]) -> [s, k] {\n  return x[:, 1:k + 1]\n}")
    with pytest.raises(DiagError) as e:
        compile(p["F"], dims={"d": 3, "k": 3})
    assert "does not lie within its axis at these sizes (a = 1, m = 3, r = -1)" in e.value.message
    assert (e.value.pos.line, e.value.pos.col) == (4, 15)


# -- shift and the causal depthwise convolution -----------------------------------------------------
SHIFT = """diagram Sh(x: [s, d]) -> [s, d] {
  y[c] = shift<2>(x[:, c])
  z[i, c] = y[c, i]
  return z
}"""
CONV = """learn K : -> [d, k]
diagram Conv(x: [s, d]) -> [s, d] {
  y[c] = causal_conv(x[:, c], K()[c])
  z[i, c] = y[c, i]
  return z
}"""
BANDED = """learn K : -> [d, s, s]
diagram Banded(x: [s, d]) -> [s, d] {
  y[i, c] = sum_j K()[c, i, j] * x[j, c]
  return y
}"""


def test_shift_moves_entries_later_and_fills_with_zeros():
    x = torch.randn(2, 5, 3, generator=gen(10), dtype=torch.float64)
    y = run(SHIFT, x)
    assert torch.equal(y[:, 2:], x[:, :-2]) and torch.equal(y[:, :2], torch.zeros(2, 2, 3, dtype=torch.float64))


def test_causal_depthwise_convolution_agrees_with_torch_conv1d():
    x = torch.randn(2, 9, 3, generator=gen(11), dtype=torch.float64, requires_grad=True)
    m = compile(prog(CONV)["Conv"], dims={"d": 3, "k": 4}, dtype=torch.float64)
    kernel = dict(m.named_parameters())["K.weight"]
    with torch.no_grad():
        kernel.copy_(torch.randn(3, 4, generator=gen(12), dtype=torch.float64))
    conv = torch.nn.Conv1d(3, 3, 4, padding=3, groups=3, bias=False, dtype=torch.float64)
    with torch.no_grad():
        conv.weight.copy_(kernel.detach()[:, None, :])
    y, ref = m(x), conv(x.transpose(1, 2))[..., :9].transpose(1, 2)
    torch.testing.assert_close(y, ref, rtol=1e-13, atol=1e-13)
    w = torch.randn(y.shape, generator=gen(13), dtype=torch.float64)
    g = torch.autograd.grad((y * w).sum(), (x, kernel))
    g_ref = torch.autograd.grad((ref * w).sum(), (x, conv.weight))
    torch.testing.assert_close(g[0], g_ref[0], rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(g[1], g_ref[1][:, 0], rtol=1e-12, atol=1e-12)


def test_the_convolution_costs_s_w_where_a_banded_matrix_costs_s_squared():
    conv, banded, shift = analyse(prog(CONV)["Conv"]), analyse(prog(BANDED)["Banded"]), analyse(prog(SHIFT)["Sh"])
    assert (conv.time, conv.seq_time) == ("s·d·k", "s")
    assert (banded.time, banded.seq_time) == ("s^2·d", "s^2")
    assert (shift.time, shift.seq_time) == ("s·d", "s")


# -- dropout: active only in training --------------------------------------------------------------
DROP = "diagram D(x: [s, d], p: [s, d]) -> [s, d], [s, d] {\n  return dropout(x, 0.25), dropout(x, p)\n}"


def test_dropout_is_torch_dropout_in_training_and_the_identity_in_evaluation():
    m = compile(prog(DROP)["D"], dims={"d": 4}, dtype=torch.float64)
    x = torch.randn(2, 400, 4, generator=gen(14), dtype=torch.float64)
    p = torch.full_like(x, 0.5)
    p[..., :2] = 0.0
    one = compile(prog("diagram D(x: [s, d]) -> [s, d] {\n  return dropout(x, 0.25)\n}")["D"], dims={"d": 4},
                  dtype=torch.float64)
    torch.manual_seed(0)
    y = one.train()(x)
    torch.manual_seed(0)
    assert torch.equal(y, torch.nn.functional.dropout(x, 0.25, True))
    y, q = m.train()(x, p)
    assert torch.equal(q[..., :2], x[..., :2])  # rate 0 keeps everything
    kept = q[..., 2:] != 0
    assert abs(kept.double().mean().item() - 0.5) < 0.05  # 1600 draws: 5 standard deviations is 0.0625
    assert torch.equal(q[..., 2:][kept], 2 * x[..., 2:][kept])
    y, q = m.eval()(x, p)
    assert torch.equal(y, x) and torch.equal(q, x)


# -- rope<theta, h>: the prelude's, with sin and cos ---------------------------------------------------
def rotate_half_reference(x: torch.Tensor, theta: float) -> torch.Tensor:
    """Hugging Face Llama's apply_rotary_pos_emb, written out: inv_freq, cat(freqs, freqs), rotate_half."""
    m, s = x.shape[-1], x.shape[-2]
    inv_freq = 1.0 / (theta ** (torch.arange(0, m, 2, dtype=torch.float64) / m))
    freqs = torch.arange(s, dtype=torch.float64)[:, None] * inv_freq[None, :]
    emb = torch.cat([freqs, freqs], dim=-1)
    rot = torch.cat([-x[..., m // 2:], x[..., : m // 2]], dim=-1)
    return x * emb.cos() + rot * emb.sin()


@pytest.mark.parametrize("theta", [10000, 500000])
def test_rope_agrees_with_llamas_rotary_embedding(theta):
    p = prog(f"diagram R(x: [s, k + k]) -> [s, k + k] {{\n  return rope<{theta}, k>(x)\n}}")
    x = torch.randn(2, 11, 8, generator=gen(15), dtype=torch.float64)
    y = compile(p["R"], dims={"k": 4}, dtype=torch.float64)(x)
    torch.testing.assert_close(y, rotate_half_reference(x, theta), rtol=1e-13, atol=1e-13)


def test_rope_costs_linear_in_the_sequence():
    c = analyse(prog("diagram R(x: [s, k + k]) -> [s, k + k] {\n  return rope<10000, k>(x)\n}")["R"])
    assert (c.time, c.seq_time, c.seq_memory) == ("s·k", "s", "s")
