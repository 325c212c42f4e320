"""Weight sets that a rewrite moved into a loop cell it brought in, and their new names.

``simd_unit`` read right to left makes ``y[t] = g(x[t])`` a scan of a cell holding ``g``. A local
weight set is named by the instances it lies in (``graph/weights.py``), so inside the new cell
``Unit#1`` the set ``H#1/L`` is called ``Unit#1/H#1/L``: the same weights under a new name. The
step must say so (the result's name -> the name before), or the oracle and ``derive --verify``
give the two sides different weights and reject a sound step. The set must then be used nowhere
else: a use left outside the cell (or moved into another cell) keeps another name, and one set
would become two, which no step may do.
"""
from __future__ import annotations

from ..errors import DiagError
from ..graph.box import Kind
from ..graph.diagram import Diagram
from ..graph.weights import WeightKey, rename_key, weight_sets
from ..graph.weightuse import uses


def enclosed(before: Diagram, after: Diagram) -> dict[WeightKey, WeightKey]:
    """The renamed sets of ``after`` (a rewrite of ``before`` that kept its untouched boxes'
    ids) -> their names in ``before``; a set moved in while still used elsewhere is refused."""
    old = set(before.boxes())
    correspond: dict[WeightKey, WeightKey] = {}
    for b in after.boxes():
        box = after.record(b)
        if b in old or box.kind is not Kind.DIAGRAM or not box.scan or box.instance is None:
            continue
        for key in sorted(weight_sets(box.ref), key=repr):
            if key[0] == Kind.LEARN and not key[1] or not uses(before, key):
                continue  # a global set keeps its name everywhere; a set new to the diagram is the cell's own
            if key in correspond.values() or uses(after, key):
                raise DiagError(f"the weights '{key[-1]}' would move into the loop's cell '{box.instance}' and "
                                "stay in use elsewhere too: that splits one set of weights into two")
            correspond[rename_key(key, f"{box.instance}/{key[-1]}")] = key
    return correspond


__all__ = ["enclosed"]
