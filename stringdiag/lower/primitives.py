"""Array code for the prelude's primitives: one small function each.

Every tensor carries one leading batch axis (size N, or 1 for values that do not
depend on the inputs), then the SIMD axes of its box, then the box's local axes. A
primitive receives its inputs already aligned that way (missing SIMD axes have size 1,
so broadcasting is the copy-SIMD of the paper) and acts on the trailing local axes.
"""
from __future__ import annotations

import math
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import DiagError
from .banded import _blocks, causal_window_attention, window_attention, window_global_attention  # noqa: F401 (the table's names)

Tensor = torch.Tensor


def align(x: Tensor, perm: tuple[int, ...], unsqueeze: tuple[int, ...]) -> Tensor:
    """Permute a wire's axes into box order, then insert size-1 axes for missing SIMD indices."""
    if perm != tuple(range(len(perm))):
        x = x.permute(perm)
    for p in unsqueeze:
        x = x.unsqueeze(p)
    return x


def broadcast_lead(xs: list[Tensor], local_ranks: list[int]) -> list[Tensor]:
    """Expand the leading (batch and SIMD) axes of several inputs to a common shape."""
    leads = [tuple(x.shape[: x.dim() - r]) for x, r in zip(xs, local_ranks)]
    common = broadcast_shape(leads)
    return [x if lead == common else x.expand(*common, *x.shape[x.dim() - r:]) for x, lead, r in zip(xs, leads, local_ranks)]


def broadcast_shape(shapes: list[tuple]) -> tuple:
    """``torch.broadcast_shapes`` in plain Python: a fixed cost of every call of a compiled
    module (a few microseconds here, thirty there); torch's own says what is wrong."""
    out = [1] * max(map(len, shapes))
    for shape in shapes:
        for i, n in enumerate(shape, len(out) - len(shape)):
            if n != 1 and out[i] not in (1, n):
                return tuple(torch.broadcast_shapes(*shapes))
            out[i] = n if n != 1 else out[i]
    return tuple(out)


def const(value: float, ref: Tensor) -> Tensor:
    return torch.full((1,), value, dtype=ref.dtype, device=ref.device)


def amax(x: Tensor) -> Tensor:
    """The largest entry of the last axis; -infinity over an empty one (torch's amax refuses it)."""
    if x.shape[-1] == 0:
        return x.new_full(x.shape[:-1], float("-inf"))
    return torch.amax(x, -1)


def hardmax(x: Tensor) -> Tensor:
    """1/|argmax| on every maximal entry of the last axis, 0 elsewhere (ties averaged)."""
    if x.shape[-1] == 0:
        return x
    hit = (x == x.amax(dim=-1, keepdim=True)).to(x.dtype)
    return hit / hit.sum(dim=-1, keepdim=True)


def gelu_tanh(x: Tensor) -> Tensor:
    """GELU in the tanh approximation (GPT-2's ``gelu_new``)."""
    return F.gelu(x, approximate="tanh")


def clamp(x: Tensor, lo: Tensor, hi: Tensor) -> Tensor:
    """``min(max(x, lo), hi)``, bounds broadcast like any scalar input."""
    return torch.minimum(torch.maximum(x, lo), hi)


def where(x: Tensor, m: Tensor) -> Tensor:
    return torch.where(m != 0, x, torch.full((), float("-inf"), dtype=x.dtype, device=x.device))


def less(a: Tensor, b: Tensor) -> Tensor:
    """1 where a < b, 0 elsewhere, in the dtype of the inputs."""
    return torch.lt(a, b).to(torch.result_type(a, b))


def posenc(n: int, m: int, ref: Tensor) -> Tensor:
    """Sinusoidal positional encoding (Vaswani et al.): sin on even features, cos on odd."""
    pos = torch.arange(n, dtype=ref.dtype, device=ref.device)[:, None]
    k = torch.arange(m, device=ref.device)
    freq = torch.pow(torch.tensor(10000.0, dtype=ref.dtype, device=ref.device), -(k - k % 2).to(ref.dtype) / m)
    angle = pos * freq
    return torch.where(k % 2 == 0, torch.sin(angle), torch.cos(angle))[None]


