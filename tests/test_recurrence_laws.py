"""Recurrent, parallel and chunked forms (issue 23): rules/recurrence.rules, the gallery's
derivations between the forms, and the chunked kernels the compiler lowers them to.

Each law's two sides are compiled from the rule and compared with a loop written here in
float64 from the recurrence itself, S_t = a_t S_{t-1} + k_t v_t^T, y_t = q_t^T S_t (the
independent reference); the oracle's verdict on every law (``check --verify``) is asserted
rule by rule. The four gallery derivations run with ``--verify``, change the cost in s as
they claim, and pass through the forms they name. A gated linear attention written by
someone else (other names, the gate a sigmoid computed outside the cell, per channel)
becomes its parallel form by ``apply`` in a ``.deriv`` of its own, verified, and equal to
GLA's parallel form written by hand. The chunked decay kernel is the recurrence for any
length and block size, gradients included; the fast paths put it, and causal linear
attention's one pass, in the compiled modules.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import stringdiag
from stringdiag import compile
from stringdiag.analysis.complexity import analyse
from stringdiag.cli.main import main
from stringdiag.derive.derivation import EQ, load_derivation
from stringdiag.graph.expand import expand
from stringdiag.lower import primitives as P
from stringdiag.lower.chunked import causal_decay_linear
from stringdiag.rewrite.rule import RULES_DIR, load_rules
from helpers import rel_max

F64 = torch.float64
ROOT = Path(__file__).resolve().parents[1]
GALLERY = ROOT / "gallery"
RULES = RULES_DIR / "recurrence.rules"
LAWS = {r.name: r for r in load_rules(RULES)}


def recurrence(q, k, v, a):
    """y_t = q_t^T S_t, S_t = a_t * S_{t-1} + k_t v_t^T from S_0 = 0; ``a`` broadcasts against
    S ([..., f, e]): a scalar per step [..., s, 1, 1] or per key channel [..., s, f, 1]."""
    S = torch.zeros(*q.shape[:-2], q.shape[-1], v.shape[-1], dtype=q.dtype)
    ys = []
    for t in range(q.shape[-2]):
        S = a[..., t, :, :] * S + k[..., t, :, None] * v[..., t, None, :]
        ys.append((q[..., t, :, None] * S).sum(-2))
    return torch.stack(ys, dim=-2)


def sides(name, dims):
    """The law's two sides compiled: the left as written (its scan a loop: without the fast paths,
    which would take it through this very law), the right with them."""
    r = LAWS[name]
    return compile(r.lhs, dims=dims, dtype=F64, fast=False), compile(r.rhs, dims=dims, dtype=F64)


N, FK, E = 7, 3, 4
DIMS = {"n": N, "f": FK, "e": E}


def qkv(*lead):
    g = torch.Generator().manual_seed(3)
    return (torch.randn(*lead, N, FK, generator=g, dtype=F64), torch.randn(*lead, N, FK, generator=g, dtype=F64),
            torch.randn(*lead, N, E, generator=g, dtype=F64))


# == the laws ===================================================================================
def test_every_law_verifies_numerically(capsys):
    assert main(["check", str(RULES), "--verify"]) == 0
    out = capsys.readouterr().out
    assert set(LAWS) == {"scan_prefix", "scan_prefix_normaliser", "scan_decay", "scan_gate", "scan_gate_channels",
                         "scan_log_gate", "scan_log_gate_channels", "blocks_decay", "chunk_sum", "chunk_decay",
                         "chunk_log_gate", "chunk_segsum", "chunk_segsum_channels"}
    for name, r in LAWS.items():
        assert r.kind == "equation"
        (line,) = [ln for ln in out.splitlines() if ln.split()[:1] == [name]]
        # float64 rounding, summed over the oracle's longest draws (a cumulative sum of log gates)
        assert float(re.search(r"verified, relative error (\S+)$", line).group(1)) < 1e-10, line


@pytest.mark.parametrize("name, decay", [
    ("scan_prefix", lambda g: None),
    ("scan_decay", lambda g: torch.tensor([0.8, 0.5], dtype=F64)),
    ("scan_decay", lambda g: torch.tensor([-1.3, 2.0], dtype=F64)),  # any gamma: a power, not an exp
    ("scan_gate", lambda g: torch.randn(2, N, generator=g, dtype=F64)),  # any a_t, negative too
    ("scan_gate", lambda g: torch.tensor([1.5, 0.0, -2.0, 0.5, 1.0, 0.0, 3.0], dtype=F64).expand(2, N)),
    ("scan_gate_channels", lambda g: torch.randn(2, N, FK, generator=g, dtype=F64)),
    ("scan_log_gate", lambda g: torch.randn(2, N, generator=g, dtype=F64)),
    ("scan_log_gate_channels", lambda g: torch.randn(2, N, FK, generator=g, dtype=F64)),
])
def test_both_sides_of_a_scan_law_are_the_recurrence(name, decay):
    q, k, v = qkv(2)
    a = decay(torch.Generator().manual_seed(5))
    args = [q, k, v] + ([] if a is None else [a])
    if a is None:
        gate = torch.ones(2, N, 1, 1, dtype=F64)
    elif a.dim() == 1:  # one gamma per example
        gate = a[:, None, None, None].expand(2, N, 1, 1)
    else:
        gate = a[..., None, None] if a.dim() == 2 else a[..., None]
        gate = torch.exp(gate) if "log" in name else gate
    want = recurrence(q, k, v, gate)
    for m in sides(name, DIMS):
        assert rel_max(m(*args), want) < 1e-12


def test_the_normaliser_law_is_the_running_key_sum():
    q, k, _ = qkv(2)
    want = torch.einsum("bif,bif->bi", q, torch.cumsum(k, dim=-2))
    for m in sides("scan_prefix_normaliser", {"n": N, "f": FK}):
        assert rel_max(m(q, k), want) < 1e-12


@pytest.mark.parametrize("name", ["chunk_sum", "chunk_decay", "chunk_log_gate", "blocks_decay", "chunk_segsum",
                                  "chunk_segsum_channels"])
def test_both_sides_of_a_chunking_law_are_the_recurrence_over_the_flattened_sequence(name):
    m_, c = 3, 4
    g = torch.Generator().manual_seed(7)
    q, k = (torch.randn(2, m_, c, FK, generator=g, dtype=F64) for _ in range(2))
    v = torch.randn(2, m_, c, E, generator=g, dtype=F64)
    flat = [x.flatten(1, 2) for x in (q, k, v)]
    if name == "chunk_sum":
        extra, gate = [], torch.ones(2, m_ * c, 1, 1, dtype=F64)
    elif name in ("chunk_log_gate", "chunk_segsum"):
        la = torch.randn(2, m_, c, generator=g, dtype=F64)
        extra, gate = [la], torch.exp(la.flatten(1, 2))[..., None, None]
    elif name == "chunk_segsum_channels":  # a gate per key channel
        la = torch.randn(2, m_, c, FK, generator=g, dtype=F64)
        extra, gate = [la], torch.exp(la.flatten(1, 2))[..., None]
    else:
        gamma = torch.tensor([0.7, -1.2], dtype=F64)
        extra, gate = [gamma], gamma[:, None, None, None].expand(2, m_ * c, 1, 1)
    want = recurrence(*flat, gate).unflatten(1, (m_, c))
    for mod in sides(name, {"m": m_, "c": c, "f": FK, "e": E}):
        assert rel_max(mod(q, k, v, *extra), want) < 1e-12


def test_a_cell_that_is_not_affine_in_its_carry_is_not_matched():
    p = stringdiag.loads("""dim s : seq
