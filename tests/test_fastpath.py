"""Fast paths as rules (issue 12, item 4; issue 11) and chunked causal linear attention (item 5).

``rules/fastpath.rules`` is applied by the rewrite engine before lowering. Here: every rule
fires on a diagram written its way (factors in any order, inside head SIMD boxes, causally
masked); multi-query and grouped-query attention, whose keys and values have fewer heads
than the queries, become one ``F.scaled_dot_product_attention`` and agree in float64 with
attention written by hand; the fused module agrees with the unfused one in values and
gradients; the lowering's Python names no attention process outside the primitive table;
and the chunked causal linear attention is the quadratic form to float64 round-off for any
length, with a number of torch operations that does not grow with it.
"""
from __future__ import annotations

import ast
import math
import re
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.overrides import TorchFunctionMode

import stringdiag
from stringdiag import compile
from stringdiag.lower import fastpath
from stringdiag.lower import primitives as P
from stringdiag.rewrite.rule import load_rules
from helpers import rel_norm

F64 = torch.float64
LOWER = Path(fastpath.__file__).resolve().parent

SRC = """\
dim s : seq
dim d, k, h, g, r : fixed
learn Q, K : [d] -> [k]
learn V : [d] -> [d]

# keys first, values first: factors of a product in another order than the rules'
diagram Commuted(x: [s, d]) -> [s, d] {
  e[i, j] = sum_f K(x)[j, f] * Q(x)[i, f]
  a = softmax(e / sqrt(k))
  y[i] = sum_j V(x)[j] * a[i, j]
  return y
}

diagram Scale(x: [s, d]) -> [s, d] {
  e[i, j] = sum_f Q(x)[i, f] * K(x)[j, f]
  y[i] = sum_j softmax(scale<k>(e))[i, j] * V(x)[j]
  return y
}

diagram Unscaled(x: [s, d]) -> [s, d] {
  e[i, j] = sum_f Q(x)[i, f] * K(x)[j, f]
  y[i] = sum_j softmax(e)[i, j] * V(x)[j]
  return y
}

diagram CausalSsoftmax(x: [s, d]) -> [s, d] {
  e[i, j] = sum_f Q(x)[i, f] * K(x)[j, f]
  a = ssoftmax<s, k>(where(e, causal<s>()))
  y[i] = sum_j a[i, j] * V(x)[j]
  return y
}

diagram CausalUnscaled(x: [s, d]) -> [s, d] {
  e[i, j] = sum_f Q(x)[i, f] * K(x)[j, f]
  a = softmax(where(e, causal<s>()))
  y[i] = sum_j a[i, j] * V(x)[j]
  return y
}

# causal linear attention with its factors in another order, numerator and normaliser
# sharing one mask
diagram Linear(x: [s, d]) -> [s, d] {
  pq = elu1(Q(x))
  pk = elu1(K(x))
  m = causal<s>()
  num[i] = sum_{j, f} V(x)[j] * pk[j, f] * pq[i, f] * m[i, j]
  den[i] = sum_{j, f} pq[i, f] * m[i, j] * pk[j, f]
  y[i] = num[i] / den[i]
  return y
}

# multi-query attention (Shazeer 2019): h query heads, one key and one value head
learn MQ : [d] -> [h, k]
learn MK, MV : [d] -> [k]
learn MO : [h, k] -> [d]
diagram MQA(x: [s, d]) -> [s, d] {
  q = MQ(x)
  kk = MK(x)
  v = MV(x)
  e[a, i, j] = sum_f q[i, a, f] * kk[j, f]
  att = softmax(e / sqrt(k))
  o[i, a] = sum_j att[a, i, j] * v[j]
  return MO(o)
}

# grouped-query attention (Ainslie et al. 2023), causal: g key/value heads, r query heads each
learn GQ : [d] -> [g, r, k]
learn GK, GV : [d] -> [g, k]
learn GO : [g, r, k] -> [d]
diagram GQA(x: [s, d]) -> [s, d] {
  q = GQ(x)
  kk = GK(x)
  v = GV(x)
  e[a, b, i, j] = sum_f q[i, a, b, f] * kk[j, a, f]
  att = softmax(where(e / sqrt(k), causal<s>()))
  o[i, a, b] = sum_j att[a, b, i, j] * v[j, a]
  return GO(o)
}
"""

PROG = stringdiag.loads(SRC, "fastpath_test.diag")
DIMS = {"d": 6, "k": 4, "h": 3, "g": 2, "r": 3}
SDPA = F.scaled_dot_product_attention


