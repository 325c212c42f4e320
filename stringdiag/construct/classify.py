"""Classification (Sec. 3.1, T_cla): the M label points are driven into their target sets.

The paper takes these blocks from Ruiz-Balet and Zuazua [15, Theorem 4.1], which is not part of
this repository; this is a reconstruction with the same ingredients (attention the identity,
feed-forward layers of hidden width one), in 2M <= 2N blocks, within the paper's 5(N + 1).
Each block moves exactly one point: the one a hyperplane cuts off from all others. First every
point, highest along a direction e first, is parked on an arc far below the data along e; then
each parked point, cut off by the tangent to the arc, is moved to its target's centre.
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import DiagError
from .blocks import Block, feed_forward, make
from .geometry import direction, gap, single_out, tolerance

STAGE = "classification"


def move(points: np.ndarray, i: int, normal: np.ndarray, to: np.ndarray, note: str, tol: float) -> Block:
    """A block whose feed-forward layer moves point i, and no other, to ``to``."""
    i_top, margin = gap(points @ normal)
    if i_top != i or margin <= tol:
        raise DiagError("internal: the classification step cannot cut one point off")
    margin = margin if math.isfinite(margin) else 2.0  # a lone point: any cut will do
    b = -(points[i] @ normal - margin / 2)
    return make(STAGE, note, len(normal), u=normal, b=b, w=(to - points[i]) / (margin / 2))


def arc(centre: np.ndarray, e: np.ndarray, e2: np.ndarray, radius: float, m: int) -> list[np.ndarray]:
    """m points on a circle, spread over 120 degrees around the direction -e."""
    step = (2 * math.pi / 3) / max(m, 1)
    return [centre + radius * (-math.cos(a) * e + math.sin(a) * e2)
            for a in ((k - (m - 1) / 2) * step for k in range(m))]


def classify(points: np.ndarray, centres: np.ndarray, rng: np.random.Generator) -> tuple[list[Block], np.ndarray]:
    """Move point k (one per label, distinct) to ``centres[k]``, in 2M blocks."""
    d, tol = points.shape[1], tolerance([points, centres])
    c0 = centres.mean(axis=0)
    s = max(float(np.linalg.norm(np.concatenate([points, centres]) - c0, axis=1).max()), 1e-300)
    e = direction(rng, d)
    e2 = direction(rng, d)
    e2 = (e2 - (e2 @ e) * e) / np.linalg.norm(e2 - (e2 @ e) * e)
    park = arc(c0 - 4 * s * e, e, e2, s, len(points))
    blocks: list[Block] = []
    order: list[int] = []
    for slot in range(len(points)):  # phase 1: the point highest along a direction near e, onto the arc
        i, h, _ = single_out(points, e, rng, tol, allowed=set(range(len(points))) - set(order))
        order.append(i)
        blk = move(points, i, h, park[slot], f"park point {slot + 1} on the arc", tol)
        blocks.append(blk)
        points = feed_forward(blk, points)
    for slot, i in enumerate(order):  # phase 2: each parked point to its target, cut off by the tangent
        normal = (park[slot] - (c0 - 4 * s * e)) / s
        blk = move(points, int(i), normal, centres[i], f"parked point {slot + 1} to its target", tol)
        blocks.append(blk)
        points = feed_forward(blk, points)
    return blocks, points
