"""What the boxes of an incremental form keep between calls (``incremental.py``): each a module
holding its state as plain attributes (never buffers: the state dict stays the weights'), and the
positions the new ones are (an offset, a block of rows, a mask's rows and columns)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from . import chunked
from . import primitives as P


class CacheSlot(nn.Module):
    """The state one box keeps between calls. Within one call the k-th use of the box reads and
    writes the k-th state, so a layer applied several times (``repeat L shared``) keeps one state
    per application. Held as plain attributes, never as buffers: the state dict is the weights'."""

    def __init__(self) -> None:
        super().__init__()
        self.states: list = []
        self.calls = 0

    def peek(self) -> Any:
        return self.states[self.calls] if self.calls < len(self.states) else None

    def put(self, state: Any) -> None:
        if self.calls < len(self.states):
            self.states[self.calls] = state
        else:
            self.states.append(state)
        self.calls += 1


class Clock(nn.Module):
    """How many positions came before the new ones (shared by every graph of one form)."""

    def __init__(self) -> None:
        super().__init__()
        self.t0 = 0

    def forward(self) -> int:
        return self.t0


def _grown(buf: Tensor | None, n: int, new: Tensor) -> Tensor:
    """``new`` ([..., m, f]) written after the first ``n`` rows of ``buf``, which doubles its
    capacity when full (an append costs O(m f), not a copy of the whole cache)."""
    m = new.shape[-2]
    if buf is None or buf.shape[:-2] != new.shape[:-2] or n + m > buf.shape[-2]:
        cap = max(n + m, 2 * (buf.shape[-2] if buf is not None else 0), 16)
        grown = new.new_empty(*new.shape[:-2], cap, new.shape[-1])
        if buf is not None and n:
            grown[..., :n, :] = buf[..., :n, :]
        buf = grown
    buf[..., n:n + m, :] = new
    return buf


def _block_mask(n: int, m: int, ref: Tensor) -> Tensor | None:
    """Which of the n + m keys each of the m new queries sees (all of them when m == 1)."""
    if m == 1:
        return None
    keys = torch.arange(n + m, device=ref.device)
    return keys[None, :] <= (n + torch.arange(m, device=ref.device))[:, None]


class KVCache(CacheSlot):
    """Causal softmax attention: every key and value so far, O(s (f + e)) per head."""

    def forward(self, q: Tensor, k: Tensor, v: Tensor, scale: float) -> Tensor:
        st = self.peek()
        n, kb, vb = (0, None, None) if st is None else st
        m = k.shape[-2]
        kb, vb = _grown(kb, n, k), _grown(vb, n, v)
        self.put((n + m, kb, vb))
        keys, values = kb[..., :n + m, :], vb[..., :n + m, :]
        return F.scaled_dot_product_attention(q, keys, values, attn_mask=_block_mask(n, m, q), scale=scale)


class KeyCache(CacheSlot):
    """A per-position value read over every position so far (the keys of attention whose mask
    is not one fused process): every position's, O(s) per sequence."""

    def forward(self, x: Tensor, axis: int) -> Tensor:
        st = self.peek()
        n, buf = (0, None) if st is None else st
        moved = x.movedim(axis, -1)[..., None]  # [..., m, 1]
        buf = _grown(buf, n, moved)
        self.put((n + moved.shape[-2], buf))
        return buf[..., :n + moved.shape[-2], 0].movedim(-1, axis)


