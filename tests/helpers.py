"""What many tests share: the self-attention source they start from, and relative errors.

Imported as ``from helpers import ...`` (pytest puts this folder on the path of the tests in it).

>>> import torch
>>> a, b = torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.5])
>>> round(rel_max(a, b), 3), round(rel_norm(a, b), 3)
(0.2, 0.186)
"""
from __future__ import annotations

import math
import os

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


def ci(env=os.environ) -> bool:
    """Whether the suite runs under continuous integration: ``CI`` set to anything but empty,
    ``0``, ``false``, ``no`` or ``off`` (any case). There a missing test dependency or program
    fails instead of skipping (``.ci/run`` exports ``CI=true``; ``conftest.py`` enforces it).

    >>> ci({"CI": "true"}), ci({"CI": "1"}), ci({"CI": "False"}), ci({"CI": ""}), ci({})
    (True, True, False, False, False)
    """
    return env.get("CI", "").strip().lower() not in ("", "0", "false", "no", "off")


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


def agreement(ours, twin, ref, y, y_ref, mapping) -> tuple[float, float]:
    """(forward error, worst gradient error over every weight of ``ours``) of a port: one random
    cotangent pulled back through both outputs, the reference's gradients carried to our names by
    the map that carried its weights (into ``twin``, another compile of the same diagram)."""
    import stringdiag

    cot = torch.randn(y.shape, generator=torch.Generator().manual_seed(6), dtype=torch.float64)
    (y * cot).sum().backward()
    (y_ref * cot).sum().backward()
    grads = {n: (p.grad if p.grad is not None else torch.zeros_like(p)) for n, p in ref.named_parameters()}
    stringdiag.load_weights(twin, grads, mapping)
    mine = dict(ours.named_parameters())
    return rel_max(y, y_ref), max(rel_max(mine[n].grad, p.detach()) for n, p in twin.named_parameters())
