"""Rules about scans match a cell whatever form the user writes it in: every order of the per-step
inputs of the gallery's GLA, RetNet and SSD cells, with the state's axes as the gallery writes them
and turned (``S[d, k]`` for ``S[k, d]``). Each form is written here as source text, apart from the
engine's own search over forms; the shipped rule finds the scan, the rewritten diagram is the
parallel form (GLA, SSD) or, through the rest of gallery/retnet.deriv's chain, the chunkwise form
(RetNet), and computes what the gallery's own recurrent form does (compiled, float64, the same
weights). SSD and GLA read in blocks reach their chunkwise forms (chunk_segsum, _channels) from
forms of their cells too. A rule whose cell has two per-step outputs matches a scan that writes them
the other way."""
from __future__ import annotations

import itertools
import re
from pathlib import Path

import numpy as np
import pytest
import torch

import stringdiag
from stringdiag.derive.derivation import load_derivation
from stringdiag.rewrite import find_matches, library, rewrite
from stringdiag.rewrite.rule import loads_rules

ROOT = Path(__file__).resolve().parents[1]
SRC = (ROOT / "gallery" / "recurrent.diag").read_text()
REC = stringdiag.loads(SRC, "recurrent.diag")
DIMS = {"d": 3, "k": 2, "c": 2}
# (diagram, its cell, the state's name, the rule, the parallel form, an input's shape)
CASES = [("GLARecurrent", "GLAStep", "S", "scan_log_gate_channels", "GLAParallel", (2, 6, 3)),
         ("RetentionRecurrent", "RetentionStep", "S", "scan_decay", None, (2, 3, 2, 3)),  # [m, c, d]
         ("SSMRecurrent", "SSMStep", "h", "scan_log_gate", "SSDAttention", (2, 6, 3))]
SAMPLE = 7  # forms compiled and run: every 7th (and the last), 8 of each scan's 48


def part(*names: str) -> str:
    """The gallery's declarations and the diagrams ``names``: a form is parsed quickly."""
    head = SRC[:SRC.index("\ndiagram ")]
    blocks = [SRC[SRC.index(f"\ndiagram {n}("):SRC.index("\n}", SRC.index(f"\ndiagram {n}(")) + 2] for n in names]
    return head + "".join(blocks) + "\n"


def written(cell: str, state: str, perm: tuple[int, ...], turned: bool, swap: bool, src: str = SRC) -> str:
    """The gallery's source with ``cell`` reading its per-step inputs in the order ``perm`` (the
    state first), its state's two axes turned or not, and the initial state's factors swapped or not."""
    head = re.search(rf"diagram {cell}\({state}: \[(\w+), (\w+)\], (.*?)\) -> \[\w+, \w+\], (.*?) {{", src)
    x, y, params, rest = head.groups()
    params = re.split(r", (?=\w+:)", params)
    st = f"[{y}, {x}]" if turned else f"[{x}, {y}]"
    new_head = f"diagram {cell}({state}: {st}, {', '.join(params[p - 1] for p in perm)}) -> {st}, {rest} {{"
    end = src.index("\n}", head.end())
    body = src[head.end():end]
    if turned:
        body = body.replace(f"{state}[a, b]", f"{state}[b, a]").replace(f"{state}2[a, b]", f"{state}2[b, a]")
    src = src[:head.start()] + new_head + body + src[end:]
    call = re.search(rf"scan {cell}\({state}0, (.*?)\)\n", src)
    args = re.split(r", (?![^(]*\))", call.group(1))
    src = src[:call.start()] + f"scan {cell}({state}0, {', '.join(args[p - 1] for p in perm)})\n" + src[call.end():]
    at = src.rindex(f"  {state}0[a, b] = ", 0, call.start())  # the initial state of this scan
    init = re.compile(rf"  {state}0\[a, b\] = (\w+)\[a\] \* (\w+)\[b\]\n").match(src, at)
    labels = "b, a" if turned else "a, b"
    factors = f"{init.group(2)}[b] * {init.group(1)}[a]" if swap else f"{init.group(1)}[a] * {init.group(2)}[b]"
    return src[:init.start()] + f"  {state}0[{labels}] = {factors}\n" + src[init.end():]