class WindowCache(CacheSlot):
    """Causal softmax attention in a sliding window i - w < j <= i: the last w - 1 keys and
    values (a window's worth, O(w (f + e)) whatever the length)."""

    def __init__(self, w: int) -> None:
        super().__init__()
        self.w = int(w)

    def forward(self, q: Tensor, k: Tensor, v: Tensor, scale: float) -> Tensor:
        st = self.peek()
        keys, values = (k, v) if st is None else (torch.cat([st[0], k], -2), torch.cat([st[1], v], -2))
        n, m = keys.shape[-2] - k.shape[-2], k.shape[-2]
        j = torch.arange(n + m, device=q.device)[None, :]
        i = (n + torch.arange(m, device=q.device))[:, None]
        mask = (j <= i) & (i - j < self.w)
        keep = max(self.w - 1, 0)
        self.put((keys[..., keys.shape[-2] - keep:, :], values[..., values.shape[-2] - keep:, :]))
        return F.scaled_dot_product_attention(q, keys, values, attn_mask=mask, scale=scale)


class LinearState(CacheSlot):
    """Causal linear attention: S = sum_j k_j v_j^T so far (O(f e)); the normaliser (``v`` None)
    keeps z = sum_j k_j (O(f))."""

    def forward(self, q: Tensor, k: Tensor, v: Tensor | None = None) -> Tensor:
        st = self.peek()
        inside = P.causal_linear(q, k, v)
        if v is None:
            total = k.sum(-2)
            y = inside if st is None else inside + (q * st[..., None, :]).sum(-1)
        else:
            total = k.transpose(-1, -2) @ v
            y = inside if st is None else inside + q @ st
        self.put(total if st is None else st + total)
        return y


class DecayState(CacheSlot):
    """Causal attention decayed by a log gate per position, S_i = exp(l_i) S_{i-1} + k_i v_i^T
    read out q_i S_i (``causal_decay_attention`` takes the rate r = -l): O(f e)."""

    def forward(self, q: Tensor, k: Tensor, v: Tensor, rate: Tensor) -> Tensor:
        q, k, v, l = chunked._common(q, k, v, -rate)
        st = self.peek()
        inside = chunked.causal_decay_linear(q, k, v, l)
        upto = torch.cumsum(l, -1)  # from the block's start to position a, inclusive
        after = torch.flip(torch.cumsum(torch.flip(l, (-1,)), -1), (-1,))
        after = F.pad(after[..., 1:], (0, 1))  # from a (exclusive) to the block's end
        state = (k * torch.exp(after)[..., None]).transpose(-1, -2) @ v
        if st is not None:
            inside = inside + (q * torch.exp(upto)[..., None]) @ st
            state = state + torch.exp(upto[..., -1])[..., None, None] * st
        self.put(state)
        return inside


class Running(CacheSlot):
    """A running sum or product along the sequence: the total so far."""

    def __init__(self, product: bool) -> None:
        super().__init__()
        self.product = product

    def forward(self, x: Tensor) -> Tensor:
        st = self.peek()
        if self.product:
            y = torch.cumprod(x, -1) if st is None else torch.cumprod(torch.cat([st, x], -1), -1)[..., 1:]
        else:
            y = torch.cumsum(x, -1) if st is None else torch.cumsum(torch.cat([st, x], -1), -1)[..., 1:]
        self.put(y[..., -1:])
        return y


class RunningByKey(CacheSlot):
    """A running sum along the new positions of a value that also runs over every position so
    far (a decay's log gates summed per key): the total per key, a key new since the last call
    starting from zero (sound where the value is zero for positions before its key's, checked by
    the caller)."""

    def forward(self, x: Tensor, axis: int) -> Tensor:
        st = self.peek()
        carry = x.new_zeros(*x.shape[:-1], 1)
        if st is not None:
            index = [slice(None)] * carry.dim()
            index[axis] = slice(0, st.shape[axis])
            carry[tuple(index)] = st
        y = torch.cumsum(torch.cat([carry, x], -1), -1)[..., 1:]
        self.put(y[..., -1:])
        return y