def _grid(n: int, ref: Tensor) -> tuple[Tensor, Tensor]:
    i = torch.arange(n, device=ref.device)
    return i[:, None], i[None, :]


def causal(n: int, ref: Tensor) -> Tensor:
    i, j = _grid(n, ref)
    return (j <= i).to(ref.dtype)[None]


def window(n: int, w: int, ref: Tensor) -> Tensor:
    i, j = _grid(n, ref)
    return ((i - j).abs() < w).to(ref.dtype)[None]


def strided(n: int, w: int, ref: Tensor) -> Tensor:
    i, j = _grid(n, ref)
    return (((i - j) % w == 0) & (j <= i)).to(ref.dtype)[None]


def global_tokens(n: int, g: int, ref: Tensor) -> Tensor:
    """1 where query i or key j is one of the first g positions (global tokens)."""
    i, j = _grid(n, ref)
    return ((i < g) | (j < g)).to(ref.dtype)[None]


def gauss(mu: Tensor, sigma: Tensor, n: int) -> Tensor:
    """The Gaussian window N(mu, sigma) evaluated at positions 0..n-1 (unnormalised)."""
    pos = torch.arange(n, dtype=mu.dtype, device=mu.device)
    return torch.exp(-((pos - mu[..., None]) ** 2) / (2 * sigma[..., None] ** 2))


def seeded(seed: int, shape: list[int], ref: Tensor | None) -> Tensor:
    """A random box's tensor, [1, *shape]: N(0, 1) in float64 from ``torch.Generator`` seeded
    with ``seed`` (on the CPU, so the draw is the same on every device), then as ``ref``."""
    x = torch.randn(tuple(int(n) for n in shape), generator=torch.Generator().manual_seed(seed),
                    dtype=torch.float64)[None]
    return x if ref is None else like(x, ref)


def like(x: Tensor, ref: Tensor) -> Tensor:
    """``x`` in ``ref``'s dtype and on its device (a no-op when it already is)."""
    return x.to(dtype=ref.dtype, device=ref.device)


def filled(n: tuple[int, ...], value: float, ref: Tensor) -> Tensor:
    return torch.full((1, *n), value, dtype=ref.dtype, device=ref.device)


def positions(n: int, ref: Tensor) -> Tensor:
    return torch.arange(n, dtype=ref.dtype, device=ref.device)[None]


def split(x: Tensor, n: int) -> tuple[Tensor, Tensor]:
    return x[..., :n], x[..., n:]


def narrow(x: Tensor, a: int, m: int, r: int) -> Tensor:
    """Entries a, ..., a + m - 1 of the last axis (``x[:, a:a + m]``); r entries follow them."""
    if min(int(a), int(m), int(r)) < 0:
        raise DiagError(f"the range {int(a)}:{int(a) + int(m)} does not lie within an axis of "
                        f"{int(a) + int(m) + int(r)} entries")
    return x.narrow(-1, int(a), int(m))


def pick(x: Tensor, a: int, r: int) -> Tensor:
    """Entry a of the last axis (``x[:, a]``), which disappears."""
    return narrow(x, a, 1, r)[..., 0]


class Dropout(nn.Module):
    """Dropout at rate p in training, the identity in evaluation; p a number (torch's
    ``F.dropout``) or a tensor broadcast against x (an entry kept with probability 1 - p)."""

    def forward(self, x: Tensor, p: "Tensor | float") -> Tensor:
        if not self.training:
            return x
        if not isinstance(p, Tensor):
            return F.dropout(x, float(p), True)
        keep = torch.rand(torch.broadcast_shapes(x.shape, p.shape), dtype=x.dtype, device=x.device) >= p
        return torch.where(keep, x / (1 - p).clamp_min(torch.finfo(x.dtype).tiny), torch.zeros((), dtype=x.dtype))


def shift(x: Tensor, k: int) -> Tensor:
    """y[j] = x[j - k] along the last axis, zeros for j < k."""
    n = x.shape[-1]
    return F.pad(x, (int(k), 0))[..., :n]