def run(d, state: dict | None, x: torch.Tensor):
    m = stringdiag.compile(d, dims=DIMS, dtype=torch.float64, fast=False)  # the plain lowering: no rules
    if state is None:
        torch.manual_seed(0)
        with torch.no_grad():
            for p in m.parameters():
                p.normal_(0, 0.5)
        state = m.state_dict()
    else:
        m.load_state_dict(state)
    return m(x), state


def forms(cell: str):
    n = len(REC[cell].inputs) - 1
    return [(perm, turned, swap) for turned in (False, True) for perm in itertools.permutations(range(1, n + 1))
            for swap in ((perm[0] % 2 == 0),)]  # the factors' order varied too, deterministically


@pytest.mark.parametrize("name, cell, state, rule, target, shape", CASES)
def test_every_form_of_a_gallery_cell_derives(name, cell, state, rule, target, shape, tmp_path):
    x = torch.randn(*shape, dtype=torch.float64)
    want, weights = run(REC[name], None, x)
    every = forms(cell)
    assert len(every) == 48
    the_rule, src = library()[rule], part(cell, name)
    (first,) = find_matches(REC[name], the_rule)
    as_gallery = rewrite(REC[name], first).expand()  # every form must give what the gallery's gives
    for k, (perm, turned, swap) in enumerate(every):
        d = stringdiag.loads(written(cell, state, perm, turned, swap, src), "form.diag")[name]
        assert (d.input_types, d.output_types) == (REC[name].input_types, REC[name].output_types)
        (m,) = find_matches(d, the_rule)
        assert ("inputs in the order" in m.order) == (perm != tuple(sorted(perm))), m.order
        assert ("state's axes" in m.order) == turned, m.order
        r = rewrite(d, m)
        assert not any(r.record(b).scan for b in r.boxes())  # the scan is gone: the parallel form
        assert r.expand().isomorphic(as_gallery)  # so RetNet's chain goes on as gallery/retnet.deriv's
        if target:
            assert r.expand().isomorphic(REC[target].expand())
        if k % SAMPLE == 0 or k == len(every) - 1:
            same, _ = run(d, weights, x)  # the form as written is the gallery's function ...
            torch.testing.assert_close(same, want, rtol=1e-12, atol=1e-12)
            got, _ = run(r, weights, x)  # ... and so is its rewrite
            torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-9)


def test_retention_in_any_form_derives_to_its_chunkwise_form(tmp_path):
    """gallery/retnet.deriv's chain (scan_decay, blocks_decay, chunk_decay, then its target) from
    forms of RetentionStep: the first, the input orders reversed, each with the state turned."""
    (tmp_path / "recurrent.diag").write_text(SRC)
    chain = (ROOT / "gallery" / "retnet.deriv").read_text().replace("start recurrent.diag:", "start form.diag:")
    for perm, turned in [((1, 2, 3, 4), True), ((4, 3, 2, 1), False), ((4, 3, 2, 1), True)]:
        (tmp_path / "form.diag").write_text(written("RetentionStep", "S", perm, turned, turned))
        (tmp_path / "r.deriv").write_text(chain)
        deriv = load_derivation(tmp_path / "r.deriv")
        assert deriv.target.name == "RetentionChunkwise" and len(deriv.steps) == 4
        assert "the rule's cell matched with" in deriv.steps[1].note


