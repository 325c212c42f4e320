"""A user's ``scan`` compiled through its chunked form (issue 23): a scan written the natural way,
``S' = a S + k v^T`` read out ``q^T S'``, is recognised by the recurrence laws, rewritten to its
parallel form and fused to one pass over blocks (``lower/scans.py``), and ``info`` and ``compile``
say so. The reference is a step-by-step loop written here in float64 from the recurrence; a
gate with no chunked kernel (per key channel), a scan whose final state is read, and
``fast=False`` keep the loop.
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import stringdiag
from stringdiag import compile
from stringdiag.cli.main import main
from stringdiag.lower import primitives as P
from stringdiag.lower.chunked import causal_decay_linear
from helpers import rel_max

F64 = torch.float64
DIMS = {"dm": 4, "dk": 3}

SSM = """\
dim T : seq
dim dm, dk : fixed
learn Wq, Wk : [dm] -> [dk] via linear(bias = false)
learn Wv : [dm] -> [dm] via linear(bias = false)
learn Wa : [dm] -> [] via linear
diagram Step(state: [dk, dm], query: [dk], key: [dk], value: [dm], logdecay: []) -> [dk, dm], [dm] {
  next[r, c] = UPDATE
  out[c] = sum_r query[r] * next[r, c]
  return next, out
}
diagram MySSM(h: [T, dm]) -> [T, dm] {
  la = 0 - softplus(Wa(h))
  z1 = zeros<dk>()
  z2 = zeros<dm>()
  init[r, c] = z1[r] * z2[c]
  final, o[t] = scan Step(init, Wq(h)[t], Wk(h)[t], Wv(h)[t], la[t])
  return RESULT
}
"""
UPDATES = ["exp(logdecay) * state[r, c] + key[r] * value[c]", "key[r] * value[c] + state[r, c] * exp(logdecay)"]
LINEAR_UPDATE = "state[r, c] + key[r] * value[c]"


def program(update: str, result: str = "o"):
    src = SSM.replace("UPDATE", update).replace("RESULT", result)
    if "logdecay" not in update:  # no gate: the cell reads q, k, v only
        src = src.replace(", logdecay: []", "").replace(", la[t])", ")")
    if "final" in result:
        src = src.replace("MySSM(h: [T, dm]) -> [T, dm]", "MySSM(h: [T, dm]) -> [T, dm], [dk, dm]")
    return stringdiag.loads(src, "myssm.diag")


def loop(module, h, decay: bool):
    """The recurrence step by step: S_t = a_t S_{t-1} + k_t v_t^T, y_t = q_t^T S_t."""
    w = dict(module.named_children())
    q, k, v = (h @ w[n].weight.T for n in ("Wq", "Wk", "Wv"))
    a = torch.exp(-F.softplus(h @ w["Wa"].weight.T + w["Wa"].bias))[..., 0] if decay else torch.ones(h.shape[:-1])
    S = torch.zeros(h.shape[0], q.shape[-1], v.shape[-1], dtype=h.dtype)
    ys = []
    for t in range(h.shape[1]):
        S = a[:, t, None, None] * S + k[:, t, :, None] * v[:, t, None, :]
        ys.append(torch.einsum("bf,bfe->be", q[:, t], S))
    return torch.stack(ys, dim=1)


def targets(gm) -> list:
    return [n.target for n in gm.graph.nodes if n.op == "call_function"]


@pytest.mark.parametrize("update", UPDATES)
def test_a_decayed_scan_compiles_to_the_chunked_kernel_and_is_the_loop(update):
    torch.manual_seed(0)
    gm = compile(program(update)["MySSM"], dims=DIMS, dtype=F64)
    assert [(c.cell, c.law, c.kernel) for c in gm.chunked_scans] == [("Step", "scan_log_gate", "causal_decay_attention")]
    assert causal_decay_linear in targets(gm) and P.scan not in targets(gm)
    h = torch.randn(2, 150, 4, dtype=F64, requires_grad=True)  # more than two blocks of 64
    y = gm(h)
    want = loop(gm, h, decay=True)
    assert rel_max(y.detach(), want.detach()) < 1e-12
    g1, = torch.autograd.grad(y.pow(2).sum(), h)
    g2, = torch.autograd.grad(want.pow(2).sum(), h)
    assert rel_max(g1, g2) < 1e-10


def test_a_linear_scan_compiles_to_causal_linear_attention_and_is_the_loop():
    torch.manual_seed(1)
    gm = compile(program(LINEAR_UPDATE)["MySSM"], dims=DIMS, dtype=F64)
    assert [(c.law, c.kernel) for c in gm.chunked_scans] == [("scan_prefix", "causal_linear_attention")]
    assert P.causal_linear in targets(gm) and P.scan not in targets(gm)
    h = torch.randn(3, 300, 4, dtype=F64)
    assert rel_max(gm(h), loop(gm, h, decay=False)) < 1e-12


def test_the_slow_path_and_the_scans_without_a_kernel_keep_their_loop():
    torch.manual_seed(2)
    slow = compile(program(UPDATES[0])["MySSM"], dims=DIMS, dtype=F64, fast=False)
    assert slow.chunked_scans == [] and P.scan in targets(slow)
    h = torch.randn(2, 9, 4, dtype=F64)
    assert rel_max(slow(h), loop(slow, h, decay=True)) < 1e-12
    # the final state is read: the loop computes it, so the loop stays
    kept = compile(program(UPDATES[0], "o, final")["MySSM"], dims=DIMS, dtype=F64)
    assert kept.chunked_scans == [] and P.scan in targets(kept)
    # a gate per key channel: its parallel form is O(s^2), no chunked kernel takes it
    src = SSM.replace("logdecay: []", "logdecay: [dk]").replace("Wa : [dm] -> []", "Wa : [dm] -> [dk]")
    gla = stringdiag.loads(src.replace("UPDATE", "exp(logdecay[r]) * state[r, c] + key[r] * value[c]")
                           .replace("RESULT", "o"), "gla.diag")
    per_channel = compile(gla["MySSM"], dims=DIMS, dtype=F64)
    assert per_channel.chunked_scans == [] and P.scan in targets(per_channel)


def test_info_and_compile_say_the_chunked_form_was_chosen(tmp_path, capsys):
    path = tmp_path / "myssm.diag"
    path.write_text(SSM.replace("UPDATE", UPDATES[1]).replace("RESULT", "o"))
    assert main(["info", str(path), "-d", "MySSM"]) == 0
    info = capsys.readouterr().out
    assert "time:   O(T·dm^2 + T·dk·dm)" in info  # the loop's cost, as written
    line = next(x for x in info.splitlines() if x.startswith("compiled:"))
    assert "myssm.diag:16:22: scan Step" in line and "scan Step compiled through its chunked form" in line
    assert "scan_log_gate, then causal_decay_attention" in line and "over m blocks of c positions, T = m·c" in line
    assert "time O(c^2·dk·dm·m)" in line
    assert main(["compile", str(path), "-d", "MySSM", "--dims", "dm=4,dk=3"]) == 0
    out = capsys.readouterr().out
    assert "scan Step compiled through its chunked form" in out and "causal_decay_linear" in out
    assert "primitives_scan" not in out


def test_the_linear_rnn_of_the_gallery_is_one_pass_for_numerator_and_normaliser():
    """Two scans (the state and the running key sum) become the two parallel forms, their masks
    one mask, and the fast path computes both in one chunked pass (causal_linear_pair)."""
    from pathlib import Path

    prog = stringdiag.load(Path(__file__).resolve().parents[1] / "gallery" / "recurrent.diag")
    torch.manual_seed(3)
    gm = compile(prog["LinearRNN"], dims={"d": 5, "k": 3}, dtype=F64, approximator="linear")
    assert [c.law for c in gm.chunked_scans] == ["scan_prefix", "scan_prefix_normaliser"]
    assert targets(gm).count(P.causal_linear) == 1 and P.scan not in targets(gm)
    x = torch.randn(2, 200, 5, dtype=F64)
    w = dict(gm.named_children())
    q, k = (F.elu(x @ w[n].weight.T + w[n].bias) + 1 for n in ("Q", "K"))
    v = x @ w["V"].weight.T + w["V"].bias
    S, z, ys = torch.zeros(2, 3, 5, dtype=F64), torch.zeros(2, 3, dtype=F64), []
    for t in range(x.shape[1]):  # Katharopoulos et al. eq. 18-20, step by step
        S = S + k[:, t, :, None] * v[:, t, None, :]
        z = z + k[:, t]
        ys.append(torch.einsum("bf,bfe->be", q[:, t], S) / (q[:, t] * z).sum(-1, keepdim=True))
    assert rel_max(gm(x), torch.stack(ys, dim=1)) < 1e-12