def pair(name: str):
    """The diagram compiled with and without fast paths, with the same weights."""
    torch.manual_seed(0)
    fast = compile(PROG[name], dims=DIMS, approximator="linear", dtype=F64)
    slow = compile(PROG[name], dims=DIMS, approximator="linear", dtype=F64, fast=False)
    slow.load_state_dict(fast.state_dict())
    return fast, slow


def targets(gm) -> set:
    return {node.target for node in gm.graph.nodes}


def lin(m, x):
    return x @ m.weight.T + m.bias


def test_every_rule_of_the_file_is_one_of_the_compilers():
    names = {r.name for r in fastpath.rules()}
    assert names == {r.name for r in load_rules(fastpath.RULES)}
    # two products of two factors: 4 orders; one of four factors: 24
    assert sum(r.name == "sdpa_scaled" for r in fastpath.rules()) == 4
    assert sum(r.name == "causal_linear" for r in fastpath.rules()) == 24


@pytest.mark.parametrize("name, fused", [("Commuted", SDPA), ("Scale", SDPA), ("Unscaled", SDPA),
                                         ("CausalSsoftmax", SDPA), ("CausalUnscaled", SDPA), ("MQA", SDPA),
                                         ("GQA", SDPA), ("Linear", P.causal_linear)])
def test_fast_paths_fire_and_agree_with_the_unfused_module(name, fused):
    fast, slow = pair(name)
    assert fused in targets(fast) and fused not in targets(slow)
    assert torch.einsum not in targets(fast) and P.causal not in targets(fast)  # no [s, s] matrix, no mask
    x = torch.randn(2, 9, 6, dtype=F64)
    grads = []
    for m in (fast, slow):
        xg = x.clone().requires_grad_(True)
        y = m(xg)
        (y * torch.linspace(-1, 1, y.numel(), dtype=F64).reshape(y.shape)).sum().backward()
        grads.append(xg.grad)
    assert rel_norm(fast(x), slow(x)) < 1e-12
    assert rel_norm(*grads) < 1e-10


def test_causal_sdpa_ignores_the_future():
    fast, _ = pair("CausalUnscaled")
    x = torch.randn(7, 6, dtype=F64)
    x2 = x.clone()
    x2[4:] = torch.randn(3, 6, dtype=F64)
    assert torch.equal(fast(x)[:4], fast(x2)[:4])


def test_multi_query_attention_is_sdpa_and_agrees_with_a_hand_written_reference():
    fast, _ = pair("MQA")
    (call,) = [n for n in fast.graph.nodes if n.target is SDPA]
    assert call.kwargs["scale"] == 0.5 and not call.kwargs["is_causal"]
    x = torch.randn(2, 8, 6, dtype=F64)
    q = lin(fast.MQ, x).unflatten(-1, (3, 4))                    # [b, s, h, k]
    k, v = lin(fast.MK, x), lin(fast.MV, x)                      # [b, s, k]: one head
    e = torch.einsum("biaf,bjf->baij", q, k) / 2.0
    o = torch.einsum("baij,bjc->biac", torch.softmax(e, -1), v)  # [b, s, h, k]
    assert rel_norm(fast(x), lin(fast.MO, o.flatten(-2))) < 1e-12


def test_grouped_query_attention_is_causal_sdpa_and_agrees_with_a_hand_written_reference():
    fast, _ = pair("GQA")
    (call,) = [n for n in fast.graph.nodes if n.target is SDPA]
    assert call.kwargs["is_causal"]
    x = torch.randn(2, 8, 6, dtype=F64)
    q = lin(fast.GQ, x).unflatten(-1, (2, 3, 4))                 # [b, s, g, r, k]
    k, v = (lin(m, x).unflatten(-1, (2, 4)) for m in (fast.GK, fast.GV))  # [b, s, g, k]
    e = torch.einsum("ziarf,zjaf->zarij", q, k) / 2.0
    e = e.masked_fill(~torch.ones(8, 8, dtype=torch.bool).tril(), -math.inf)
    o = torch.einsum("zarij,zjac->ziarc", torch.softmax(e, -1), v)
    assert rel_norm(fast(x), lin(fast.GO, o.flatten(-3))) < 1e-12


def test_the_lowering_names_no_attention_process_outside_the_primitive_table():
    """softmax, elu and the fused processes are entries of table.py; the rest of the
    compiler dispatches by name and never matches one by hand. banded.py is the window
    primitives' kernel: it computes a softmax (torch's, or fused SDPA), it dispatches on no name."""
    for path in sorted(LOWER.glob("*.py")):
        if path.name in ("table.py", "banded.py"):
            continue
        tree = ast.parse(path.read_text())
        docs = {id(n.body[0].value) for n in ast.walk(tree)
                if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef)) and n.body
                and isinstance(n.body[0], ast.Expr)}
        for node in ast.walk(tree):
            text = node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else \
                getattr(node, "id", None) or getattr(node, "attr", None) or ""
            if id(node) in docs:
                continue
            assert not re.search(r"(^|[^a-z])(softmax|elu|sdpa)", text.lower()), (path.name, text)