def causal_conv(x: Tensor, kernel: Tensor) -> Tensor:
    """y[j] = sum_u kernel[u] x[j + u - w + 1] (zeros before x[0]) along the last axis, leading
    axes matched: windows of w entries (a view), one product each, O(n w)."""
    w = kernel.shape[-1]
    if x.shape[-1] == 0:  # no positions: no windows, the leading axes still matched
        return (x[..., None] * kernel[..., None, :]).sum(-1)
    windows = F.pad(x, (w - 1, 0)).unfold(-1, w, 1)  # [..., n, w]
    return (windows * kernel[..., None, :]).sum(-1)


def embed(ids: Tensor, table: Tensor) -> Tensor:
    """Row ``ids`` of the table's last two axes ``[v, d]``: ``F.embedding`` when the table has
    no leading axes of its own (one table), else a gather with leading axes matched. O(d) per id."""
    if all(n == 1 for n in table.shape[:-2]):
        return F.embedding(ids, table.reshape(table.shape[-2:]))
    ids, table = broadcast_lead([ids, table], [0, 2])
    index = ids[..., None, None].expand(*ids.shape, 1, table.shape[-1])
    return table.gather(-2, index)[..., 0, :]


def bucket(x: Tensor, n: int) -> Tensor:
    """A computed number as an id in 0, ..., n - 1 (int64): the nearest integer (halves to even,
    ``torch.round``), clamped to the range; no gradient flows through it. A NaN has no nearest
    integer and is refused."""
    if torch.isnan(x).any():
        raise DiagError(f"bucket<{int(n)}> is given NaN, which is no id; its input must be a number")
    return x.detach().round().clamp(0, int(n) - 1).long()


def topk(x: Tensor, k: int) -> tuple[Tensor, Tensor]:
    """The k largest entries of the last axis, largest first, and their indices (int64)."""
    if not 0 <= int(k) <= x.shape[-1]:
        raise DiagError(f"topk<{int(k)}> needs at most as many entries as it chooses from, but the axis has "
                        f"{x.shape[-1]}")
    values, indices = torch.topk(x, int(k), dim=-1)
    return values, indices


def _chosen(weights: Tensor, ids: Tensor) -> Tensor:
    """The chosen experts' weights ``[..., k, out, in]`` of a stack ``[..., n, out, in]``,
    leading axes matched (one gather: k copies of one matrix per token)."""
    weights, ids = broadcast_lead([weights, ids], [3, 1])
    return weights.gather(-3, ids[..., None, None].expand(*ids.shape, *weights.shape[-2:]))


def moe_swiglu(x: Tensor, ids: Tensor, w: Tensor, wg: Tensor, wu: Tensor, wd: Tensor) -> Tensor:
    """sum_j w[j] Wd[ids[j]] (silu(Wg[ids[j]] x) * (Wu[ids[j]] x)) over the last axes (``x :
    [..., d]``, ``ids, w : [..., k]``, weights ``[..., n, out, in]``). With one stack of experts
    (the weights have no leading axes of their own), the tokens are grouped by expert: each
    chosen expert runs once on its tokens (``F.linear``) and the weighted results are added
    back in place (``index_add``), as Hugging Face's MixtralExperts does; O(k d f) per token,
    unchosen experts never run. Otherwise the chosen weights are gathered per token."""
    if any(n != 1 for t in (wg, wu, wd) for n in t.shape[:-3]):
        hg, hu = (torch.einsum("...jfd,...d->...jf", _chosen(t, ids), x) for t in (wg, wu))
        return torch.einsum("...j,...jdf,...jf->...d", w, _chosen(wd, ids), F.silu(hg) * hu)
    x, ids, w = broadcast_lead([x, ids, w], [1, 1, 1])
    lead, (k, d) = x.shape[:-1], (ids.shape[-1], x.shape[-1])
    tokens, flat, weight = x.reshape(-1, d), ids.reshape(-1), w.reshape(-1)
    # unbound once: one backward stacks every expert's gradient (indexing wg[e] per expert made a
    # zero-filled gradient of the whole stack per expert, then added them: most of the backward)
    wg, wu, wd = (t.reshape(t.shape[-3:]).unbind(0) for t in (wg, wu, wd))
    out = torch.zeros_like(tokens)
    for e in torch.bincount(flat, minlength=len(wg)).nonzero()[:, 0].tolist():  # the experts chosen
        part = (flat == e).nonzero()[:, 0]  # the (token, slot) pairs routed to expert e
        rows = part // k
        xe = tokens[rows]
        h = F.silu(F.linear(xe, wg[e])) * F.linear(xe, wu[e])
        out.index_add_(0, rows, F.linear(h, wd[e]) * weight[part, None])
    return out.reshape(*lead, d)