class Recent(CacheSlot):
    """The last ``keep`` inputs along the sequence (zeros before the first): what a causal
    convolution of width keep + 1, or a shift by keep, reads of the positions before."""

    def __init__(self, keep: int | None) -> None:
        super().__init__()
        self.keep = keep  # None: read from the kernel's width

    def before(self, x: Tensor, keep: int) -> Tensor:
        st = self.peek()
        if st is None:
            st = x.new_zeros(*x.shape[:-1], keep)
        xx = torch.cat([st.expand(*x.shape[:-1], keep), x], -1)
        self.put(xx[..., xx.shape[-1] - keep:])
        return xx

    def forward(self, x: Tensor, kernel: Tensor | None = None) -> Tensor:
        if kernel is None:  # shift by keep
            return self.before(x, self.keep)[..., :x.shape[-1]]
        w = kernel.shape[-1]
        windows = self.before(x, w - 1).unfold(-1, w, 1)
        return (windows * kernel[..., None, :]).sum(-1)


class Carry(CacheSlot):
    """A scan's carried state: the diagram's initial state at the first position, the state
    the last step left after that."""

    def forward(self, x: Any, keep: bool) -> Any:
        if keep:
            self.put(x[0])
            return x
        st = self.peek()
        return x if st is None else st



def positions_at(t0: int, m: int, ref: Tensor) -> Tensor:
    return torch.arange(t0, t0 + int(m), dtype=ref.dtype, device=ref.device)[None]


def posenc_at(t0: int, m: int, width: int, ref: Tensor) -> Tensor:
    return P.posenc(t0 + int(m), width, ref)[:, t0:]


def rows_at(t: Tensor, t0: int, sizes: list, bounds: list, names: list, op: str, stream: list) -> Tensor:
    """A learned table over positions (``where s <= N``) at the new positions' rows."""
    full = P.bounded(t, [t0 + int(n) if s else n for n, s in zip(sizes, stream)], bounds, names, op)
    index = [slice(None)] + [slice(t0, None) if s else slice(None) for s in stream]
    return full[tuple(index)]



def mask_at(op: str, rows: tuple, cols: tuple, w: int | None, ref: Tensor) -> Tensor:
    """causal (j <= i) or window (|i - j| < w) for the rows and columns (start, length) given."""
    i = torch.arange(int(rows[0]), int(rows[0]) + int(rows[1]), device=ref.device)[:, None]
    j = torch.arange(int(cols[0]), int(cols[0]) + int(cols[1]), device=ref.device)[None, :]
    m = (j <= i) if op == "causal" else ((i - j).abs() < w)
    return m.to(ref.dtype)[None]


def rows_in_roles(t: Tensor, t0: int, m: int, bounds: list, names: list, op: str, new: list) -> Tensor:
    """A learned table over positions at the rows each sequence axis holds: the new positions
    (True), or every one so far (False); None for an axis that is not the sequence's."""
    full = P.bounded(t, [t0 + int(m) if r is not None else None for r in new], bounds, names, op)
    index = [slice(None)] + [slice(t0, None) if r else slice(None) for r in new]
    return full[tuple(index)]



@dataclass
class State:
    """Where an incremental form stands: positions consumed, and each box's state (a list per
    box, one entry per use in a call). A call consumes the state it is given (caches grow in
    place) and returns the next one."""

    batch_size: int
    position: int = 0
    slots: list[list] = field(default_factory=list)

    def tensors(self) -> list[Tensor]:
        """Every tensor the state holds (what its memory is)."""
        out: list[Tensor] = []

        def walk(x: Any) -> None:
            if isinstance(x, Tensor):
                out.append(x)
            elif isinstance(x, (list, tuple)):
                for y in x:
                    walk(y)
        walk(self.slots)
        return out

    def numel(self) -> int:
        """Entries held: caches by the positions they hold, not their spare capacity."""
        total = 0
        for st in self.slots:
            for entry in st:
                if isinstance(entry, tuple) and entry and isinstance(entry[0], int):  # a cache: (n, K, V)
                    total += sum(t[..., :entry[0], :].numel() for t in entry[1:])
                else:
                    total += sum(t.numel() for t in State(0, 0, [[entry]]).tensors())
        return total
