"""Where each box is drawn: the frames (SIMD boxes, opened definitions) around it.

A box records the frames of the source statement it came from (``clusters``: outer to
inner). That record can say more than the box does: a constant or a learnable tensor
inlined into a statement over ``i`` is not iterated over ``i`` (the elaborator tightens it
out), and a rewrite can move a box out of a SIMD box. So a box is drawn inside exactly the
SIMD boxes it iterates (its ``simd``), matched to the recorded frames by the index shown and
its range; an index with no recorded frame gets one of its own.

One statement's SIMD frame can also hold boxes that are not connected inside it (a layer
norm and a residual add, with an attention that is not per-position between them): drawn
as one frame it would swallow the attention's place. A SIMD frame is therefore split into
its connected parts (boxes joined by wires that stay inside the frame), each drawn apart.
"""
from __future__ import annotations

from collections import Counter
from typing import Hashable

from ..graph.box import Kind
from ..graph.box import Box
from ..graph.clusters import Cluster, SimdFrame
from ..graph.diagram import Diagram
from ..graph.multigraph import longest_path_length

Frame = Cluster  # a SIMD box or an opened definition (``graph/clusters.py``), as in ``clusters``
Key = tuple  # (frame, part): one drawn frame


def _shown(node: Box) -> list[tuple[str, str]]:
    """The box's SIMD indices as the picture names them: (label shown, range)."""
    display = (node.display or {})
    return [(display.get(label, label), str(dim)) for label, dim in node.simd]


def recorded(node: Box, b: Hashable) -> list[Frame]:
    """The box's frames: its recorded ones, less the SIMD frames it does not iterate, plus
    a frame of its own (innermost) for each index it iterates that no frame records."""
    want = Counter(_shown(node))
    out: list[Frame] = []
    for frame in node.clusters:
        if not frame.is_simd:
            out.append(frame)
            continue
        key = (frame.label, str(frame.dim))
        if want[key] > 0:
            want[key] -= 1
            out.append(frame)
    scan = bool(node.scan)
    for label, dim in _shown(node):
        if want[(label, dim)] > 0:
            want[(label, dim)] -= 1
            out.append(SimdFrame(("box", b), label, dim, scan))
    return out


def _parts(d: Diagram, members: list[int]) -> dict[int, int]:
    """Each member's connected part, joined by wires from one member to another; parts are
    numbered in order of their first box."""
    inside = set(members)
    near: dict[int, set[int]] = {b: set() for b in members}  # joined either way
    for b in members:
        for w in d.box_outputs(b):
            for c, _ in d.consumers(w):
                if c in inside:
                    near[b].add(c)
                    near[c].add(b)
    part: dict[int, int] = {}
    parts = 0
    for b in members:  # in order: a part is numbered by its first box
        if b in part:
            continue
        part[b], todo = parts, [b]
        while todo:
            for c in near[todo.pop()] - part.keys():
                part[c] = parts
                todo.append(c)
        parts += 1
    return part


def frames(d: Diagram) -> dict[int, tuple[Key, ...]]:
    """Every box's drawn frames, outer to inner: SIMD frames split into connected parts."""
    paths = {b: recorded(d.record(b), b) for b in d.boxes()}
    drawn: dict[int, tuple[Key, ...]] = {b: () for b in paths}
    depth = max((len(p) for p in paths.values()), default=0)
    for k in range(depth):
        groups: dict[tuple, list[int]] = {}
        for b, path in paths.items():
            if len(path) > k:
                groups.setdefault((drawn[b], path[k]), []).append(b)
        for (outer, frame), members in groups.items():
            part = _parts(d, members) if frame.is_simd else dict.fromkeys(members, 0)
            for b in members:
                drawn[b] = outer + ((frame, part[b]),)
    return drawn


# boxes that compute nothing from the picture: drawn where they are read
_SOURCES = (Kind.CONST, Kind.FIXED)


def _shared(paths: list[tuple]) -> tuple:
    """The frames every path lies in: their longest common prefix."""
    if not paths:
        return ()
    first = paths[0]
    n = min(len(p) for p in paths)
    k = next((i for i in range(n) if any(p[i] != first[i] for p in paths)), n)
    return first[:k]


def _readers(d: Diagram, b: int) -> list[int] | None:
    """The boxes reading ``b``'s outputs; None when an output of the diagram reads one."""
    outs = d.box_outputs(b)
    if any(w in d.outputs for w in outs):
        return None
    return [r for w in outs for r, _ in d.consumers(w)]


def placed(d: Diagram, drawn: dict[int, tuple[Key, ...]]) -> dict[int, tuple[Key, ...]]:
    """The drawn frames, with a constant (a number, a fixed tensor such as a mask: a box with
    no inputs) moved into the frames all its readers share: it is the same in every
    iteration, and drawn beside its readers its wire crosses no frame. A picture only: the
    frames a box iterates are ``frames``'."""
    out = dict(drawn)
    for b, path in drawn.items():
        if d.record(b).kind not in _SOURCES or d.box_inputs(b):
            continue
        readers = _readers(d, b)
        if readers:
            out[b] = _shared([drawn[r] for r in readers])
    return out


def copy_points(d: Diagram, drawn: dict[int, tuple[Key, ...]], only: set[int] | None = None) -> dict[tuple, list[int]]:
    """Where each copied wire splits (wire ids by drawn frame): in the frames all its readers
    share, so that the branches to them stay inside those frames. A wire an output of the
    diagram reads, or (``only``: one row of a stack) read outside ``only``, splits outside
    every frame."""
    out: dict[tuple, list[int]] = {}
    for w in d.wires():
        readers = [r for r, _ in d.consumers(w)]
        if len(readers) < 2 or w in d.outputs or (only is not None and not set(readers) <= only):
            continue
        path = _shared([drawn[r] for r in readers])
        if path:
            out.setdefault(path, []).append(w)
    return out


# boxes along the longest path beyond which a picture is wrapped into rows (a stack of layers)
LONG = 48


def rows(d: Diagram, drawn: dict[int, tuple[Key, ...]]) -> dict[int, Hashable] | None:
    """For a long picture with several opened definitions at its top (the layers of an
    expanded stack), each box's row: its outermost opened definition (None outside any).
    Wires between rows do not push a row to the right of the one before, so Graphviz stacks
    the layers instead of drawing one line thousands of points long. None: one row."""
    if longest_path_length(d.graph) // 2 <= LONG:
        return None
    out = {b: next((key for key in path if not key[0].is_simd), None) for b, path in drawn.items()}
    return out if len(set(out.values()) - {None}) > 1 else None


__all__ = ["frames", "recorded", "rows", "placed", "copy_points", "LONG", "Frame", "Key"]
