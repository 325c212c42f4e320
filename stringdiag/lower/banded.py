"""Softmax attention under a sliding window, with or without global tokens, causal or not,
computed on the band: no s x s matrix, or fused dense SDPA where the sequence is short.

The band is read through strided views of the zero-padded keys and values (``unfold``: each
block of b <= :data:`BLOCK` queries meets the r blocks of keys either side that its window
reaches, with no copy), scored by one batched product, masked by a mask made once per shape
(cached), and normalised by ``torch.softmax``. Where s <= :data:`DENSE_WITHIN` times the reach
of a query (window plus global tokens; :data:`DENSE_WITHIN_NO_GRAD` without gradients), fused
``scaled_dot_product_attention`` under the dense mask is faster here and its s x s matrix is
still O(s·w): the crossovers measured at one thread, w = 16 ... 128, d = 64.
"""
from __future__ import annotations

import math

from typing import Callable

import torch
import torch.nn.functional as F

Tensor = torch.Tensor

BLOCK = 32  # queries per block at most: 16 to 64 were within 10 % of each other, 8 and 128 slower
DENSE_WITHIN = 8  # dense SDPA when s <= 8 (w + g) and gradients are wanted (forward + backward)
DENSE_WITHIN_NO_GRAD = 4  # ... and when s <= 4 (w + g) for a forward pass alone
_MASKS: dict[tuple, Tensor] = {}  # (kind, sizes, device) -> a boolean mask, never written to
_MASK_BUDGET = 1 << 25  # entries held at most; the cache is emptied when a new mask would pass it


def _cached(key: tuple, make: Callable[[], Tensor]) -> Tensor:
    """The mask of ``key``, made once (fresh when traced by ``torch.compile``: a constant there)."""
    if torch.compiler.is_compiling():
        return make()
    mask = _MASKS.get(key)
    if mask is None:
        mask = make()
        if sum(m.numel() for m in _MASKS.values()) + mask.numel() > _MASK_BUDGET:
            _MASKS.clear()
        _MASKS[key] = mask
    return mask


def _blocks(x: Tensor, size: int) -> Tensor:
    """[..., s, f] -> [..., ceil(s / size), size, f], zero-padded at the end."""
    pad = -x.shape[-2] % size
    if pad:
        x = F.pad(x, (0, 0, 0, pad))
    return x.unflatten(-2, (-1, size))


def _windows(x: Tensor, b: int, nb: int, before: int, after: int) -> Tensor:
    """[..., s, f] -> [..., nb, (before + 1 + after) b, f]: block c's keys from block c - before
    to c + after, a strided view of the sequence zero-padded at both ends (no other copy)."""
    x = F.pad(x, (0, 0, before * b, (nb + after) * b - x.shape[-2]))
    return x.unfold(-2, (before + 1 + after) * b, b).transpose(-1, -2)


def _masked(e: Tensor, drop: Tensor) -> Tensor:
    """Fresh scores with ``drop`` set to -inf: in place, except under ``torch.vmap``."""
    if torch._C._functorch.is_batchedtensor(e):
        return e.masked_fill(drop, float("-inf"))
    return e.masked_fill_(drop, float("-inf"))


def _dense_wins(q: Tensor, k: Tensor, v: Tensor, reach: int) -> bool:
    """Fused dense SDPA for a short sequence, when the three share their leading axes (SDPA's
    kernels do not broadcast them) and outside ``torch.vmap`` (whose SDPA runs head by head)."""
    grads = torch.is_grad_enabled() and any(x.requires_grad for x in (q, k, v))
    within = DENSE_WITHIN if grads else DENSE_WITHIN_NO_GRAD
    if q.shape[-2] > within * reach or not q.shape[:-2] == k.shape[:-2] == v.shape[:-2]:
        return False
    return not any(torch._C._functorch.is_batchedtensor(x) for x in (q, k, v))


def _tiling(s: int, w: int) -> tuple[int, int]:
    """Block size b and reach r (blocks of keys either side) for a window |i - j| < w over s."""
    w = max(1, min(w, s))  # a wider window is the whole sequence
    b = min(w, BLOCK)
    return b, -(-(w - 1) // b)


def _positions(nb: int, b: int, before: int, after: int, device) -> tuple[Tensor, Tensor]:
    """Query and key positions of the blocked scores: ``i [nb, b, 1]``, ``j [nb, 1, (before + 1 + after) b]``."""
    i = torch.arange(nb * b, device=device).view(nb, b, 1)
    j = (torch.arange(nb, device=device).view(nb, 1, 1) - before) * b + \
        torch.arange((before + 1 + after) * b, device=device)
    return i, j


def _window_drop(nb: int, b: int, r: int, s: int, w: int, g: int, device) -> Tensor:
    """Scores to drop: keys outside |i - j| < w, global keys (j < g, scored apart) and padding;
    a padded query keeps its own (zero) key, so every row has an entry."""
    i, j = _positions(nb, b, r, r, device)
    return ~torch.where(i < s, ((i - j).abs() < w) & (j >= g) & (j < s), i == j)


def _causal_drop(nb: int, b: int, r: int, w: int, device) -> Tensor:
    """Scores to drop: keys outside i - w < j <= i (every row keeps its diagonal)."""
    i, j = _positions(nb, b, r, 0, device)
    return ~((j <= i) & (i - j < w) & (j >= 0))


def _dense_mask(s: int, w: int, g: int, causal: bool, device) -> Tensor:
    i = torch.arange(s, device=device)
    d = i[:, None] - i[None, :]
    if causal:
        return (d >= 0) & (d < w)
    return (d.abs() < w) | (i[:, None] < g) | (i[None, :] < g)


def _dense(q: Tensor, k: Tensor, v: Tensor, w: int, g: int, causal: bool, scale: float) -> Tensor:
    """Fused SDPA under the dense mask (none when the window spans the sequence); the leading axes
    folded into one batch axis beside one head, as the fused kernels want ``[batch, heads, s, f]``."""
    s, lead = q.shape[-2], q.shape[:-2]
    q, k, v = (x.reshape(math.prod(x.shape[:-2]), 1, s, x.shape[-1]) for x in (q, k, v))  # not -1: s or a batch may be 0
    if w >= s:
        y = F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)
    else:
        mask = _cached(("dense", s, w, g, causal, q.dtype, q.device),  # additive: SDPA would convert a boolean one per call
                       lambda: torch.zeros(s, s, dtype=q.dtype, device=q.device).masked_fill_(
                           ~_dense_mask(s, w, g, causal, q.device), float("-inf")))
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)
    return y.view(*lead, s, y.shape[-1])