# == chunked causal linear attention ===========================================================
def naive(q, k, v=None):
    e = (q @ k.transpose(-1, -2)).tril()
    return e @ v if v is not None else e.sum(-1)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(s=st.integers(1, 300), chunk=st.integers(1, 140), f=st.integers(1, 5), e=st.integers(1, 4),
       heads=st.sampled_from([(), (1,), (3,), (2, 1)]), values=st.booleans(), seed=st.integers(0, 2**16))
def test_chunked_causal_linear_attention_is_the_quadratic_form(s, chunk, f, e, heads, values, seed):
    """Any length (a multiple of the chunk or not), chunk sizes above and below it, leading
    axes that broadcast (keys and values with fewer heads), with values or the normaliser."""
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(2, *heads, s, f, generator=gen, dtype=F64)
    k = torch.randn(2, *[1] * len(heads), s, f, generator=gen, dtype=F64)
    v = torch.randn(2, *[1] * len(heads), s, e, generator=gen, dtype=F64) if values else None
    ref = naive(q, k, v)
    for c in (chunk, None):
        out = P.causal_linear(q, k, v, c)
        assert out.shape == ref.shape
        assert (out - ref).abs().max() <= 1e-12 * max(ref.abs().max().item(), 1.0)


class Count(TorchFunctionMode):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.calls += 1
        return func(*args, **(kwargs or {}))


def test_chunked_causal_linear_attention_has_no_loop_over_the_sequence():
    counts = []
    for s in (1000, 10_000, 100_000):  # none a multiple of the chunk
        q, k, v = torch.randn(1, s, 4), torch.randn(1, s, 4), torch.randn(1, s, 3)
        with Count() as c:
            P.causal_linear(q, k, v)
        counts.append(c.calls)
    assert counts[0] == counts[1] == counts[2], counts


def test_a_definition_is_rewritten_once_and_left_as_it_was():
    p = stringdiag.loads(SRC + "diagram Two(x: [s, d]) -> [s, d] {\n  return Commuted(Commuted(x))\n}\n", "two.diag")
    before = p["Commuted"].canonical_hash()
    m = compile(p["Two"], dims=DIMS, approximator="linear")
    assert sum(n.target is SDPA for n in m.graph.nodes) == 2
    assert p["Commuted"].canonical_hash() == before


@pytest.mark.parametrize("name, fused, count", [("M1", SDPA, 1), ("M0", P.causal_linear, 1)])
def test_attention_split_between_definitions_is_fused(name, fused, count):
    """M1's softmax is in AttPrep, its values in AttApply: the rule matches once expanded.
    M0's numerator and normaliser are one pass of the chunked kernel (causal_linear_pair)."""
    prog = stringdiag.load(Path(__file__).resolve().parents[1] / "gallery" / "anatomy.diag")
    m = compile(prog[name], dims={"d": 6, "k": 4})
    assert sum(n.target is fused for n in m.graph.nodes) == count


# == the fixed cost of a call ========================================================================
@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.integers(0, 3), max_size=4), min_size=1, max_size=4))
def test_broadcast_shape_is_torchs(shapes):
    """``primitives.broadcast_shape`` (plain Python, for the call's fixed cost) is
    ``torch.broadcast_shapes``: the same shape, or the same refusal."""
    shapes = [tuple(s) for s in shapes]
    try:
        want = tuple(torch.broadcast_shapes(*shapes))
    except RuntimeError:
        with pytest.raises(RuntimeError):
            P.broadcast_shape(shapes)
        return
    assert P.broadcast_shape(shapes) == want


def test_a_compiled_call_keeps_a_single_batch_axis_as_it_is():
    """One batch axis, as given: no reshape in and out (a fixed cost of every call); several
    are folded into one and restored."""
    p = stringdiag.loads("dim s : seq\ndim d : fixed\ndiagram Id(x: [s, d]) -> [s, d] {\n  y = x * 2\n  return y\n}", "id.diag")
    gm = compile(p["Id"], dims={"d": 3})
    x = torch.randn(2, 5, 3)
    assert torch.equal(gm(x), 2 * x) and torch.equal(gm(x.view(1, 2, 5, 3)), 2 * x.view(1, 2, 5, 3))
    assert torch.equal(gm(x[0]), 2 * x[0])