def learnable(module: Callable, xs: list[Tensor], in_ranks: list[int], out_shapes: list[tuple[int, ...]]):
    """Apply a universal approximator to the flattened concatenation of its inputs."""
    xs = broadcast_lead(xs, in_ranks) if len(xs) > 1 else xs
    # (flatten, not reshape(..., -1): a batch of none, or no positions, has no -1 to infer)
    flat = [x.unsqueeze(-1) if r == 0 else x.flatten(x.dim() - r) if r > 1 else x for x, r in zip(xs, in_ranks)]
    y = module(flat[0] if len(flat) == 1 else torch.cat(flat, dim=-1))
    sizes = [math.prod(s) for s in out_shapes]
    parts = y.split(sizes, dim=-1) if len(sizes) > 1 else (y,)
    outs = tuple(p.reshape(*p.shape[:-1], *s) for p, s in zip(parts, out_shapes))
    return outs if len(outs) > 1 else outs[0]


class LearnableCell:
    """A learnable box used as the body of a scan: state and inputs in, state and outputs out."""

    def __init__(self, module: Callable, in_ranks: list[int], out_shapes: list[tuple[int, ...]]):
        self.module, self.in_ranks, self.out_shapes = module, in_ranks, out_shapes

    def __call__(self, state: Tensor, *xs: Tensor):
        return learnable(self.module, [state, *xs], self.in_ranks, self.out_shapes)


def scan(cell: Callable, state: Tensor, xs: list[Tensor], state_rank: int, in_ranks: list[int], steps: int,
         out_ranks: list[int]):
    """Finite iteration: run ``cell`` along the scanned axis, carrying the state.

    The scanned axis of each input is the one just before its local axes; outputs are
    stacked at the same place. This is the one loop in compiled code.
    """
    outs: list[list[Tensor]] = [[] for _ in out_ranks]
    if steps == 0:  # no steps: the state as it was, and each output empty along the scanned axis
        return _no_steps(cell, state, xs, state_rank, in_ranks, out_ranks)
    for t in range(steps):
        step_in = [x.select(x.dim() - r - 1, t if x.shape[x.dim() - r - 1] > 1 else 0) for x, r in zip(xs, in_ranks)]
        state, *step_in = broadcast_lead([state, *step_in], [state_rank, *in_ranks])
        res = cell(state, *step_in)
        state, *ys = res if isinstance(res, tuple) else (res,)
        for acc, y in zip(outs, ys):
            acc.append(y)
    stacked = tuple(torch.stack(acc, dim=acc[0].dim() - r) for acc, r in zip(outs, out_ranks))
    return (state, *stacked)


def _no_steps(cell: Callable, state: Tensor, xs: list[Tensor], state_rank: int, in_ranks: list[int],
              out_ranks: list[int]):
    """A scan over zero positions: the cell is run once on zeros only to learn its outputs'
    shapes, and each output is that shape with an empty scanned axis."""
    step_in = [x.new_zeros(x.shape[:x.dim() - r - 1] + x.shape[x.dim() - r:]) for x, r in zip(xs, in_ranks)]
    start, *step_in = broadcast_lead([state, *step_in], [state_rank, *in_ranks])
    res = cell(start, *step_in)
    _, *ys = res if isinstance(res, tuple) else (res,)
    empty = tuple(torch.stack([y], dim=y.dim() - r).narrow(y.dim() - r, 0, 0) for y, r in zip(ys, out_ranks))
    return (start, *empty)


def repeat(cells: list[Callable], xs: list[Tensor], ranks: list[int]) -> Tensor:
    """Copies of a definition in sequence: the first input carried from copy to copy, the
    others read unchanged by every copy."""
    x, *rest = broadcast_lead(xs, ranks) if len(xs) > 1 else xs
    for cell in cells:
        x = cell(x, *rest)
    return x


