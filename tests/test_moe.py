"""Routing (issue 22): ``topk`` with indices typed ``[k] of n``, ``gather`` by those indices, and
``moe_swiglu``, a sparse mixture of experts that runs only the chosen experts. Each against
torch in float64 (values and gradients); the compiled module is shown to skip the unchosen
experts (their weights poisoned with NaN change nothing); the cost counts the k chosen
experts, not the n; indices are kept apart from real numbers with positioned errors that name
``gather``."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

import stringdiag
from stringdiag import DiagError
from stringdiag.analysis.complexity import analyse
from stringdiag.lower.lower import compile

HEAD = "dim s : seq\ndim d, n, f, k, m : fixed\n"
SRC = HEAD + """
diagram Top(x: [s, n]) -> [s, k], [s, k, m] {
  learn T : -> [n, m]
  v[i], ids[i] = topk<k>(x[i])
  g[i, j] = gather(ids[i, j], T())
  return v, g
}

# topk along the first axis: an index picks the other one, as for softmax
diagram TopCols(x: [n, s]) -> [k, s] {
  v[i], ids[i] = topk<k>(x[:, i])
  y[j, i] = v[i, j]
  return y
}

diagram Moe(x: [s, d]) -> [s, d] {
  learn router : -> [n, d]
  learn wg, wu : -> [n, f, d]
  learn wd : -> [n, d, f]
  l[i, e] = sum_a x[i, a] * router()[e, a]
  v[i], ids[i] = topk<k>(l[i])
  w = softmax(v)
  y[i] = moe_swiglu(x[i], ids[i], w[i], wg(), wu(), wd())
  return y
}

# every expert on every token, the unchosen ones weighted 0: the cost a router avoids
diagram Dense(x: [s, d], p: [s, n]) -> [s, d] {
  learn wg, wu : -> [n, f, d]
  learn wd : -> [n, d, f]
  hg[i, e, b] = sum_a wg()[e, b, a] * x[i, a]
  hu[i, e, b] = sum_a wu()[e, b, a] * x[i, a]
  h = hg * sigmoid(hg) * hu
  y[i, a] = sum_{e, b} p[i, e] * wd()[e, a, b] * h[i, e, b]
  return y
}
"""
SIZES = {"d": 6, "n": 5, "f": 4, "k": 2, "m": 3}


def prog():
    return stringdiag.loads(SRC, "moe.diag")


def params(m) -> dict[str, torch.Tensor]:
    """The compiled module's parameters by the name of their learnable box."""
    return {name.split(".")[0]: t for name, t in m.named_parameters()}


def x_(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))


def grads(y: torch.Tensor, wrt: list[torch.Tensor]) -> list[torch.Tensor]:
    probe = torch.linspace(-1, 1, y.numel(), dtype=y.dtype).reshape(y.shape)
    return list(torch.autograd.grad((y * probe).sum(), wrt))


def test_topk_and_gather_are_torch_topk_and_indexing():
    m = compile(prog()["Top"], dims=SIZES, dtype=torch.float64)
    x = x_(3, 7, 5).requires_grad_(True)
    v, g = m(x)
    table = params(m)["T"]
    rv, ri = torch.topk(x, 2, dim=-1)
    assert torch.equal(v, rv)
    assert torch.equal(g, table[ri])
    for a, b in zip(grads(v + g.sum(-1), [x, table]), grads(rv + table[ri].sum(-1), [x, table])):
        assert torch.allclose(a, b, rtol=0, atol=1e-14)


def test_an_index_picks_the_axis_topk_chooses_along():
    m = compile(prog()["TopCols"], dims=SIZES, dtype=torch.float64)
    x = x_(2, 5, 7)
    assert torch.equal(m(x), torch.topk(x, 2, dim=-2).values)


def moe_reference(x, router, wg, wu, wd, k):
    """Mixtral's block by hand: softmax over the k largest logits, the chosen SwiGLU experts."""
    v, ids = torch.topk(x @ router.T, k, dim=-1)
    w = torch.softmax(v, dim=-1)
    out = torch.zeros_like(x)
    for j in range(k):
        e = ids[..., j]
        h = F.silu(torch.einsum("...d,...fd->...f", x, wg[e])) * torch.einsum("...d,...fd->...f", x, wu[e])
        out = out + w[..., j, None] * torch.einsum("...f,...df->...d", h, wd[e])
    return out