def window_attention(q: Tensor, k: Tensor, v: Tensor, w: int, scale: float) -> Tensor:
    """softmax(q k^T * scale, masked to |i - j| < w) v; w >= 1.

    ``q, k : [..., s, f]``, ``v : [..., s, e]``, leading axes broadcast. Dense SDPA for a short
    sequence (:func:`_dense_wins`); else :func:`banded_window_attention`. With w = 0 (no key at
    all) it is :func:`window_global_attention`'s, which leaves such rows undefined."""
    w = int(w)
    if w < 1:
        return window_global_attention(q, k, v, w, 0, scale)
    if _dense_wins(q, k, v, w):
        return _dense(q, k, v, w, 0, False, scale)
    return banded_window_attention(q, k, v, w, scale)


def banded_window_attention(q: Tensor, k: Tensor, v: Tensor, w: int, scale: float, g: int = 0) -> Tensor:
    """The band alone, whatever s (the first g positions left out of it, for
    :func:`window_global_attention`): the sequence cut into blocks of b queries (:func:`_tiling`),
    each meeting the keys of the r blocks either side (a view): scores ``[..., s / b, b, (2r + 1) b]``,
    time and memory O(s w f), linear in s for a fixed window. Padded queries see only their own
    (zero) key; they are dropped. With ``g``, the global keys' scores join each row's softmax."""
    s, w = q.shape[-2], int(w)
    b, r = _tiling(s, w)
    qb = _blocks(q * scale, b)  # [..., nb, b, f]
    nb = qb.shape[-3]
    drop = _cached(("window", nb, b, r, s, min(w, s), g, q.device),
                   lambda: _window_drop(nb, b, r, s, min(w, s), g, q.device))
    e = _masked(qb @ _windows(k, b, nb, r, r).transpose(-1, -2), drop)
    if not g:
        return (torch.softmax(e, dim=-1) @ _windows(v, b, nb, r, r)).flatten(-3, -2)[..., :s, :]
    p = torch.softmax(torch.cat([e, qb @ k[..., :g, :].unsqueeze(-3).transpose(-1, -2)], dim=-1), dim=-1)
    n = e.shape[-1]
    out = p[..., :n] @ _windows(v, b, nb, r, r) + p[..., n:] @ v[..., :g, :].unsqueeze(-3)
    return out.flatten(-3, -2)[..., :s, :]


def window_global_attention(q: Tensor, k: Tensor, v: Tensor, w: int, g: int, scale: float) -> Tensor:
    """softmax(q k^T * scale) v masked to a sliding window |i - j| < w and g global tokens (the
    first g positions see, and are seen by, every position: Longformer), with no s x s matrix.

    A query i >= g meets the keys of its window (:func:`banded_window_attention`, the first g
    positions left out there) and the g global keys, one softmax over both; the g global queries
    meet every key: ``[..., g, s]``. Time and memory O(s (w + g) f). With w = 0 (no window) it is
    attention under the global tokens alone. A short sequence goes to dense SDPA (:func:`_dense_wins`).
    """
    s = q.shape[-2]
    w, g = int(w), max(0, min(int(g), s))
    if (w > 0 or g > 0) and _dense_wins(q, k, v, max(w, 0) + g):
        return _dense(q, k, v, w, g, False, scale)
    out = banded_window_attention(q, k, v, w, scale, g)
    if not g:
        return out
    top = torch.softmax(q[..., :g, :] * scale @ k.transpose(-1, -2), dim=-1) @ v  # global queries: every key
    return torch.cat([top, out[..., g:, :]], dim=-2)


def causal_window_attention(q: Tensor, k: Tensor, v: Tensor, w: int, scale: float) -> Tensor:
    """softmax(q k^T * scale) v under the causal sliding window i - w < j <= i (Mistral's).

    ``q, k : [..., s, f]``, ``v : [..., s, e]``, leading axes broadcast (keys and values without a
    head axis are read by every head). The queries of each block meet the keys of their own block
    and the r before it that the window reaches (a view): scores ``[..., s / b, b, (r + 1) b]``,
    masked to the window; time and memory O(s w f). Every row keeps its diagonal, so every softmax
    is defined. A short sequence goes to dense SDPA (:func:`_dense_wins`).
    """
    s, w = q.shape[-2], int(w)
    if _dense_wins(q, k, v, w):
        return _dense(q, k, v, w, 0, True, scale)
    b, r = _tiling(s, w)
    qb = _blocks(q * scale, b)  # [..., nb, b, f]
    nb = qb.shape[-3]
    drop = _cached(("causal", nb, b, r, w, q.device), lambda: _causal_drop(nb, b, r, w, q.device))
    e = _masked(qb @ _windows(k, b, nb, r, 0).transpose(-1, -2), drop)
    return (torch.softmax(e, dim=-1) @ _windows(v, b, nb, r, 0)).flatten(-3, -2)[..., :s, :]