def unflatten_batch(y: Tensor, batch: tuple[int, ...], n: int) -> Tensor:
    """Restore the caller's batch axes (expanding values that did not depend on them)."""
    if len(batch) == 1 and y.shape[0] == n:  # one batch axis, as given: nothing to restore
        return y
    if y.shape[0] != n:
        y = y.expand(n, *y.shape[1:])
    return y.reshape(tuple(batch) + tuple(y.shape[1:]))  # a tuple: () is a scalar, not "no shape"


CHUNK = 128  # positions per block of causal linear attention


def causal_linear(q: Tensor, k: Tensor, v: Tensor | None, chunk: int | None = CHUNK) -> Tensor:
    """sum_{j <= i} (q_i . k_j) v_j without the s x s matrix (Katharopoulos et al.).

    ``q, k : [..., s, f]``, ``v : [..., s, e]`` (or None for the normaliser sum_{j<=i} q_i.k_j);
    leading axes broadcast. With ``chunk=None``, the prefix-sum form: S_i = sum_{j<=i} k_j v_j^T
    by cumsum, memory O(s f e). With a chunk size C, the sequence is cut into blocks of C
    positions (the last padded with zeros): inside a block the masked quadratic form, across
    blocks each block's summary k^T v summed over the blocks before it by one cumsum; memory
    O(s C + s f e / C), a few batched products whatever s is, no Python loop.
    """
    squeeze = v is None
    if v is None:
        v = torch.ones(*k.shape[:-1], 1, dtype=k.dtype, device=k.device)
    if chunk is None:
        state = torch.cumsum(k[..., :, :, None] * v[..., :, None, :], dim=-3)
        out = torch.einsum("...if,...ife->...ie", q, state)
        return out[..., 0] if squeeze else out
    s = q.shape[-2]
    size = max(1, min(chunk, s))
    qc, kc, vc = (_blocks(x, size) for x in (q, k, v))  # [..., n, C, *]
    inside = _lower_triangle(qc @ kc.transpose(-1, -2)) @ vc
    summary = kc.transpose(-1, -2) @ vc  # [..., n, f, e]
    before = torch.cumsum(F.pad(summary, (0, 0, 0, 0, 1, 0))[..., :-1, :, :], dim=-3)  # blocks before each
    out = (inside + qc @ before).flatten(-3, -2)[..., :s, :]
    return out[..., 0] if squeeze else out


def _lower_triangle(scores: Tensor) -> Tensor:
    """The block's causal mask on fresh scores: in place (``tril_`` is a tenth of ``masked_fill_``'s
    time and exact whatever a masked score holds), except under ``torch.vmap`` (batched heads),
    which has no batching rule for ``tril_`` and would loop over the batch."""
    if torch._C._functorch.is_batchedtensor(scores):
        return scores.tril()
    return scores.tril_()


def bounded(t: torch.Tensor, sizes: list, bounds: list, names: list, op: str) -> torch.Tensor:
    """A learnable tensor ``[1, *axes]`` held at the largest lengths of its bounded seq axes
    (``learn E : -> [s, k] where s <= 512``), sliced to this run's lengths ``sizes``."""
    index: list = [slice(None)]
    for n, bound, name in zip(sizes, bounds, names):
        if bound is not None and int(n) > bound:
            raise DiagError(f"'{op}' holds at most {bound} positions along '{name}' (where {name} <= {bound}), "
                            f"but this input has {int(n)}")
        index.append(slice(None) if bound is None else slice(0, n))
    return t[tuple(index)]


class LayerNormEps(nn.LayerNorm):
    """Layer norm whose eps is a tensor computed at run time (one per position), as the
    prelude's ``layernorm_eps`` body reads it; a constant eps compiles to ``nn.LayerNorm``."""

    def forward(self, x: torch.Tensor, eps: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        c = x - x.mean(-1, keepdim=True)
        return c / torch.sqrt((c * c).mean(-1, keepdim=True) + eps[..., None]) * self.weight + self.bias
