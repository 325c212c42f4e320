"""Compiled diagrams agree with independent hand-written PyTorch (float64, relative error)."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

import stringdiag
from stringdiag import DiagError
from stringdiag import compile
from stringdiag.lower import primitives as P
from helpers import SELF_ATTENTION, rel_norm

F64 = torch.float64


def randn(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, dtype=F64)

SRC = """\
dim s, t : seq
dim d, k, h, e : fixed
learn Q, K : [d] -> [k]
learn V : [d] -> [d]

""" + SELF_ATTENTION + """
diagram Causal(x: [s, d]) -> [s, d] {
  q = Q(x)
  kk = K(x)
  e[i, j] = sum_f q[i, f] * kk[j, f]
  m = causal<s>()
  a = softmax(where(e / sqrt(k), m))
  y[i] = sum_j a[i, j] * V(x)[j]
  return y
}

diagram Cross(x: [t, d], y: [s, d]) -> [t, d] {
  q = Q(x)
  kk = K(y)
  e[i, j] = sum_f q[i, f] * kk[j, f]
  a = ssoftmax<s, k>(e)
  o[i] = sum_j a[i, j] * V(y)[j]
  return o
}

diagram Relu(x: [s, d]) -> [s, d] {
  e[i, j] = sum_f Q(x)[i, f] * K(x)[j, f]
  y[i] = sum_j relu(e)[i, j] * V(x)[j]
  return y
}

diagram Hard(x: [s, d]) -> [s, d] {
  e[i, j] = sum_f Q(x)[i, f] * K(x)[j, f]
  y[i] = sum_j hardmax(e)[i, j] * V(x)[j]
  return y
}

# causal linear attention, quadratic form: phi(q) phi(k)^T masked, then normalised
diagram LinQuadratic(x: [s, d]) -> [s, d] {
  pq = elu1(Q(x))
  pk = elu1(K(x))
  m = causal<s>()
  num[i] = sum_{j, f} m[i, j] * pq[i, f] * pk[j, f] * V(x)[j]
  den[i] = sum_{j, f} m[i, j] * pq[i, f] * pk[j, f]
  y[i] = num[i] / den[i]
  return y
}

# the same function as a recurrence: state S = sum of pk v^T and z = sum of pk
learn H0 : -> [k, d]
learn Z0 : -> [k]
diagram LinStep(st: [k, d], pk: [k], v: [d]) -> [k, d], [k, d] {
  st2[f, c] = st[f, c] + pk[f] * v[c]
  return st2, st2
}
diagram ZStep(z: [k], pk: [k]) -> [k], [k] {
  z2 = z + pk
  return z2, z2
}
diagram LinRecurrent(x: [s, d]) -> [s, d] {
  pq = elu1(Q(x))
  pk = elu1(K(x))
  v = V(x)
  zero_s[f, c] = H0()[f, c] * 0
  zero_z = Z0() * 0
  _s, S[t] = scan LinStep(zero_s, pk[t], v[t])
  _z, Z[t] = scan ZStep(zero_z, pk[t])
  num[i] = sum_f pq[i, f] * S[i, f]
  den[i] = sum_f pq[i, f] * Z[i, f]
  y[i] = num[i] / den[i]
  return y
}

learn Phi : [d] -> [e]
learn Psi : [d], [e] -> [d]
diagram Sumformer(x: [s, d]) -> [s, d] {
  total = sum_j Phi(x)[j]
  y[i] = Psi(x[i], total)
  return y
}

learn WQ, WK, WV : [d] -> [h, k]
learn WO : [h, k] -> [d]
diagram MHA(x: [s, d]) -> [s, d] {
  q = WQ(x)
  kk = WK(x)
  v = WV(x)
  e[a, i, j] = sum_f q[i, a, f] * kk[j, a, f]
  att = softmax(e / sqrt(k))
  o[i, a] = sum_j att[a, i, j] * v[j, a]
  return WO(o)
}

learn Cell : [h], [d] -> [h], [k]
diagram RNN(x: [s, d], h0: [h]) -> [h], [s, k] {
  hN, y[t] = scan Cell(h0, x[t])
  return hN, y
}