dim k, d : fixed
diagram Cell(S: [k, d], q: [k], kk: [k], v: [d]) -> [k, d], [d] {
  S2[a, b] = tanh(S[a, b]) + kk[a] * v[b]
  y[b] = sum_a q[a] * S2[a, b]
  return S2, y
}
diagram NotLinear(q: [s, k], kk: [s, k], v: [s, d]) -> [s, d] {
  zk = zeros<k>()
  zd = zeros<d>()
  S0[a, b] = zk[a] * zd[b]
  _S, y[t] = scan Cell(S0, q[t], kk[t], v[t])
  return y
}""", "not_linear.diag")
    from stringdiag.rewrite.match import find_matches
    assert find_matches(p["NotLinear"], LAWS["scan_prefix"]) == []


# == the gallery's derivations ===================================================================
EXPECTED = {  # the relations, and the seq-time cost at every step
    "linear_rnn.deriv": (EQ * 3, ["s^2", "s^2", "s^2", "s"]),
    "gla.deriv": (EQ, ["s", "s^2"]),
    "ssd.deriv": (EQ, ["s", "s^2"]),
    "retnet.deriv": (EQ * 3, ["m", "m^2", "m^2", "m"]),
}


@pytest.fixture(scope="module")
def derivations():
    return {name: load_derivation(GALLERY / name, verify=True) for name in EXPECTED}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_derivation_verifies_and_changes_the_cost_in_s(derivations, name):
    d = derivations[name]
    relations, costs = EXPECTED[name]
    assert "".join(s.relation for s in d.steps[1:]) == relations
    assert all(s.verified is not None and s.verified < 1e-9 for s in d.steps[1:])
    assert [analyse(s.diagram).seq_time for s in d.steps] == costs
    assert expand(d.result).isomorphic(expand(d.target))


def test_retnet_passes_through_its_parallel_form(derivations):
    prog = stringdiag.load(GALLERY / "recurrent.diag")
    step1 = derivations["retnet.deriv"].steps[1].diagram
    assert expand(step1).isomorphic(expand(prog["RetentionParallel"]))


def test_the_retnet_forms_compute_retention_as_written_by_hand():
    """Sun et al. eq. 5 by hand, (Q K^T o D) V, against the three compiled forms."""
    prog = stringdiag.load(GALLERY / "recurrent.diag")
    dims = {"d": 5, "k": 3, "c": 4}
    torch.manual_seed(0)
    mods = [compile(prog[n], dims=dims, dtype=F64, approximator="linear")
            for n in ("RetentionRecurrent", "RetentionParallel", "RetentionChunkwise")]
    for m in mods[1:]:
        m.load_state_dict(mods[0].state_dict())
    x = torch.randn(2, 3, 4, 5, dtype=F64)
    xf = x.flatten(1, 2)
    lin = dict(mods[0].named_children())
    q, k, v = (xf @ lin[n].weight.T + lin[n].bias for n in ("Q", "K", "V"))
    i = torch.arange(12, dtype=F64)
    D = torch.where(i[:, None] >= i[None, :], 0.96875 ** (i[:, None] - i[None, :]).clamp(min=0), 0.0)
    want = ((q @ k.transpose(-1, -2)) * D @ v).unflatten(1, (3, 4))
    for m in mods:
        assert rel_max(m(x), want) < 1e-12


# == a gated linear attention written by someone else =============================================
OTHER = """\
# A gated linear attention as a colleague wrote it (Yang et al. (2024), eq. 3): a sigmoid gate
# per key channel computed outside the cell, the cell the recurrence itself.
dim T : seq
dim dm, dk : fixed
learn Wq, Wk : [dm] -> [dk] via linear(bias = false)
learn Wv : [dm] -> [dm] via linear(bias = false)
learn Wg : [dm] -> [dk] via linear
diagram GLACell(state: [dk, dm], query: [dk], key: [dk], value: [dm], gate: [dk]) -> [dk, dm], [dm] {
  next[r, c] = gate[r] * state[r, c] + key[r] * value[c]
  out[c] = sum_r query[r] * next[r, c]
  return next, out
}
diagram MyGLA(h: [T, dm]) -> [T, dm] {
  alpha = sigmoid(Wg(h))
  z1 = zeros<dk>()
  z2 = zeros<dm>()
  init[r, c] = z1[r] * z2[c]
  _final, o[t] = scan GLACell(init, Wq(h)[t], Wk(h)[t], Wv(h)[t], alpha[t])
  return o
}
"""


def test_someone_elses_gated_linear_attention_becomes_its_parallel_form(tmp_path):
    (tmp_path / "mygla.diag").write_text(OTHER)
    (tmp_path / "mygla.deriv").write_text("start mygla.diag:MyGLA\napply scan_gate_channels\n")
    assert main(["derive", str(tmp_path / "mygla.deriv"), "--verify"]) == 0
    d = load_derivation(tmp_path / "mygla.deriv", verify=True)
    assert d.steps[1].relation == EQ and d.steps[1].verified < 1e-9
    assert [analyse(s.diagram).seq_time for s in d.steps] == ["T", "T^2"]
    # the result computes GLA's parallel form as Yang et al. write it, by hand
    torch.manual_seed(1)
    before = compile(d.steps[0].diagram, dims={"dm": 5, "dk": 3}, dtype=F64)
    after = compile(d.result, dims={"dm": 5, "dk": 3}, dtype=F64)
    after.load_state_dict(before.state_dict())
    x = torch.randn(2, 6, 5, dtype=F64)
    w = dict(before.named_children())
    q, k, v = (x @ w[n].weight.T for n in ("Wq", "Wk", "Wv"))
    alpha = torch.sigmoid(x @ w["Wg"].weight.T + w["Wg"].bias)
    b = torch.cumprod(alpha, dim=1)  # b_t = prod_{u <= t} alpha_u (Yang et al. eq. 4)
    scores = torch.einsum("bif,bjf->bij", q * b, k / b).tril()
    want = scores @ v
    assert rel_max(after(x), want) < 1e-10 and rel_max(before(x), want) < 1e-10



CELL_WRITINGS = [  # the same cell, its products' factors and its sum's terms in other orders
    ("value[c] * key[r] + state[r, c] * gate[r]", "next[r, c] * query[r]"),
    ("key[r] * value[c] + gate[r] * state[r, c]", "query[r] * next[r, c]"),
    ("state[r, c] * gate[r] + key[r] * value[c]", "next[r, c] * query[r]"),
]


@pytest.mark.parametrize("update, readout", CELL_WRITINGS)
def test_a_cell_written_in_another_order_becomes_its_parallel_form(tmp_path, update, readout):
    src = OTHER.replace("gate[r] * state[r, c] + key[r] * value[c]", update).replace(
        "sum_r query[r] * next[r, c]", f"sum_r {readout}")
    assert update in src and readout in src
    (tmp_path / "mygla.diag").write_text(src)
    (tmp_path / "mygla.deriv").write_text("start mygla.diag:MyGLA\napply scan_gate_channels\n")
    d = load_derivation(tmp_path / "mygla.deriv", verify=True)
    assert d.steps[1].relation == EQ and d.steps[1].verified < 1e-9
    assert [analyse(s.diagram).seq_time for s in d.steps] == ["T", "T^2"]
    torch.manual_seed(2)
    before = compile(d.steps[0].diagram, dims={"dm": 4, "dk": 3}, dtype=F64)
    after = compile(d.result, dims={"dm": 4, "dk": 3}, dtype=F64)
    after.load_state_dict(before.state_dict())
    x = torch.randn(2, 5, 4, dtype=F64)
    w = dict(before.named_children())
    q, k, v = (x @ w[n].weight.T for n in ("Wq", "Wk", "Wv"))
    alpha = torch.sigmoid(x @ w["Wg"].weight.T + w["Wg"].bias)
    want = recurrence(q, k, v, alpha[..., None])
    assert rel_max(after(x), want) < 1e-10 and rel_max(before(x), want) < 1e-10


def test_a_cell_with_another_update_is_still_not_matched():
    """Commuting the factors is all the matcher allows: a cell that subtracts is not GLA's."""
    src = OTHER.replace("gate[r] * state[r, c] + key[r] * value[c]", "gate[r] * state[r, c] - key[r] * value[c]")
    from stringdiag.rewrite.match import find_matches
    assert find_matches(stringdiag.loads(src, "x.diag")["MyGLA"], LAWS["scan_gate_channels"]) == []