# The sequence in m blocks of c positions (as gallery/recurrent.diag's RetNet reads it): SSD's and
# GLA's recurrent forms over the flattened blocks, and their chunkwise forms written by hand
# (rules/recurrence.rules: chunk_segsum, chunk_segsum_channels).
BLOCKS = """\
diagram SSMBlocks(x: [m, c, d]) -> [m, c, d] {
  cb = Q(x)
  bb = K(x)
  dt = softplus(Dt(x))
  xb[b, i] = dt[b, i] * V(x[b, i])
  lb = dt * (0 - exp(A()))
  ct[a] = flatten(cb[:, :, a])
  bt[a] = flatten(bb[:, :, a])
  xt[e] = flatten(xb[:, :, e])
  cq[i, a] = ct[a, i]
  bk[i, a] = bt[a, i]
  xv[i, e] = xt[e, i]
  l = flatten(lb)
  zk = zeros<k>()
  zd = zeros<d>()
  h0[a, b] = zk[a] * zd[b]
  _h, y[t] = scan SSMStep(h0, cq[t], bk[t], xv[t], l[t])
  yt[e] = unflatten<m, c>(y[:, e])
  yb[b, i, e] = yt[e, b, i]
  return yb
}
diagram SegCarry(S: [k, d], kc: [c, k], vc: [c, d], wc: [c], tc: []) -> [k, d], [k, d] {
  S2[a, x] = exp(tc) * S[a, x] + sum_j wc[j] * kc[j, a] * vc[j, x]
  return S2, S
}
diagram SSDChunkwise(x: [m, c, d]) -> [m, c, d] {
  cb = Q(x)
  bb = K(x)
  dt = softplus(Dt(x))
  xb[b, i] = dt[b, i] * V(x[b, i])
  lb = dt * (0 - exp(A()))
  pc = positions<c>()
  mc = causal<c>()
  sb[b, j, i] = lt(pc[j], pc[i]) * lb[b, i]
  sg[b, j] = cumsum(sb[b, j])
  di[b, i, j] = exp(where(sg[b, j, i], mc[i, j]))
  inside[b, i] = sum_{j, a} di[b, i, j] * cb[b, i, a] * bb[b, j, a] * xb[b, j]
  tail[b, j] = sum_t lt(pc[j], pc[t]) * lb[b, t]
  tot[b] = sum_j lb[b, j]
  head[b] = cumsum(lb[b])
  wk[b, j] = exp(tail[b, j])
  zk = zeros<k>()
  zd = zeros<d>()
  S0[a, e] = zk[a] * zd[e]
  _S, st[b] = scan SegCarry(S0, bb[b], xb[b], wk[b], tot[b])
  y[b, i] = inside[b, i] + exp(head[b, i]) * sum_a cb[b, i, a] * st[b, a]
  return y
}
diagram GLABlocks(x: [m, c, d]) -> [m, c, d] {
  qb = Q(x)
  kb = K(x)
  vb = V(x)
  lb = 0 - softplus(0 - G(x))
  qt[a] = flatten(qb[:, :, a])
  kt[a] = flatten(kb[:, :, a])
  vt[e] = flatten(vb[:, :, e])
  lt2[a] = flatten(lb[:, :, a])
  q[i, a] = qt[a, i]
  kk[i, a] = kt[a, i]
  v[i, e] = vt[e, i]
  l[i, a] = lt2[a, i]
  zk = zeros<k>()
  zd = zeros<d>()
  S0[a, b] = zk[a] * zd[b]
  _S, y[t] = scan GLAStep(S0, q[t], kk[t], v[t], l[t])
  yt[e] = unflatten<m, c>(y[:, e])
  yb[b, i, e] = yt[e, b, i]
  return yb
}
diagram ChannelSegCarry(S: [k, d], kc: [c, k], vc: [c, d], wc: [c, k], tc: [k]) -> [k, d], [k, d] {
  S2[a, x] = exp(tc[a]) * S[a, x] + sum_j wc[j, a] * kc[j, a] * vc[j, x]
  return S2, S
}
diagram GLAChunkwise(x: [m, c, d]) -> [m, c, d] {
  qb = Q(x)
  kb = K(x)
  vb = V(x)
  lb = 0 - softplus(0 - G(x))
  pc = positions<c>()
  mc = causal<c>()
  sb[b, j, a, i] = lt(pc[j], pc[i]) * lb[b, i, a]
  sg[b, j, a] = cumsum(sb[b, j, a])
  di[b, i, j, a] = exp(where(sg[b, j, a, i], mc[i, j]))
  inside[b, i] = sum_{j, a} di[b, i, j, a] * qb[b, i, a] * kb[b, j, a] * vb[b, j]
  tail[b, j, a] = sum_t lt(pc[j], pc[t]) * lb[b, t, a]
  tot[b, a] = sum_j lb[b, j, a]
  hd[b, a] = cumsum(lb[b, :, a])
  wk[b, j, a] = exp(tail[b, j, a])
  zk = zeros<k>()
  zd = zeros<d>()
  S0[a, e] = zk[a] * zd[e]
  _S, st[b] = scan ChannelSegCarry(S0, kb[b], vb[b], wk[b], tot[b])
  y[b, i] = inside[b, i] + sum_a exp(hd[b, a, i]) * qb[b, i, a] * st[b, a]
  return y
}
"""
CHUNKED = [("SSMBlocks", "SSMStep", "h", "scan_log_gate", "chunk_segsum", "SSDChunkwise"),
           ("GLABlocks", "GLAStep", "S", "scan_log_gate_channels", "chunk_segsum_channels", "GLAChunkwise")]


