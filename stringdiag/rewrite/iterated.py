"""A normal form for comparing rewritten diagrams: contractions with every free axis iterated.

``y[i] = sum_j a[i, j] * v[j]`` (a local axis over v's features) and
``y[i, c] = sum_j a[i, j] * v[j, c]`` are one contraction written two ways; ``iso.py``
tells them apart, matching does not. Comparing ``iterated(a)`` with ``iterated(b)`` asks
whether two diagrams are equal up to renaming *and* that spelling.
"""
from __future__ import annotations

from ..graph.box import Kind
from ..graph.diagram import Diagram


def iterated(d: Diagram) -> Diagram:
    """A copy in which every contraction's local axes are SIMD labels."""
    out = d.copy()
    for b in list(out.boxes()):
        node = out.record(b)
        if node.kind is not Kind.CONTRACT:
            continue
        loc = out.local_out_type(b, 0)
        if not loc:
            continue
        taken = {lab for lab, _ in tuple(node.simd) + tuple(node.summed)}
        labels = []
        for k, dim in enumerate(loc):
            lab = dim.name or f"c{k}"
            while lab in taken:
                lab += "'"
            taken.add(lab)
            labels.append(lab)
        out.update(b, simd=tuple(node.simd) + tuple(zip(labels, loc)),
                    display={**(node.display or {}), **{lab: lab for lab in labels}})
        for port, (w, axes) in enumerate(out.box_inputs(b)):
            out.rewire(b, port, w, tuple(labels[x] if isinstance(x, int) else x for x in axes))
    return out


__all__ = ["iterated"]