# == the chunked kernels and the fast paths =======================================================
@settings(max_examples=25, deadline=None)
@given(s=st.integers(1, 40), chunk=st.integers(1, 17), seed=st.integers(0, 1000))
def test_chunked_decay_kernel_is_the_recurrence(s, chunk, seed):
    g = torch.Generator().manual_seed(seed)
    q, k = (torch.randn(2, s, 3, generator=g, dtype=F64) for _ in range(2))
    v = torch.randn(2, s, 4, generator=g, dtype=F64)
    l = -3 * torch.rand(2, s, generator=g, dtype=F64)
    want = recurrence(q, k, v, torch.exp(l)[..., None, None])
    assert rel_max(causal_decay_linear(q, k, v, l, chunk), want) < 1e-12


def test_chunked_decay_kernel_keeps_small_gates_beside_large_ones():
    """A decay over a range is the sum of its gates, never a difference of long running sums:
    with a gate of -1e9 before them, the gates of -1e-3 after it still decay the state."""
    s = 12
    q, k = torch.ones(1, s, 1, dtype=F64), torch.ones(1, s, 1, dtype=F64)
    v = torch.ones(1, s, 1, dtype=F64)
    l = torch.full((1, s), -1e-3, dtype=F64)
    l[0, 2] = -1e9
    want = recurrence(q, k, v, torch.exp(l)[..., None, None])
    assert rel_max(causal_decay_linear(q, k, v, l, 4), want) < 1e-12


