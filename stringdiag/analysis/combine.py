"""What a diagram's expansion holds, computed per definition and combined, never expanded.

``d.expand()`` inlines every definition, so a file whose definitions each use the previous
one twice expands to ``2^n`` boxes. Everything ``stringdiag info`` and a derivation's table
report about the expansion (boxes by kind, asymptotic cost, the dimensions it needs,
learnable boxes, weight sets and parameter counts) is instead one fold over the
definitions (``fold.py``): each computed once from its own body and the values of the
definitions it uses, linear in the source, not in the expansion. The results are those of
the expansion (``tests/test_info_linear.py`` compares the two). The algebras:

- ``shape.py``: boxes by kind and cost (:func:`shape`, :func:`expanded_counts`,
  :func:`cost_monomials`);
- ``dimensions.py``: the sizes a compiled module needs (:func:`dimensions`);
- ``learnables.py``: weight sets and their uses (:func:`weights`, :func:`learnables`);
- ``parameters.py``: parameter counts (:func:`parameter_count`).

This module gathers their public names, which callers import from here.
"""
from __future__ import annotations

from .dimensions import dimensions
from .learnables import LIST_LIMIT, Weights, learnables, weights
from .parameters import FORMULAS, parameter_count, via_parameters
from .shape import Shape, cost_monomials, expanded_box_count, expanded_counts, shape

__all__ = ["shape", "dimensions", "expanded_counts", "expanded_box_count", "cost_monomials", "learnables", "parameter_count",
           "weights", "LIST_LIMIT", "FORMULAS", "via_parameters", "Shape", "Weights"]
