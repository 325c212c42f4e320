"""Benchmark: causal linear attention and a decayed variant, compiled vs hand-written vs recurrent.

Two attentions, each computed three ways on the same q, k, v (and log gates l):

- causal linear attention, y_i = sum_{j<=i} (q_i.k_j) v_j / sum_{j<=i} q_i.k_j (Katharopoulos
  et al.), q and k positive (elu + 1 of random inputs);
- a decayed variant, y_i = sum_{j<=i} exp(l_{j+1} + ... + l_i) (q_i.k_j) v_j (Mamba-2's scalar
  SSD, gated linear attention with a scalar gate), l_t = -softplus(N(0, 1)) < 0;

and the ways:

- compiled: the parallel form written in a .diag (the masked sums), compiled by stringdiag
  (the fast paths ``causal_linear_pair`` -> one chunked pass for numerator and normaliser
  together, and ``causal_decay`` -> ``lower/chunked.py``);
- from-scan: the recurrent form written in a .diag (a ``scan`` of the cell S' = a S + k v^T,
  y = q^T S'), which the compiler takes through its chunked form (``lower/scans.py``): the
  same kernels, reached from the loop;
- one-pass: a chunked kernel written by hand here (a column of ones appended to the values;
  for the decay, Mamba-2's chunked SSD with its segsum), blocks of 128 (linear) and 64 (decay);
- recurrence: the step-by-step RNN, S_t = a_t S_{t-1} + k_t v_t^T, a Python loop over s.

Also, for linear attention, ``two-pass``: the compiled module as it was before (the numerator
and the normaliser each its own chunked pass, ``primitives.causal_linear`` twice).

For each s (doubling) and for the forward pass and forward + backward, every way is timed
interleaved with the others in rounds (each way first in turn), median (and least) of repeats
(elapsed time, or with ``--clock cpu`` the thread's CPU time, which other processes do not inflate),
torch at one thread, batch 1, k = d = 64, float32. Peak memory: one more call of each way (and
its backward) under a torch dispatch mode that counts the bytes of every storage an op makes
until it is freed: the peak of what the call's tensors held at once (forward results, what
autograd saved, gradients), the inputs aside. Ratios are against the hand-written one-pass kernel of the same run.

    .venv/bin/python benchmarks/bench_recurrence.py [--sizes 1024 2048 4096] [--repeat 5]
        [--recurrence-max 1024] [--kinds linear decay] [--clock wall|cpu] [--quick]
"""
from __future__ import annotations

import argparse
import statistics
import time
import weakref
from typing import Callable

import torch
import torch.nn.functional as F
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

import stringdiag
from stringdiag.lower import primitives as P

SRC = """\
dim s : seq
dim k, d : fixed
diagram Linear(pq: [s, k], pk: [s, k], v: [s, d]) -> [s, d] {
  m = causal<s>()
  num[i] = sum_{j, f} m[i, j] * pq[i, f] * pk[j, f] * v[j]
  den[i] = sum_{j, f} m[i, j] * pq[i, f] * pk[j, f]
  y[i] = num[i] / den[i]
  return y
}
diagram Decayed(q: [s, k], kk: [s, k], v: [s, d], l: [s]) -> [s, d] {
  mk = causal<s>()
  p = positions<s>()
  sl[j, i] = lt(p[j], p[i]) * l[i]
  seg[j] = cumsum(sl[j])
  dm[i, j] = exp(where(seg[j, i], mk[i, j]))
  y[i] = sum_{j, a} dm[i, j] * q[i, a] * kk[j, a] * v[j]
  return y
}
diagram Accumulate(S: [k, d], q: [k], kk: [k], v: [d]) -> [k, d], [d] {
  S2[a, b] = S[a, b] + kk[a] * v[b]
  y[b] = sum_a q[a] * S2[a, b]
  return S2, y
}
diagram AccumulateKeys(z: [k], q: [k], kk: [k]) -> [k], [] {
  z2[a] = z[a] + kk[a]
  y = sum_a q[a] * z2[a]
  return z2, y
}
diagram LinearScan(pq: [s, k], pk: [s, k], v: [s, d]) -> [s, d] {
  zk = zeros<k>()
  zd = zeros<d>()
  S0[a, b] = zk[a] * zd[b]
  _S, num[t] = scan Accumulate(S0, pq[t], pk[t], v[t])
  _z, den[t] = scan AccumulateKeys(zeros<k>(), pq[t], pk[t])
  y[i] = num[i] / den[i]
  return y
}
diagram DecayStep(S: [k, d], q: [k], kk: [k], v: [d], l: []) -> [k, d], [d] {
  S2[a, b] = kk[a] * v[b] + S[a, b] * exp(l)
  y[b] = sum_a S2[a, b] * q[a]
  return S2, y
}
diagram DecayedScan(q: [s, k], kk: [s, k], v: [s, d], l: [s]) -> [s, d] {
  zk = zeros<k>()
  zd = zeros<d>()
  S0[a, b] = zk[a] * zd[b]
  _S, y[t] = scan DecayStep(S0, q[t], kk[t], v[t], l[t])
  return y
}
"""


