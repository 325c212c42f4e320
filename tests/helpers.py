"""What many tests share: the self-attention source they start from, and relative errors.

Imported as ``from helpers import ...`` (pytest puts this folder on the path of the tests in it).

>>> import torch
>>> a, b = torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.5])
>>> round(rel_max(a, b), 3), round(rel_norm(a, b), 3)
(0.2, 0.186)
"""
from __future__ import annotations

import math

import torch

# the declarations self-attention needs, for a file of its own
ATTENTION_DECLS = """\
dim s : seq
dim d, k : fixed
learn Q, K : [d] -> [k]
learn V : [d] -> [d]
"""

# Attention (Vaswani et al. 2017) written out index by index: a box per projection, the scores
# a contraction over f, softmax along j scaled by sqrt(k), the output a contraction over j.
SELF_ATTENTION = """\
diagram SelfAttention(x: [s, d]) -> [s, d] {
  q[i] = Q(x[i])
  kk[j] = K(x[j])
  v[j] = V(x[j])
  e[i, j] = sum_f q[i, f] * kk[j, f]
  a[i] = softmax(e[i] / sqrt(k))
  y[i] = sum_j a[i, j] * v[j]
  return y
}
"""


def rel_norm(a: torch.Tensor, b: torch.Tensor) -> float:
    """||a - b|| / ||b|| (Frobenius): an error averaged over the entries, against the reference ``b``."""
    return ((a - b).norm() / b.norm()).item()


def rel_max(a: torch.Tensor, b: torch.Tensor) -> float:
    """max |a - b| / max |b|: the worst entry, against the reference ``b``'s largest (0 when both
    vanish; ``inf`` when only ``b`` does, when the shapes differ or when an entry is not finite,
    so that it never passes a tolerance by accident)."""
    if a.shape != b.shape or not (torch.isfinite(a).all() and torch.isfinite(b).all()):
        return math.inf
    if not a.numel():
        return 0.0
    a, b = a.detach(), b.detach()
    err, scale = (a - b).abs().max().item(), b.abs().max().item()
    return err / scale if scale else (0.0 if err == 0 else math.inf)