@pytest.mark.parametrize("native", [True, False])
def test_moe_agrees_with_a_hand_written_reference_forward_and_backward(native):
    """native: tokens grouped by expert (the compiler's kernel); not: the prelude's body, which
    gathers each chosen expert's weights."""
    torch.manual_seed(0)
    m = compile(prog()["Moe"], dims=SIZES, dtype=torch.float64, native=native)
    p = params(m)
    x = x_(2, 9, 6).requires_grad_(True)
    y, ref = m(x), moe_reference(x, p["router"], p["wg"], p["wu"], p["wd"], 2)
    assert (y - ref).abs().max() < 1e-13
    wrt = [x, *p.values()]
    for a, b in zip(grads(y, wrt), grads(ref, wrt)):
        assert (a - b).abs().max() < 1e-12


@pytest.mark.parametrize("native", [True, False])
def test_unchosen_experts_never_run(native):
    """An expert no token chooses, its weights NaN: a dense mixture (weight 0 times NaN) would be
    NaN everywhere; the routed one is finite and exact, and that expert gets no gradient."""
    torch.manual_seed(1)
    m = compile(prog()["Moe"], dims=SIZES, dtype=torch.float64, native=native)
    p = params(m)
    with torch.no_grad():
        p["router"][-1] = -100.0  # with x > 0, expert n - 1's logit is the smallest on every token
        for w in ("wg", "wu", "wd"):
            p[w][-1] = math.nan
    x = x_(2, 9, 6).abs() + 0.1
    y = m(x)
    assert torch.isfinite(y).all()
    clean = {name: t.detach().nan_to_num(0.0) for name, t in p.items()}
    assert (y - moe_reference(x, clean["router"], clean["wg"], clean["wu"], clean["wd"], 2)).abs().max() < 1e-13
    y.sum().backward()
    assert all(torch.equal(p[w].grad[-1], torch.zeros_like(p[w].grad[-1])) for w in ("wg", "wu", "wd"))


def test_the_kernel_runs_each_chosen_expert_once_on_its_tokens(monkeypatch):
    """The native kernel's products: three per expert some token chose, each over exactly the
    (token, slot) pairs routed to it: s·k rows in all, never s·n."""
    calls = []
    real = F.linear
    monkeypatch.setattr(F, "linear", lambda a, w, *r: calls.append(a.shape[0]) or real(a, w, *r))
    m = compile(prog()["Moe"], dims=SIZES, dtype=torch.float64)
    x = x_(1, 9, 6)
    m(x)
    ids = torch.topk(x[0] @ params(m)["router"].T, 2, dim=-1).indices
    chosen = torch.bincount(ids.flatten(), minlength=5)
    assert sorted(calls) == sorted(3 * [c for c in chosen.tolist() if c])
    assert sum(calls) == 3 * 9 * 2


def test_the_cost_counts_the_chosen_experts_not_all():
    sparse, dense = analyse(prog()["Moe"]), analyse(prog()["Dense"])
    terms = sparse.time.split(" + ")
    assert "s·d·f·k" in terms, sparse.time
    assert not any("s" in t.split("·") and "n" in t.split("·") and "f" in t.split("·") for t in terms), sparse.time
    assert "s·d·f·n" in dense.time.split(" + "), dense.time


@pytest.mark.parametrize("body, line, col, message", [
    ("  z[i] = sum_j ids[i, j] * v[i, j]\n  return z",
     5, 16, "a sum multiplies real numbers, but this factor is indices ([] of n); read them with gather(ids, table)"),
    ("  return v + ids",
     5, 10, "input 2 of '+' takes real numbers ([]) but is given indices ([s, k] of n); turn indices into vectors "
            "with gather(ids, table)"),
    ("  learn F : [k] -> []\n  return F(ids)",
     6, 12, "input 1 of 'F' takes real numbers ([k]) but is given indices ([s, k] of n); turn indices into vectors "
            "with gather(ids, table)"),
    ("  learn T : -> [n, 3]\n  g = gather(v, T())\n  return v",
     6, 14, "input 1 of 'gather' takes token ids ([] of n) but is given real numbers ([s, k]); token ids enter as "
            "a diagram input typed [s] of v, indices as topk's second output"),
    ("  learn T : -> [d, 3]\n  g = gather(ids, T())\n  return v",
     6, 19, "input 2 of 'gather' must have type [n, m] but has type [d, 3]"),
])
def test_indices_used_as_numbers_are_refused_naming_gather(body, line, col, message):
    src = HEAD + f"diagram B(x: [s, n]) -> [s] {{\n  v[i], ids[i] = topk<k>(x[i])\n{body}\n}}\n"
    with pytest.raises(DiagError) as e:
        stringdiag.loads(src, "b.diag")["B"]
    assert message in e.value.message
    assert (e.value.pos.line, e.value.pos.col) == (line, col)