# == hand-written references ==================================================================
def blocks(x, c: int):
    """[..., s, f] -> [..., s / c, c, f], zero-padded at the end when c does not divide s."""
    pad = -x.shape[-2] % c
    return (F.pad(x, (0, 0, 0, pad)) if pad else x).unflatten(-2, (-1, c))


def linear_one_pass(q, k, v, c: int = 128):
    """Chunked causal linear attention, numerator and normaliser in one pass: v with a column of
    ones; inside each block the masked scores, across blocks the exclusive prefix sum of K^T V."""
    s = q.shape[-2]
    vo = torch.cat([v, torch.ones_like(v[..., :1])], dim=-1)
    qb, kb, vb = (blocks(x, c) for x in (q, k, vo))
    tri = torch.ones(c, c, dtype=torch.bool).tril()
    inside = torch.where(tri, qb @ kb.transpose(-1, -2), 0.0) @ vb
    kv = kb.transpose(-1, -2) @ vb
    before = torch.cumsum(kv, dim=-3) - kv
    out = (inside + qb @ before).flatten(-3, -2)[..., :s, :]
    return out[..., :-1] / out[..., -1:]


def linear_two_pass(q, k, v):
    """The compiled module before: the numerator and the normaliser, each its own chunked pass."""
    return P.causal_linear(q, k, v) / P.causal_linear(q, k, None)[..., None]


def linear_recurrence(q, k, v):
    S = q.new_zeros(*q.shape[:-2], q.shape[-1], v.shape[-1])
    z = q.new_zeros(*q.shape[:-2], q.shape[-1])
    ys = []
    for t in range(q.shape[-2]):
        S = S + k[..., t, :, None] * v[..., t, None, :]
        z = z + k[..., t, :]
        ys.append((q[..., t, None, :] @ S)[..., 0, :] / (q[..., t, :] * z).sum(-1, keepdim=True))
    return torch.stack(ys, dim=-2)


def segsum(x):
    """Mamba-2's stable segsum: entry (i, j) = x_{j+1} + ... + x_i for j <= i, -inf above."""
    n = x.shape[-1]
    x = x[..., None].expand(*x.shape, n)
    x = x.masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(-1), 0.0)
    out = torch.cumsum(x, dim=-2)
    return out.masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(0), float("-inf"))


def decay_one_pass(q, k, v, l, c: int = 64):
    """Mamba-2's chunked SSD (Dao and Gu, Listing 1, one head, one state group), by hand."""
    s = q.shape[-2]
    qb, kb, vb = (blocks(x, c) for x in (q, k, v))
    lb = blocks(l[..., None], c)[..., 0]  # [..., n, c]
    lcum = torch.cumsum(lb, dim=-1)
    diag = (qb @ kb.transpose(-1, -2) * torch.exp(segsum(lb))) @ vb
    decay_states = torch.exp(lcum[..., -1:] - lcum)
    states = (kb * decay_states[..., None]).transpose(-1, -2) @ vb  # [..., n, f, e]
    states = torch.cat([torch.zeros_like(states[..., :1, :, :]), states], dim=-3)
    chunk_decay = torch.exp(segsum(F.pad(lcum[..., -1], (1, 0))))
    new_states = torch.einsum("...zc,...cfe->...zfe", chunk_decay, states)[..., :-1, :, :]
    off = (qb * torch.exp(lcum)[..., None]) @ new_states
    return (diag + off).flatten(-3, -2)[..., :s, :]


def decay_recurrence(q, k, v, l):
    S = q.new_zeros(*q.shape[:-2], q.shape[-1], v.shape[-1])
    a = torch.exp(l)
    ys = []
    for t in range(q.shape[-2]):
        S = a[..., t, None, None] * S + k[..., t, :, None] * v[..., t, None, :]
        ys.append((q[..., t, None, :] @ S)[..., 0, :])
    return torch.stack(ys, dim=-2)


# == measurement ==============================================================================
class LiveBytes(TorchDispatchMode):
    """The peak of the bytes held by tensors made inside it (forward, saved for backward,
    gradients), counted per storage when an op makes it and until it is freed; ``keep``: the
    tensors made before (the inputs), not counted."""

    def __init__(self, keep=()):
        super().__init__()
        self.cur = self.peak = 0
        self.live = {t.untyped_storage().data_ptr(): 0 for t in keep}

    def _free(self, key: int) -> None:
        self.cur -= self.live.pop(key, 0)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in pytree.tree_leaves(out):
            if isinstance(t, torch.Tensor):
                st = t.untyped_storage()
                key = st.data_ptr()
                if key and key not in self.live:
                    self.live[key] = st.nbytes()
                    self.cur += st.nbytes()
                    self.peak = max(self.peak, self.cur)
                    weakref.finalize(st, self._free, key)
        return out