@pytest.mark.parametrize("name, cell, state, scan_rule, chunk_rule, target", CHUNKED)
def test_ssd_and_gla_in_any_form_derive_to_their_chunkwise_forms(tmp_path, name, cell, state, scan_rule, chunk_rule,
                                                                  target):
    """The parallel form, then the chunkwise one, from forms of the cell: as the gallery writes it,
    its inputs reversed, each with the state turned; the hand-written chunkwise form is first run
    against the recurrent one (float64, the same weights, with a 3-block sequence)."""
    src = part("SSMStep", "GLAStep") + BLOCKS
    prog = stringdiag.loads(src, "blocks.diag")
    x = torch.randn(2, 3, 2, 3, dtype=torch.float64)
    want, weights = run(prog[name], None, x)
    got, _ = run(prog[target], weights, x)
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)
    n = len(REC[cell].inputs) - 1
    for perm, turned in [(tuple(range(1, n + 1)), True), (tuple(range(n, 0, -1)), False), (tuple(range(n, 0, -1)), True)]:
        (tmp_path / "blocks.diag").write_text(written(cell, state, perm, turned, turned, src))
        (tmp_path / "c.deriv").write_text(f"start blocks.diag:{name}\napply {scan_rule}\napply {chunk_rule}\n"
                                          f"target blocks.diag:{target}\n")
        deriv = load_derivation(tmp_path / "c.deriv")
        assert deriv.target.name == target and "the rule's cell matched with" in deriv.steps[1].note


OUTS = loads_rules("""
rule running_pair<n>(x: [n]) -> [n], [n]
  where diagram Running(s: [], xt: []) -> [], [], [] {
    s2 = s + xt
    return s2, s2 * s2, exp(s2)
  }
{
  _last, sq[t], ex[t] = scan Running(0, x[t])
  return sq, ex
} == {
  c = cumsum(x)
  sq[i] = c[i] * c[i]
  ex[i] = exp(c[i])
  return sq, ex
}
""", "outs.rules")


def test_a_cell_whose_per_step_outputs_come_the_other_way_matches():
    prog = stringdiag.loads("""dim s : seq
diagram Cell(s: [], xt: []) -> [], [], [] {
  s2 = xt + s
  return s2, exp(s2), s2 * s2
}
diagram Pair(x: [s]) -> [s], [s] {
  _last, e[t], q[t] = scan Cell(0, x[t])
  return q, e
}
""", "pair.diag")
    rule = OUTS[0]
    (m,) = find_matches(prog["Pair"], rule)
    assert "per-step outputs in the order (output 2, output 1)" in m.order, m.order
    r = rewrite(prog["Pair"], m)
    assert not any(r.record(b).scan for b in r.boxes())
    x = np.random.default_rng(0).normal(size=7)
    c = np.cumsum(x)  # by hand: the running sum, squared and exponentiated
    got = stringdiag.compile(r, dtype=torch.float64)(torch.tensor(x))
    np.testing.assert_allclose(got[0].numpy(), c * c, rtol=1e-12)
    np.testing.assert_allclose(got[1].numpy(), np.exp(c), rtol=1e-12)
    before = stringdiag.compile(prog["Pair"], dtype=torch.float64)(torch.tensor(x))
    np.testing.assert_allclose(before[0].numpy(), c * c, rtol=1e-12)
