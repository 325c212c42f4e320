"""Tolerances, generic directions and leaders: the finite checks behind the proof's "generic" choices.

The proof picks directions and step sizes outside finitely many bad values. Here a choice is
drawn at random (from a seeded generator, so a construction is reproducible) and kept only if
every strict inequality the proof needs holds with a margin well above float64 rounding.
"""
from __future__ import annotations

import numpy as np

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


def leaders(zs: Seqs, g: np.ndarray, tol: float) -> tuple[list[int], float] | None:
    """Each sequence's unique maximiser of <g, z> (Lemma 3.2 ii) and the smallest margin; None on a tie."""
    found = [gap(z @ g) for z in zs]
    margin = min(m for _, m in found)
    return ([i for i, _ in found], margin) if margin > tol else None


def distance(a: np.ndarray, b: np.ndarray) -> float:
    """The smallest distance between a row of ``a`` and a row of ``b``."""
    return float(np.abs(a[:, None, :] - b[None, :, :]).max(axis=2).min())


def distinct(z: np.ndarray, tol: float) -> bool:
    """Assumption ii: the tokens of one sequence are pairwise distinct."""
    if len(z) < 2:
        return True
    diff = np.abs(z[:, None, :] - z[None, :, :]).max(axis=2)
    return float(diff[~np.eye(len(z), dtype=bool)].min()) > tol


def disjoint(zs: Seqs, tol: float) -> bool:
    """(3.2): no token is shared by two of the sequences ``zs``."""
    return all(distance(zs[a], zs[b]) > tol for a in range(len(zs)) for b in range(a))


def separated(zs: Seqs, upto: int, tol: float) -> bool:
    """The induction's invariant: sequences 0..upto-1 pairwise disjoint, every sequence's tokens distinct."""
    return disjoint(zs[:upto], tol) and all(distinct(z, tol) for z in zs)


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
