"""Clustering and label matching (Sec. 3.1): each sequence collapses onto one of its tokens, then
sequences with the same label are driven onto one point.

After clustering every sequence is one point repeated, so the later blocks are read on the N
points; their attention layers are the identity (rho = 1, V = 0, A = 0).
"""
from __future__ import annotations

import numpy as np

from ..errors import DiagError
from .blocks import Block, Seqs, apply_all, feed_forward, make
from .geometry import direction, groups, leaders, single_out, tolerance
from .separate import attract

TRIES = 64


def cluster(zs: Seqs, rng: np.random.Generator) -> tuple[Block, np.ndarray]:
    """T_clu: Lemma 3.3's feed-forward layer and attention with rho = 0, V = I, A = v vᵀ: every token
    becomes its sequence's leader. Returns the block and the N collapsed points."""
    d, tol = zs[0].shape[1], tolerance(zs)
    best = max(((f[1], tuple(g)) for g in (direction(rng, d) for _ in range(TRIES))
                if (f := leaders(zs, g, tol)) is not None), default=None)
    if best is None:
        raise DiagError("internal: no direction gives every sequence a unique leader")
    blk = attract(zs, np.array(best[1]), 1.0, "clustering", "Lemma 3.3, rho = 0, V = I")
    out = apply_all(blk, zs)
    if any(np.abs(z - z[0]).max() > 0.0 for z in out):
        raise DiagError("internal: a sequence did not collapse onto its leader")
    return blk, np.array([z[0] for z in out])


def match_labels(points: np.ndarray, labels: list[str], rng: np.random.Generator) -> tuple[list[Block], np.ndarray]:
    """T_lab: at most N - 1 feed-forward blocks (3.3-3.5). A point z^{i_0} extreme along u_0 stays;
    repeatedly the extreme point on the other side of (3.3)'s hyperplane is moved, alone, onto a point
    with its label (Case 2) or, when its label has no other point, past the hyperplane (Case 1)."""
    tol, d = tolerance([points]), points.shape[1]
    i0, u0, _ = single_out(points, direction(rng, d), rng, tol)
    vals = points @ u0
    thr = (vals[i0] + np.delete(vals, i0).max()) / 2 if len(points) > 1 else vals[i0]
    spread = float(np.ptp(points, axis=0).max()) or 1.0
    blocks: list[Block] = []
    while True:
        grp = groups(points, tol)
        owner = [labels[g[0]] for g in grp]
        if len(set(owner)) == len(owner):
            return blocks, points
        locs = np.array([points[g[0]] for g in grp])
        i, h, margin = single_out(locs, -u0, rng, tol, allowed={m for m in range(len(locs)) if locs[m] @ u0 < thr})
        b = -(locs[i] @ h - margin / 2)
        mates = [m for m in range(len(grp)) if m != i and owner[m] == owner[i]]
        parked = sum(1 for blk in blocks if blk.note.startswith("Case 1"))
        target = locs[mates[0]] if mates else points[i0] + (parked + 1) * spread * u0
        note = "Case 2: onto a point with its label" if mates else "Case 1: its label's only point, past u_0"
        blk = make("label matching", note, d, u=h, b=b, w=(target - locs[i]) / (margin / 2))
        blocks.append(blk)
        points = feed_forward(blk, points)