diagram Norm(x: [s, d]) -> [s, d] {
  return layernorm(x + posenc<s, d>())
}
"""

PROG = stringdiag.loads(SRC, "compile_test.diag")
DIMS = {"d": 6, "k": 4, "h": 2, "e": 5}


def build(name: str, policy: str = "linear", **dims) -> torch.nn.Module:
    torch.manual_seed(0)
    return compile(PROG[name], dims={**DIMS, **dims}, approximator=policy, dtype=torch.float64)


def lin(m: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    return x @ m.weight.T + m.bias


def attention_reference(m, x, mask=None, score=None):
    q, k, v = lin(m.Q, x), lin(m.K, x), lin(m.V, x)
    e = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if mask is not None:
        e = e.masked_fill(~mask, float("-inf"))
    a = torch.softmax(e, -1) if score is None else score(e * math.sqrt(q.shape[-1]))
    return a @ v


def test_self_attention_matches_reference():
    m = build("SelfAttention")
    x = randn(7, 6)
    assert m(x).shape == (7, 6)
    assert rel_norm(m(x), attention_reference(m, x)) < 1e-12


def test_leading_batch_axes():
    m = build("SelfAttention")
    x = randn(2, 3, 7, 6)
    y = m(x)
    assert y.shape == (2, 3, 7, 6)
    assert rel_norm(y[1, 2], m(x[1, 2])) < 1e-12


def test_float32_agrees_with_float64():
    m = build("SelfAttention")
    x = randn(4, 9, 6)
    m32 = compile(PROG["SelfAttention"], dims=DIMS, approximator="linear", dtype=torch.float32)
    m32.load_state_dict({k: v.float() for k, v in m.state_dict().items()})
    assert rel_norm(m32(x.float()).double(), m(x)) < 1e-5


def test_causal_masking_matches_reference_and_ignores_the_future():
    m = build("Causal")
    x = randn(8, 6)
    mask = torch.ones(8, 8, dtype=torch.bool).tril()
    assert rel_norm(m(x), attention_reference(m, x, mask)) < 1e-12
    x2 = x.clone()
    x2[5:] = randn(3, 6)
    assert torch.equal(m(x)[:5], m(x2)[:5])
    assert not torch.allclose(m(x)[5:], m(x2)[5:])


def test_cross_attention():
    m = build("Cross")
    x, y = randn(3, 6), randn(9, 6)
    q, k, v = lin(m.Q, x), lin(m.K, y), lin(m.V, y)
    ref = torch.softmax(q @ k.T / 2.0, -1) @ v
    assert m(x, y).shape == (3, 6)
    assert rel_norm(m(x, y), ref) < 1e-12


def test_relu_and_hardmax_attention():
    x = randn(6, 6)
    m = build("Relu")
    assert rel_norm(m(x), attention_reference(m, x, score=torch.relu)) < 1e-12
    m = build("Hard")

    def hardmax(e):
        hit = (e == e.max(-1, keepdim=True).values).to(F64)
        return hit / hit.sum(-1, keepdim=True)

    assert rel_norm(m(x), attention_reference(m, x, score=hardmax)) < 1e-12


def test_hardmax_averages_ties():
    m = build("Hard")
    with torch.no_grad():
        m.Q.weight.zero_()
        m.Q.bias.fill_(1.0)  # every query the same: scores depend only on the key
        m.K.weight.zero_()
        m.K.bias.zero_()      # every key the same: all scores tie
    x = randn(5, 6)
    v = lin(m.V, x)
    assert rel_norm(m(x), v.mean(0).expand(5, 6)) < 1e-12


def test_causal_linear_attention_quadratic_equals_recurrent():
    a = build("LinQuadratic")
    b = build("LinRecurrent")
    b.load_state_dict({**a.state_dict(), **{k: v for k, v in b.state_dict().items() if k in ("H0.weight", "Z0.weight")}})
    x = randn(2, 10, 6)
    pq, pk, v = F.elu(lin(a.Q, x)) + 1, F.elu(lin(a.K, x)) + 1, lin(a.V, x)
    mask = torch.ones(10, 10, dtype=F64).tril()
    att = (pq @ pk.transpose(-1, -2)) * mask
    ref = (att @ v) / att.sum(-1, keepdim=True)
    assert rel_norm(a(x), ref) < 1e-12
    assert rel_norm(b(x), ref) < 1e-12


def test_sumformer():
    m = build("Sumformer")
    x = randn(7, 6)
    total = lin(m.Phi, x).sum(0)
    ref = lin(m.Psi, torch.cat([x, total.expand(7, 5)], -1))
    assert rel_norm(m(x), ref) < 1e-12


def test_multi_head_matches_torch_multihead_attention():
    m = build("MHA", h=2, k=3, d=6)
    ref = torch.nn.MultiheadAttention(6, 2, batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        ref.in_proj_weight.copy_(torch.cat([m.WQ.weight, m.WK.weight, m.WV.weight]))
        ref.in_proj_bias.copy_(torch.cat([m.WQ.bias, m.WK.bias, m.WV.bias]))
        ref.out_proj.weight.copy_(m.WO.weight)
        ref.out_proj.bias.copy_(m.WO.bias)
    x = randn(3, 8, 6)
    expected, _ = ref(x, x, x, need_weights=False)
    assert rel_norm(m(x), expected) < 1e-12


def test_rnn_scan_matches_explicit_loop():
    m = build("RNN", policy="mlp")
    x, h0 = randn(5, 6), randn(2)
    h, ys = h0, []
    for t in range(5):
        out = m.Cell(torch.cat([h, x[t]]))
        h, y = out[:2], out[2:]
        ys.append(y)
    hN, y = m(x, h0)
    assert hN.shape == (2,) and y.shape == (5, 4)
    assert rel_norm(hN, h) < 1e-12 and rel_norm(y, torch.stack(ys)) < 1e-12


def test_layernorm_and_positional_encoding():
    m = build("Norm")
    x = randn(7, 6)
    pos = torch.arange(7.0, dtype=F64)[:, None]
    kk = torch.arange(6, dtype=F64)
    angle = pos * 10000.0 ** (-(kk - kk % 2) / 6.0)
    pe = torch.where(kk % 2 == 0, torch.sin(angle), torch.cos(angle))
    ln = next(mod for mod in m.modules() if isinstance(mod, torch.nn.LayerNorm))
    assert rel_norm(m(x), F.layer_norm(x + pe, (6,), ln.weight, ln.bias)) < 1e-12


@settings(max_examples=25, deadline=None, derandomize=True)
@given(n=st.integers(2, 9), seed=st.integers(0, 2**16))
def test_self_attention_is_permutation_equivariant(n, seed):
    torch.manual_seed(seed)
    m = build("SelfAttention", policy="mlp")
    x = randn(n, 6)
    perm = torch.randperm(n)
    assert rel_norm(m(x[perm]), m(x)[perm]) < 1e-12


def test_shared_weights_are_one_parameter_set():
    p = stringdiag.loads(SRC + "diagram Twice(x: [s, d]) -> [s, d] {\n return SelfAttention(SelfAttention(x))\n}",
                         "twice.diag")
    m = compile(p["Twice"], dims=DIMS, approximator="linear")
    one = build("SelfAttention")
    assert sum(t.numel() for t in m.parameters()) == sum(t.numel() for t in one.parameters())


def test_mlp_policy_has_hidden_layer_as_wide_as_input():
    m = build("SelfAttention", policy="mlp")
    assert [tuple(p.shape) for p in m.Q.parameters()] == [(6, 6), (6,), (4, 6), (4,)]


def test_missing_dims_and_abstract_boxes_are_clear_errors():
    with pytest.raises(DiagError, match=r"give sizes for the fixed dimension\(s\) d, k of 'SelfAttention'"):
        compile(PROG["SelfAttention"], dims={})
    p = stringdiag.loads("dim s : seq\ndim k : fixed\nabstract sim : [k], [k] -> []\n"
                         "diagram A(x: [s, k]) -> [s, s] {\n e[i, j] = sim(x[i], x[j])\n return e\n}", "a.diag")
    with pytest.raises(DiagError, match="'sim' is an abstract family"):
        compile(p["A"], dims={"k": 3})


def test_generated_code_is_readable_python():
    m = build("SelfAttention")
    code = m.code
    assert "def forward(self, x):" in code
    assert "self.Q(" in code and "scaled_dot_product_attention" in code
    assert "for " not in code  # no Python loop over positions


@pytest.mark.parametrize("name", ["SelfAttention", "Causal", "Cross", "MHA"])
def test_softmax_attention_lowers_to_sdpa_and_agrees(name):
    fast = build(name, h=2, k=3)
    slow = compile(PROG[name], dims={**DIMS, "h": 2, "k": 3}, approximator="linear", dtype=F64, fast=False)
    slow.load_state_dict(fast.state_dict())
    assert "scaled_dot_product_attention" in fast.code
    assert "scaled_dot_product_attention" not in slow.code and "softmax" in slow.code
    xs = [randn(2, 7, 6)] if name != "Cross" else [randn(2, 4, 6), randn(2, 9, 6)]
    assert rel_norm(fast(*xs), slow(*xs)) < 1e-12


def test_attention_matrix_used_elsewhere_is_not_fused():
    p = stringdiag.loads(SRC + """diagram Both(x: [s, d]) -> [s, d], [s, s] {
  e[i, j] = sum_f Q(x)[i, f] * K(x)[j, f]
  a = softmax(e / sqrt(k))
  y[i] = sum_j a[i, j] * V(x)[j]
  return y, a
}""", "both.diag")
    m = compile(p["Both"], dims=DIMS, approximator="linear")
    assert "scaled_dot_product_attention" not in m.code


@pytest.mark.parametrize("chunk", [None, 3, 128])
def test_causal_linear_attention_fast_path(chunk):
    slow = compile(PROG["LinQuadratic"], dims=DIMS, approximator="linear", dtype=F64, fast=False)
    fast = compile(PROG["LinQuadratic"], dims=DIMS, approximator="linear", dtype=F64)
    fast.load_state_dict(slow.state_dict())
    targets = {node.target for node in fast.graph.nodes}
    assert P.causal_linear in targets and P.causal not in targets  # fused, and no [s, s] mask made
    x = randn(2, 10, 6)
    q, k, v = randn(2, 10, 3), randn(2, 10, 3), randn(2, 10, 5)
    ref = ((q @ k.transpose(-1, -2)) * torch.ones(10, 10, dtype=F64).tril()) @ v
    assert rel_norm(P.causal_linear(q, k, v, chunk), ref) < 1e-12
    assert rel_norm(fast(x), slow(x)) < 1e-12


def test_user_supplied_approximator_factory():
    made = []

    def factory(n_in, n_out):
        made.append((n_in, n_out))
        return torch.nn.Linear(n_in, n_out, bias=False)

    m = compile(PROG["SelfAttention"], dims=DIMS, approximator=factory, dtype=F64)
    assert sorted(made) == [(6, 4), (6, 4), (6, 6)]
    assert all("bias" not in name for name, _ in m.named_parameters())
    with pytest.raises(DiagError, match="unknown approximator 'deep'"):
        compile(PROG["SelfAttention"], dims=DIMS, approximator="deep")


def test_scalar_output_without_batch_axes():
    p = stringdiag.loads("dim s : seq\ndim d : fixed\n"
                         "diagram A(x: [s, d]) -> [] {\n  return sum_{i, f} x[i, f]\n}", "a.diag")
    m = compile(p["A"], dims={"d": 3})
    assert m(torch.ones(4, 3)).shape == () and m(torch.ones(4, 3)).item() == 12.0
    assert m(torch.ones(2, 4, 3)).shape == (2,)


def test_a_definition_of_ones_own_named_like_a_native_one_is_opened():
    # the compiler lowers the prelude's softmax by torch.softmax; a file's own `softmax` that
    # computes something else must be compiled from its body, not taken for the prelude's
    p = stringdiag.loads("""dim s : seq
dim d : fixed
diagram softmax<n>(x: [n]) -> [n] {
  return x + x
}
diagram A(x: [s, d]) -> [s, d] {
  y[i] = softmax(x[i])
  return y
}""")
    x = torch.randn(3, 4, dtype=torch.float64)
    assert torch.equal(stringdiag.compile(p["A"], dims={"d": 4}, dtype=torch.float64)(x), x + x)