def peak_memory(fn, xs, backward: bool) -> int:
    """Peak bytes held by the tensors one call (and its backward) makes, inputs aside."""
    xs = [x.detach().requires_grad_(backward) for x in xs]
    with LiveBytes(xs) as m, torch.set_grad_enabled(backward):
        y = fn(*xs)
        if backward:
            y.sum().backward()
        del y
    return m.peak


def run(fn, inputs, backward: bool) -> Callable[[], None]:
    """One call: the forward pass under no_grad, or forward and backward."""
    def go():
        xs = [x.detach().requires_grad_(backward) for x in inputs]
        with torch.set_grad_enabled(backward):
            y = fn(*xs)
        if backward:
            y.sum().backward()
    return go


CLOCKS = {"wall": time.perf_counter, "cpu": time.thread_time}


def timed(go: Callable[[], None], clock: Callable[[], float] = time.perf_counter) -> float:
    t = clock()
    go()
    return clock() - t


def inputs(s: int, kind: str, gen: torch.Generator):
    q, k = (F.elu(torch.randn(1, s, 64, generator=gen)) + 1 for _ in range(2))
    v = torch.randn(1, s, 64, generator=gen)
    if kind == "linear":
        return [q, k, v]
    l = -F.softplus(torch.randn(1, s, generator=gen))
    return [torch.randn(1, s, 64, generator=gen) / 8, torch.randn(1, s, 64, generator=gen) / 8, v, l]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1024, 2048, 4096])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--recurrence-max", type=int, default=1024, help="longest s for the Python-loop RNN")
    ap.add_argument("--kinds", nargs="+", choices=["linear", "decay"], default=["linear", "decay"],
                    help="the attentions to time (default: both)")
    ap.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                    help="wall: elapsed time; cpu: this thread's CPU time (torch runs at one thread, in it), which "
                         "a machine loaded by other processes does not inflate (default: wall)")
    ap.add_argument("--quick", action="store_true", help="s = 512, 1024; 3 repeats")
    args = ap.parse_args()
    if args.quick:
        args.sizes, args.repeat = [512, 1024], 3
    torch.set_num_threads(1)
    prog = stringdiag.loads(SRC, "bench_recurrence.diag")
    compiled = {name: stringdiag.compile(prog[name], dims={"k": 64, "d": 64}).eval()
                for name in ("Linear", "Decayed", "LinearScan", "DecayedScan")}
    assert all(len(compiled[n].chunked_scans) == k for n, k in (("LinearScan", 2), ("DecayedScan", 1)))
    ways = {"linear": {"compiled": compiled["Linear"], "from-scan": compiled["LinearScan"],
                       "one-pass": linear_one_pass, "two-pass": linear_two_pass, "recurrence": linear_recurrence},
            "decay": {"compiled": compiled["Decayed"], "from-scan": compiled["DecayedScan"],
                      "one-pass": decay_one_pass, "recurrence": decay_recurrence}}
    gen = torch.Generator().manual_seed(0)
    print(f"torch {torch.__version__}, 1 thread, batch 1, k = d = 64, float32; {args.clock} time, median of "
          f"{args.repeat}, interleaved; ratios against the hand-written one-pass kernel of the same run")
    print(f"{'attention':9} {'pass':8} {'s':>6} {'way':11} {'time ms':>9} {'ratio':>6} {'min ms':>8} {'ratio':>6} "
          f"{'peak MiB':>9} {'ratio':>6}")
    for kind, fns in ((k, ways[k]) for k in args.kinds):
        for backward in (False, True):
            for s in args.sizes:
                xs = inputs(s, kind, gen)
                use = {n: f for n, f in fns.items() if n != "recurrence" or s <= args.recurrence_max}
                check = {n: f(*xs) for n, f in use.items() if n != "recurrence" or s <= 1024}
                ref = check["one-pass"]
                for n, y in check.items():
                    assert torch.allclose(y, ref, rtol=1e-3, atol=1e-4), (kind, n, (y - ref).abs().max())
                gos = {n: run(f, xs, backward) for n, f in use.items()}
                for go in gos.values():
                    go()  # warm up
                times: dict[str, list[float]] = {n: [] for n in gos}
                names = list(gos)
                for r in range(args.repeat):  # interleaved, each way first in turn
                    for n in names[r % len(names):] + names[:r % len(names)]:
                        times[n].append(timed(gos[n], CLOCKS[args.clock]))
                mems = {n: peak_memory(f, xs, backward) for n, f in use.items()}
                t1, b1, m1 = statistics.median(times["one-pass"]), min(times["one-pass"]), mems["one-pass"]
                for n in gos:
                    t, b, m = statistics.median(times[n]), min(times[n]), mems[n]
                    print(f"{kind:9} {'fwd+bwd' if backward else 'fwd':8} {s:6d} {n:11} {t * 1e3:9.1f} "
                          f"{t / t1:6.2f} {b * 1e3:8.1f} {b / b1:6.2f} {m / 2**20:9.1f} "
                          f"{m / m1 if m1 > 0 else float('nan'):6.2f}", flush=True)


if __name__ == "__main__":
    main()
