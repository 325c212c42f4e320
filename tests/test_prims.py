"""The primitives of issue 22: each against a hand-written float64 torch reference, and its
cost as ``info`` reports it (``analysis/complexity.py``) against the count by hand."""
from __future__ import annotations

import math

import pytest
import torch

import stringdiag
from stringdiag import DiagError
from stringdiag.analysis.complexity import analyse
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
