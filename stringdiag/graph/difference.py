"""Why two diagrams are not isomorphic: the first difference a reader can act on.

Isomorphism (``iso.py``) answers yes or no. When a derivation's result is not its target, the user
needs to know where they part, so the checks here go from the coarsest to the finest and stop at the
first that tells the two apart:

1. the boundary: the types of the inputs and outputs;
2. the boxes: how many of each kind and name (``learn Q``, ``fixed softmax``, a contraction of k
   factors), with their SIMD depth;
3. the weights: how the uses of each learnable name fall into weight sets (one set used twice is one
   function; two sets are two: weight sharing is semantics);
4. the wiring: the boxes of each that a greedy common structure grown from the two boundaries
   (``diff.py``) leaves without a counterpart in the other, the first in topological order named
   with its source line;
5. otherwise the two have the same boxes in the same places and differ in how their indices are
   ordered or summed at some box: the first such box, named.

:func:`difference` also gives the box of each diagram that the sentence names, which a derivation's
picture draws highlighted.
"""
from __future__ import annotations

import os
from collections import Counter
from ..syntax.records import Record

from ..errors import shown
from .box import Kind
from .diff import correspondence, label
from .weights import boxes_by_weights


def source_line(pos) -> str:
    """`` (FILE:LINE)`` of a box's source: a shipped file by its package name, a file under the
    current folder relative to it, any other as given; empty without a position."""
    line = getattr(pos, "line", None) if pos is not None else None
    if not line:
        return ""
    file = shown(str(getattr(pos, "file", "") or ""))
    if os.path.isabs(file):
        rel = os.path.relpath(file)
        file = rel if not rel.startswith("..") else file
    return f" ({file}:{line})" if file else f" (line {line})"


def _box(d, b: int) -> str:
    node = d.record(b)
    what = f"a contraction of {len(d.box_inputs(b))}" if node.kind is Kind.CONTRACT else f"'{node.op}'"
    return what + source_line(node.pos)


def _labels(d) -> Counter[tuple]:
    return Counter(label(d, b)[:3] for b in d.boxes())


def _show_label(lab) -> str:
    kind, name, depth = lab
    what = f"contraction of {name}" if kind is Kind.CONTRACT else f"{kind.value} '{name}'"
    return what + (f" over {depth} ind{'ex' if depth == 1 else 'ices'}" if depth else "")


def _sharing(d) -> dict[str, tuple[int, ...]]:
    """For each learnable name, the sizes of its weight sets (uses per set), sorted."""
    out: dict[str, list[int]] = {}
    for key, bs in boxes_by_weights(d).items():
        out.setdefault(d.record(bs[0]).op, []).append(len(bs))
    return {name: tuple(sorted(sizes)) for name, sizes in out.items()}


class Difference(Record):
    """Where two diagrams part: a sentence, and the box of each it names (None where it names none)."""

    text: str
    result_box: int | None = None
    target_box: int | None = None


def first_difference(result, target, names: tuple[str, str] = ("the result", "the target")) -> str:
    """One or a few lines: where ``result`` and ``target`` (both expanded as compared) part."""
    return difference(result, target, names).text


def _first_of(d, labels) -> int | None:
    return next((x for x in d.topological_boxes() if label(d, x)[:3] in labels), None)


def difference(result, target, names: tuple[str, str] = ("the result", "the target")) -> Difference:
    """:func:`first_difference` with the box of each diagram it names (to draw it highlighted)."""
    a, b = names
    if (result.input_types, result.output_types) != (target.input_types, target.output_types):
        return Difference(f"their types differ: {a} is {result.signature()}, {b} {target.signature()}")
    la, lb = _labels(result), _labels(target)
    if la != lb:
        more = [k for k, n in sorted(la.items(), key=str) if n > lb[k]]
        fewer = [k for k, n in sorted(lb.items(), key=str) if n > la[k]]
        parts = ([f"{a} has " + ", ".join(f"{la[k] - lb[k]} more {_show_label(k)}" for k in more)] if more else []) \
            + ([f"{b} has " + ", ".join(f"{lb[k] - la[k]} more {_show_label(k)}" for k in fewer)] if fewer else [])
        return Difference("their boxes differ: " + "; ".join(parts), _first_of(result, set(more)),
                          _first_of(target, set(fewer)))
    sa, sb = _sharing(result), _sharing(target)
    if sa != sb:
        name = next(n for n in sorted(set(sa) | set(sb)) if sa.get(n) != sb.get(n))
        return Difference(f"their weights differ: the uses of '{name}' fall into weight sets of "
                          f"{list(sa.get(name, ()))} uses in {a} and {list(sb.get(name, ()))} in {b} (one set is one "
                          "function)", _named(result, name), _named(target, name))
    return _wiring(result, target, a, b)


def _named(d, name: str) -> int | None:
    return next((x for x in d.topological_boxes() if d.record(x).op == name), None)


def _wiring(result, target, a: str, b: str) -> Difference:
    """The boxes left without a counterpart by the common structure, or paired boxes whose inputs differ."""
    m = correspondence(target, result)
    lost = [x for x in result.topological_boxes() if x not in m.boxes]
    if lost:
        theirs = next((y for y in target.topological_boxes() if y not in set(m.boxes.values())), None)
        return Difference(f"their wiring differs: {a}'s {_box(result, lost[0])} has no counterpart in {b} "
                          f"({len(lost)} box(es) of {a} have none)", lost[0], theirs)
    for x in result.topological_boxes():  # paired boxes whose inputs are not the paired wires
        y = m.boxes[x]
        got = [m.wires.get(w) for w, _ in result.box_inputs(x)]
        want = [w for w, _ in target.box_inputs(y)]
        if got != want:
            k = next(i for i, (g, w) in enumerate(zip(got, want)) if g != w)
            return Difference(f"their wiring differs: input {k + 1} of {a}'s {_box(result, x)} is not the wire that "
                              f"input {k + 1} of {b}'s {_box(target, y)} reads", x, y)
    x = next((x for x in result.topological_boxes() if _indexing(result, x) != _indexing(target, m.boxes[x])), None)
    if x is not None:
        return Difference(f"their indices differ: {a}'s {_box(result, x)} reads its inputs with its indices in "
                          f"another order (or sums others) than {b}'s {_box(target, m.boxes[x])}", x, m.boxes[x])
    return Difference("the same boxes on the same wires, with their indices in another order (or summed "
                      "differently) at some box")


def _indexing(d, x: int) -> tuple:
    """How box ``x`` reads its inputs, its labels by their place among its own (names do not matter)."""
    node = d.record(x)
    order = [lab for lab, _ in node.simd] + [lab for lab, _ in node.summed]
    return tuple(tuple(("label", order.index(a)) if isinstance(a, str) and a in order else a for a in axes)
                 for _, axes in d.box_inputs(x)), len(node.simd), len(node.summed)


__all__ = ["Difference", "difference", "first_difference", "source_line"]