def test_chunked_decay_kernel_gradients_match_the_recurrence():
    g = torch.Generator().manual_seed(2)
    xs = [torch.randn(1, 9, 3, generator=g, dtype=F64) for _ in range(2)] + \
         [torch.randn(1, 9, 2, generator=g, dtype=F64), -torch.rand(1, 9, generator=g, dtype=F64)]
    grads = []
    for f in (lambda q, k, v, l: causal_decay_linear(q, k, v, l, 4),
              lambda q, k, v, l: recurrence(q, k, v, torch.exp(l)[..., None, None])):
        ins = [x.clone().requires_grad_(True) for x in xs]
        f(*ins).pow(2).sum().backward()
        grads.append([x.grad for x in ins])
    for a, b in zip(*grads):
        assert rel_max(a, b) < 1e-11


def test_compiled_ssd_uses_the_chunked_kernel_and_is_the_recurrent_form():
    prog = stringdiag.load(GALLERY / "recurrent.diag")
    torch.manual_seed(0)
    fast = compile(prog["SSDAttention"], dims={"d": 5, "k": 3}, dtype=F64)
    slow = compile(prog["SSMRecurrent"], dims={"d": 5, "k": 3}, dtype=F64, fast=False)  # the loop
    slow.load_state_dict(fast.state_dict())
    assert any(n.target is P.scan for n in slow.graph.nodes)
    assert any(n.target is causal_decay_linear for n in fast.graph.nodes)
    assert not any(n.target is P.causal for n in fast.graph.nodes)  # no [s, s] mask
    x = torch.randn(2, 70, 5, dtype=F64)  # longer than one block
    assert rel_max(fast(x), slow(x)) < 1e-12


def test_causal_linear_attention_is_one_pass_and_agrees_with_the_quadratic_form():
    prog = stringdiag.load(GALLERY / "similarity.diag")
    torch.manual_seed(0)
    fast = compile(prog["CausalLinearAttention"], dims={"d": 5, "k": 3}, dtype=F64)
    slow = compile(prog["CausalLinearAttention"], dims={"d": 5, "k": 3}, dtype=F64, fast=False)
    slow.load_state_dict(fast.state_dict())
    calls = [n for n in fast.graph.nodes if n.target is P.causal_linear]
    assert len(calls) == 1  # numerator and normaliser in one pass
    x = torch.randn(2, 300, 5, dtype=F64)
    xg = [x.clone().requires_grad_(True) for _ in range(2)]
    ys = [m(xi) for m, xi in zip((fast, slow), xg)]
    assert rel_max(ys[0], ys[1]) < 1e-12
    for y in ys:
        y.pow(2).sum().backward()
    assert rel_max(xg[0].grad, xg[1].grad) < 1e-10
