"""Preprocessing and separation (Sec. 3.1, Lemmas 3.3-3.5): after these blocks no token is zero and
no token is shared by two sequences.

Lemma 3.5's induction: sequence k joins sequences 0..k-1, already pairwise disjoint, with at most
two blocks. Case 1: a direction v whose leader in sequence k is no other sequence's leader gives
one Lemma 3.3 block, each token pulled by alpha towards its sequence's leader. Cases 2 and 3 (the
leader is shared): a block whose attention pulls every token towards its sequence's centre of mass
separates the shared leader, after a Lemma 3.4 feed-forward layer has made the two centres differ
when they coincide (Case 3); then Case 1. Every alpha, beta, v and w is drawn and kept only if the
inequalities the proof needs hold with a margin (see geometry).
"""
from __future__ import annotations

import numpy as np

from ..errors import DiagError
from .blocks import Block, Seqs, apply_all, make
from .geometry import RELATIVE, direction, distance, leaders, quality, scale, separated, tolerance

TRIES = 32
STAGE = "separation"


def preprocess(zs: Seqs, rng: np.random.Generator) -> Block:
    """T_pre: U = 0, b = 1, W = w small, attention the identity; no token is zero afterwards."""
    d, s, tol = zs[0].shape[1], scale(zs), tolerance(zs)
    for _ in range(TRIES):
        blk = make("preprocessing", "shift by w (U = 0, b = 1)", d, b=1.0, w=0.1 * s * direction(rng, d))
        if all(float(np.abs(z).max(axis=1).min()) > tol for z in apply_all(blk, zs)):
            return blk
    raise DiagError("internal: no shift keeps every token away from zero")


def attract(zs: Seqs, v: np.ndarray, alpha: float, stage: str, note: str) -> Block:
    """Lemma 3.3's block: FF shifts every token along v until <v, z> > 0 (U = 0, W = v/|v|^2), then
    every token moves by alpha towards its sequence's leader (rho = 1 - alpha, V = alpha I, A = v vᵀ)."""
    top = float(max(np.abs(z @ v).max() for z in zs))
    b = top + 0.5 * max(top, scale(zs))
    return make(stage, note, len(v), b=b, w=v / (v @ v), v=v, lam=alpha, rho=1.0 - alpha)


def case1(zs: Seqs, k: int, rng: np.random.Generator, first: np.ndarray | None = None) -> Block | None:
    """One block separating sequence k from 0..k-1 when some direction's leaders differ (Case 1);
    of the directions and alphas tried, the one leaving the tokens furthest apart."""
    tol, d = tolerance(zs), zs[0].shape[1]
    best: tuple[float, Block] | None = None
    for t in range(TRIES):
        g = first if (t == 0 and first is not None) else direction(rng, d)
        found = leaders(zs, g, tol)
        if found is None:
            continue
        lead = [z[i] for z, i in zip(zs, found[0])]
        if any(np.abs(lead[k] - lead[j]).max() <= tol for j in range(k)):
            continue
        for alpha in rng.uniform(0.2, 0.8, size=4):
            blk = attract(zs, g, float(alpha), STAGE, f"sequence {k + 1}: Case 1 (leaders differ)")
            q = min(quality(apply_all(blk, zs), k + 1), found[1] / scale(zs))
            if q > RELATIVE and (best is None or q > best[0]):
                best = (q, blk)
    return None if best is None else best[1]


def centres_apart(a: np.ndarray, b: np.ndarray, rng: np.random.Generator, room: float, tol: float):
    """Lemma 3.4: (u, b, w) of a feed-forward layer after which the centres of mass of ``a`` and ``b``
    differ, moving no token by more than ``room``."""
    d = a.shape[1]
    for _ in range(TRIES):
        u = direction(rng, d)
        t = np.unique(np.concatenate([a, b]) @ u)[::-1]
        best = (0.0, 0.0)
        for r in range(1, len(t)):
            bias = -(t[r - 1] + t[r]) / 2
            f = np.maximum(a @ u + bias, 0).mean() - np.maximum(b @ u + bias, 0).mean()
            best = max(best, (abs(float(f)), float(bias)))
        if best[0] > tol:
            reach = float(max(np.maximum(a @ u + best[1], 0).max(), np.maximum(b @ u + best[1], 0).max()))
            return u, best[1], direction(rng, d) * room / reach
    raise DiagError("internal: no feed-forward layer separates two equal centres of mass")


def shared_leader(zs: Seqs, k: int, rng: np.random.Generator):
    """A direction with a unique leader in every sequence, its leaders, and the earlier sequence
    whose leader is sequence k's (there is one: Case 1 failed, and 0..k-1 are disjoint)."""
    tol, d = tolerance(zs), zs[0].shape[1]
    for _ in range(10 * TRIES):
        g = direction(rng, d)
        found = leaders(zs, g, tol)
        if found is None:
            continue
        lead = [z[i] for z, i in zip(zs, found[0])]
        j = next((j for j in range(k) if np.abs(lead[k] - lead[j]).max() <= tol), None)
        if j is not None:
            return g, found, j
    raise DiagError(f"internal: no direction gives sequence {k + 1} a leader it shares")


def recentre(zs: Seqs, k: int, rng: np.random.Generator) -> list[Block]:
    """Cases 2 and 3: sequence k's leader is also sequence j's; pull every token towards its
    sequence's centre of mass (A = 0: every score ties), after Lemma 3.4 when the centres coincide."""
    tol, d = tolerance(zs), zs[0].shape[1]
    g, found, j = shared_leader(zs, k, rng)
    u, bias, w, case = np.zeros(d), 0.0, np.zeros(d), "Case 2 (centres of mass differ)"
    if np.abs(zs[k].mean(0) - zs[j].mean(0)).max() <= tol:
        u, bias, w = centres_apart(zs[k], zs[j], rng, 0.25 * found[1], tol)
        case = "Case 3 (equal centres of mass; Lemma 3.4)"
    for beta in rng.uniform(0.1, 0.5, size=TRIES):
        blk = make(STAGE, f"sequence {k + 1}: {case}, shared leader with sequence {j + 1}", d,
                   u=u, b=bias, w=w, lam=float(beta), rho=1.0 - float(beta))
        moved = apply_all(blk, zs)
        if not separated(moved, k):
            continue
        if separated(moved, k + 1):
            return [blk]
        then = case1(moved, k, rng, first=g)
        if then is not None:
            return [blk, then]
    raise DiagError(f"internal: sequence {k + 1} could not be separated from sequence {j + 1}")


def separate(zs: Seqs, rng: np.random.Generator) -> tuple[list[Block], Seqs]:
    """T_sep: at most 2(N - 1) blocks after which the sequences are pairwise disjoint (3.2)."""
    blocks: list[Block] = []
    for k in range(1, len(zs)):
        if min(distance(zs[k], zs[j]) for j in range(k)) > tolerance(zs):
            continue  # already apart: no block needed
        one = case1(zs, k, rng)
        new = [one] if one is not None else recentre(zs, k, rng)
        for blk in new:
            zs = apply_all(blk, zs)
        blocks += new
    return blocks, zs