def test_a_diagram_takes_indices_as_an_input_typed_of_n():
    src = HEAD + """diagram Pick(ids: [k] of n, t: [n, m]) -> [k, m] {
  g[j] = gather(ids[j], t)
  return g
}
diagram B(x: [s, n]) -> [s, k, m] {
  learn T : -> [n, m]
  v[i], ids[i] = topk<k>(x[i])
  y[i] = Pick(ids[i], T())
  return y
}
"""
    m = compile(stringdiag.loads(src, "b.diag")["B"], dims=SIZES, dtype=torch.float64)
    x = x_(4, 5)
    assert torch.equal(m(x), params(m)["T"][torch.topk(x, 2, dim=-1).indices])


def test_indices_keep_their_range_through_a_transpose():
    src = HEAD + """diagram B(x: [s, n]) -> [k, s, m] {
  learn T : -> [n, m]
  v[i], ids[i] = topk<k>(x[i])
  t[j, i] = ids[i, j]
  y[j, i] = gather(t[j, i], T())
  return y
}
"""
    m = compile(stringdiag.loads(src, "b.diag")["B"], dims=SIZES, dtype=torch.float64)
    x = x_(4, 5)
    assert torch.equal(m(x), params(m)["T"][torch.topk(x, 2, dim=-1).indices.T])


TOPK_ATTENTION = HEAD + """# each query reads only its k best keys (top-k attention, Gupta et al. 2021)
diagram TopKAttention(q: [s, d], x: [s, d]) -> [s, d] {
  e[i, j] = sum_a q[i, a] * x[j, a]
  v[i], ids[i] = topk<k>(e[i])
  w = softmax(v)
  y[i] = sum_j w[i, j] * gather(ids[i, j], x)
  return y
}
"""


def test_topk_over_a_sequence_axis_top_k_attention():
    """n is the sequence length here, known only at run time: k is checked then."""
    m = compile(stringdiag.loads(TOPK_ATTENTION, "t.diag")["TopKAttention"], dims=SIZES, dtype=torch.float64)
    q, x = x_(3, 7, 6, seed=1).requires_grad_(True), x_(3, 7, 6, seed=2).requires_grad_(True)
    v, ids = torch.topk(q @ x.transpose(-1, -2), 2, dim=-1)
    ref = torch.einsum("bij,bijd->bid", torch.softmax(v, -1), torch.stack([x[b][ids[b]] for b in range(3)]))
    y = m(q, x)
    assert (y - ref).abs().max() < 1e-14
    for a, b in zip(grads(y, [q, x]), grads(ref, [q, x])):
        assert (a - b).abs().max() < 1e-13
    with pytest.raises(DiagError, match=r"topk<2> needs at most as many entries as it chooses from, but the axis has 1"):
        m(q[:, :1], x[:, :1])
    # the scores are all computed (s^2·d); the values read, k per query (s·d·k), not s per query
    assert analyse(stringdiag.loads(TOPK_ATTENTION, "t.diag")["TopKAttention"]).time == "s^2·d + s·d·k"


def test_topk_choosing_more_than_there_are_is_refused_when_compiling():
    with pytest.raises(DiagError, match=r"topk<6> chooses 6 entries from an axis of 5 at these sizes; give k <= n"):
        compile(prog()["Top"], dims={**SIZES, "k": 6}, dtype=torch.float64)


def test_cli_check_reports_an_index_used_as_a_number_without_a_traceback(tmp_path, capsys):
    from stringdiag.cli.main import main

    path = tmp_path / "b.diag"
    path.write_text(HEAD + "diagram B(x: [s, n]) -> [s, k] {\n  v[i], ids[i] = topk<k>(x[i])\n  return ids * v\n}\n")
    assert main(["check", str(path)]) == 1
    err = capsys.readouterr().err
    assert f"{path}:5:10: error: input 1 of '*' takes real numbers" in err and "gather(ids, table)" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("name, instead", [
    ("argmax", "topk<1>(x) gives the largest entry and its index"),
    ("index_select", "gather(ids, table) picks rows by index"),
    ("scatter", "moe_swiglu(x, ids, w, ...), or as a sum over the chosen ones"),
    ("route", "moe_swiglu(x, ids, w, ...), or as a sum over the chosen ones"),
])
def test_torch_names_for_routing_point_to_the_construct_that_works(name, instead):
    """Not difflib's nearest name (scatter is not scale, route not rope)."""
    with pytest.raises(DiagError, match=r"undefined box") as e:
        stringdiag.loads(HEAD + f"diagram B(x: [s, n]) -> [s, n] {{\n  return {name}(x)\n}}\n", "b.diag")["B"]
    assert instead in e.value.message and "did you mean" not in e.value.message
