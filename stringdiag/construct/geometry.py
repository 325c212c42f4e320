"""Tolerances, generic directions and leaders: the finite checks behind the proof's "generic" choices.

The proof picks directions and step sizes outside finitely many bad values. Here a choice is
drawn at random (from a seeded generator, so a construction is reproducible) and kept only if
every strict inequality the proof needs holds with a margin well above float64 rounding.
"""
from __future__ import annotations

import numpy as np

from ..errors import DiagError

from .blocks import Seqs

RELATIVE = 1e-9  # points closer than this (relative to the data's scale) count as one


def scale(zs: Seqs) -> float:
    return max(float(np.abs(np.concatenate(zs)).max()), 1e-300)


def tolerance(zs: Seqs) -> float:
    return RELATIVE * scale(zs)


def direction(rng: np.random.Generator, d: int) -> np.ndarray:
    g = rng.standard_normal(d)
    return g / np.linalg.norm(g)


def gap(values: np.ndarray) -> tuple[int, float]:
    """The index of the largest value and by how much it beats the second (inf when alone)."""
    i = int(np.argmax(values))
    rest = np.delete(values, i)
    return i, float(values[i] - rest.max()) if rest.size else float("inf")


def lead(z: np.ndarray, g: np.ndarray) -> tuple[int, float]:
    """The first row maximising <g, z> and its lead over every row that is a different token: copies
    of one token are one token of more mass (Remark 2.6), never a tie."""
    values = z @ g
    i = int(np.argmax(values))
    other = (z != z[i]).any(axis=1)
    return i, float(values[i] - values[other].max()) if other.any() else float("inf")


def leaders(zs: Seqs, g: np.ndarray, tol: float) -> tuple[list[int], float] | None:
    """Each sequence's unique maximising token (Lemma 3.2 ii) and the smallest margin; None on a tie."""
    found = [lead(z, g) for z in zs]
    margin = min(m for _, m in found)
    return ([i for i, _ in found], margin) if margin > tol else None


def distance(a: np.ndarray, b: np.ndarray) -> float:
    """The smallest distance between a row of ``a`` and a row of ``b``."""
    return float(np.abs(a[:, None, :] - b[None, :, :]).max(axis=2).min())


def near_copy(z: np.ndarray, tol: float) -> tuple[int, int] | None:
    """Two tokens of one sequence closer than ``tol`` but not equal (j < i), or None: an exact copy is
    a token of more mass (Remark 2.6), a near one is neither that nor a distinct token."""
    diff = np.abs(z[:, None, :] - z[None, :, :]).max(axis=2)
    bad = np.argwhere((diff <= tol) & (diff > 0))
    return None if not len(bad) else (int(bad[0][1]), int(bad[0][0]))


def masses(z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct tokens of a sequence (sorted) and each one's share of the sequence, w_l / len (2.7)."""
    tokens, counts = np.unique(z, axis=0, return_counts=True)
    return tokens, counts / len(z)


def quality(zs: Seqs, upto: int) -> float:
    """How far the induction's invariant holds, relative to the data's scale: the smallest distance
    between tokens of two of the sequences 0..upto-1, or between two distinct tokens of one sequence
    (copies of one token stay copies through every block: one token of more mass, Remark 2.6)."""
    tokens = np.concatenate(zs)
    owner = np.repeat(np.arange(len(zs)), [len(z) for z in zs])
    diff = np.abs(tokens[:, None, :] - tokens[None, :, :]).max(axis=2)
    same = (owner[:, None] == owner[None, :]) & (diff > 0)
    early = (owner[:, None] < upto) & (owner[None, :] < upto) & ~(owner[:, None] == owner[None, :])
    mask = same | early
    return float(diff[mask].min()) / scale(zs) if mask.any() else float("inf")


def separated(zs: Seqs, upto: int) -> bool:
    """The invariant: sequences 0..upto-1 pairwise disjoint (3.2), every sequence's tokens distinct."""
    return quality(zs, upto) > RELATIVE


def groups(points: np.ndarray, tol: float) -> list[list[int]]:
    """Indices of points that coincide (to ``tol``), in order of first appearance."""
    out: list[list[int]] = []
    for i, x in enumerate(points):
        for grp in out:
            if np.abs(points[grp[0]] - x).max() <= tol:
                grp.append(i)
                break
        else:
            out.append([i])
    return out


def single_out(locs: np.ndarray, h: np.ndarray, rng: np.random.Generator, tol: float, allowed=None):
    """A direction near ``h`` and the point it singles out (among ``allowed``), with the widest margin
    found: the margin sets how far the cut-off point's activation is from zero, so a wide one keeps
    the weights W = (target - x) / activation small."""
    allowed = range(len(locs)) if allowed is None else allowed
    best = None
    for t in range(64):
        hh = h if t == 0 else h + (0.5, 1.0, 2.0)[t % 3] * direction(rng, len(h))
        hh = hh / np.linalg.norm(hh)
        i, margin = gap(locs @ hh)
        if i in allowed and margin > tol and (best is None or margin > best[2]):
            best = (i, hh, margin)
    if best is None:
        raise DiagError("internal: no direction singles out a point")
    return best
