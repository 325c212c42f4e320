"""Chunked causal attention with a decay: sum_{j <= i} exp(l_{j+1} + ... + l_i) (q_i . k_j) v_j
in one pass over blocks, no [s, s] matrix and no Python loop over the sequence.

It is what ``rules/recurrence.rules``'s ``chunk_log_gate`` says, computed: within a block of
C positions the decayed quadratic form; across blocks the state each block leaves behind,
decayed to the end of the block, passed on to every later block with the decay of the blocks
between. A scalar gate per position, in log space (Mamba-2's a_t = exp(dt_t A); gated linear
attention with a scalar gate; RetNet with l = log gamma). Every decay is a sum of log gates
over a range of positions, summed directly (Mamba-2's stable ``segsum``), never a difference
of two long cumulative sums, which would lose the small gates beside a large one.
"""
from __future__ import annotations

import functools

import torch
import torch.nn.functional as F
from torch import Tensor

from .primitives import _blocks  # [..., s, f] -> [..., s / C, C, f], zero-padded
from .primitives import broadcast_shape

CHUNK = 64  # positions per block


def segsum(x: Tensor) -> Tensor:
    """``[..., n] -> [..., n, n]``: entry (i, j) is x_{j+1} + ... + x_i for j <= i (0 on the
    diagonal) and -inf above it, so that its exp is the decay mask. Each entry is one cumulative
    sum of a masked row, exact to the rounding of a short sum."""
    n = x.shape[-1]
    sums = torch.cumsum(x[..., :, None].expand(*x.shape, n).tril(-1), dim=-2)
    return sums.add_(_above(n, x.dtype, x.device))


@functools.lru_cache(maxsize=64)
def _above(n: int, dtype: torch.dtype, device: torch.device) -> Tensor:
    """``[n, n]``: -inf above the diagonal, 0 on and below it, made once per size, dtype and device
    (never written to). Added, it masks as ``masked_fill_`` does, in a tenth of its time."""
    return torch.full((n, n), float("-inf"), dtype=dtype, device=device).triu(1)


def causal_decay_linear(q: Tensor, k: Tensor, v: Tensor, l: Tensor, chunk: int = CHUNK) -> Tensor:
    """``q, k : [..., s, f]``, ``v : [..., s, e]``, ``l : [..., s]`` (leading axes broadcast)
    -> ``[..., s, e]``. Time O(s C f + s f e + (s / C)^2 f e), memory O(s C + (s / C) f e)."""
    q, k, v, l = _common(q, k, v, l)
    s = q.shape[-2]
    size = max(1, min(chunk, s))
    qc, kc, vc = (_blocks(x, size) for x in (q, k, v))  # [..., n, C, *]
    lc = _blocks(l[..., None], size)[..., 0]  # [..., n, C]; padding: log gate 0
    inside = ((qc @ kc.transpose(-1, -2)) * torch.exp(segsum(lc))) @ vc
    upto = torch.cumsum(lc, dim=-1)  # decay from a block's start to position i, inclusive
    suffix = torch.flip(torch.cumsum(torch.flip(lc, (-1,)), dim=-1), (-1,))  # l_j + ... + l_{C-1}
    after = F.pad(suffix[..., 1:], (0, 1))  # from position j (exclusive) to the block's end
    state = (kc * torch.exp(after)[..., None]).transpose(-1, -2) @ vc  # [..., n, f, e] at each block's end
    out = inside + (qc * torch.exp(upto)[..., None]) @ _entering(state, upto[..., -1])
    return out.flatten(-3, -2)[..., :s, :]


def _entering(state: Tensor, total: Tensor) -> Tensor:
    """The state entering each block b, sum over r < b of exp(total_{r+1} + ... + total_{b-1})
    state_r, from each block's own state at its end and its log decay ``total`` (a function of
    its own, so that its temporaries are freed before the readout)."""
    carry = torch.exp(segsum(F.pad(total, (1, 0))[..., :-1]))  # [..., n, n], row b, column r + 1
    return torch.einsum("...br,...rfe->...bfe", carry, F.pad(state, (0, 0, 0, 0, 1, 0))[..., :-1, :, :])


def _common(*xs: Tensor) -> list[Tensor]:
    """The inputs with their leading axes broadcast to one shape."""
    ranks = [2, 2, 2, 1]
    lead = broadcast_shape([tuple(x.shape[: x.dim() - r]) for x, r in zip(xs, ranks)])
    return [x.expand(*lead, *x.shape[x.dim() - r:]) for x, r in zip(xs, ranks)]

