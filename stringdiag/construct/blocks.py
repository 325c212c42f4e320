"""One transformer block of Theorem 2.4's construction, as numbers, and its action on tokens.

A block is TB = SA ∘ FF (2.5) with a feed-forward layer of hidden width one (2.3),
FF(z) = z + w relu(<u, z> + b), and hardmax attention (2.4a-c) with A = v vᵀ and V = lam I
(Remark 2.7). This is what the construction reasons with while it chooses the next block;
the verdict on the finished transformer is given by the compiled diagram, not by this.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

Seqs = list[np.ndarray]  # sequences of tokens, each (len, d), float64


@dataclass(frozen=True)
class Block:
    """The parameters of one block, and which step of the proof chose them (for the report)."""

    stage: str
    note: str
    u: np.ndarray = field(repr=False)
    b: float
    w: np.ndarray = field(repr=False)
    v: np.ndarray = field(repr=False)
    lam: float
    rho: float

    def attends(self) -> bool:
        """Whether the attention layer is anything but the identity (rho = 1, V = 0)."""
        return not (self.rho == 1.0 and self.lam == 0.0)


def make(stage: str, note: str, d: int, *, u=None, b: float = 0.0, w=None, v=None,
         lam: float = 0.0, rho: float = 1.0) -> Block:
    """A block; omitted parts are zero, and the attention defaults to the identity (rho = 1, V = 0)."""
    zero = np.zeros(d)
    arr = lambda x: zero.copy() if x is None else np.asarray(x, dtype=np.float64).copy()  # noqa: E731
    return Block(stage, note, arr(u), float(b), arr(w), arr(v), float(lam), float(rho))


def feed_forward(blk: Block, x: np.ndarray) -> np.ndarray:
    """(2.3) with d' = 1 on every token of ``x`` (..., d)."""
    return x + np.maximum(x @ blk.u + blk.b, 0.0)[..., None] * blk.w


def apply(blk: Block, z: np.ndarray) -> np.ndarray:
    """The block on one sequence (len, d): FF, then hardmax attention (ties averaged)."""
    x = feed_forward(blk, z)
    p = x @ blk.v
    e = p[:, None] * p[None, :]
    hit = (e == e.max(axis=1, keepdims=True)).astype(np.float64)
    return blk.rho * x + blk.lam * ((hit / hit.sum(axis=1, keepdims=True)) @ x)


def apply_all(blk: Block, zs: Seqs) -> Seqs:
    return [apply(blk, z) for z in zs]
