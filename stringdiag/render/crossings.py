"""Edges that Graphviz drew through a frame they do not enter, read off the SVG it made.

Graphviz's ``dot`` does not promise to route an edge around a cluster holding neither of its
ends (a long edge between SIMD boxes often runs straight through the frames between them).
The picture is then wrong: the edge looks iterated by a frame it is not in. ``draw.to_svg``
lays the picture out, asks this module which edges cross, and draws those as a pair of
numbered stubs instead, so that no edge of the finished picture crosses a frame.
"""
from __future__ import annotations

import re
from functools import lru_cache

from . import svgtree as ET  # xml.etree's calls on Graphviz's SVG, without importing xml.etree

SVG = "{http://www.w3.org/2000/svg}"
Box = tuple[float, float, float, float]  # x0, x1, y0, y1


def crossings(svg: str) -> set[tuple[str, str]]:
    """(tail, head) node names of every edge that passes inside a cluster holding neither end."""
    return set(_crossings(svg))


def centres(svg: str) -> dict[str, tuple[float, float]]:
    """The centre of every node of a picture drawn by Graphviz once (not a stack of rows), by
    node name: where the boxes of one step of a derivation were, for the next."""
    return dict(_centres(svg))


# a derivation's step is asked about several times (its order, its stubs, its crossings) as its
# layouts are weighed: each picture is read once
@lru_cache(maxsize=32)
def _crossings(svg: str) -> frozenset[tuple[str, str]]:
    found: set[tuple[str, str]] = set()
    for _, (clusters, nodes, edges) in _read(svg):
        for tail, head, curve in edges:
            ends = [_centre(nodes[n]) for n in (tail, head) if n in nodes] + [curve[0], curve[-1]]
            span = _bounds(curve)
            for box in clusters:
                if not _meets(span, box, 2.0):  # no point of the curve can be inside: skip the test
                    continue
                if not any(_inside(p, box) for p in ends) and any(_inside(p, box, 2.0) for p in curve):
                    found.add((tail, head))
    return frozenset(found)


@lru_cache(maxsize=32)
def _centres(svg: str) -> dict[str, tuple[float, float]]:
    drawings = _read(svg)
    if len(drawings) != 1:
        return {}
    out = {}
    for g in drawings[0][0].iter(SVG + "g"):
        text = g.find(SVG + "text")
        if (g.get("class") or "").split(" ")[0] == "node" and text is not None:  # a plain-text node: its text
            out[g.findtext(SVG + "title") or ""] = (float(text.get("x", 0)), float(text.get("y", 0)))
    out.update((name, _centre(box)) for name, box in drawings[0][1][1].items())
    return out


@lru_cache(maxsize=32)
def _read(svg: str) -> tuple[tuple[ET.Element, tuple[list[Box], dict[str, Box], list]], ...]:
    """Each Graphviz drawing of the document with its frames, nodes and edges (``_parts``)."""
    return tuple((d, _parts(d)) for d in _drawings(ET.fromstring(svg)))


def _drawings(root: ET.Element):
    """Each Graphviz drawing in the document (a stacked picture holds several)."""
    for e in root.iter(SVG + "svg"):
        g = e.find(SVG + "g")
        if g is not None and "graph" in (g.get("class") or "").split():
            yield g


def _parts(drawing: ET.Element) -> tuple[list[Box], dict[str, Box], list]:
    clusters, nodes, edges = [], {}, []
    for g in drawing.iter(SVG + "g"):
        cls, title = (g.get("class") or "").split(" ")[0], g.findtext(SVG + "title") or ""  # "node matched"
        shape = next((e for e in g if e.tag in (SVG + "polygon", SVG + "ellipse", SVG + "path")), None)
        if shape is None:
            continue
        if cls == "cluster":
            clusters.append(_bounds(_points(shape)))
        elif cls == "node":
            nodes[title] = _bounds(_points(shape))
        elif cls == "edge" and "->" in title and shape.tag == SVG + "path":
            tail, head = (end.split(":")[0] for end in title.split("->", 1))
            edges.append((tail, head, _curve(shape.get("d", ""))))
    return clusters, nodes, [e for e in edges if e[2]]


def _points(e: ET.Element) -> list[tuple[float, float]]:
    if e.tag == SVG + "ellipse":
        cx, cy, rx, ry = (float(e.get(k, 0)) for k in ("cx", "cy", "rx", "ry"))
        return [(cx - rx, cy - ry), (cx + rx, cy + ry)]
    return _pairs(e.get("points") or e.get("d") or "")


def _pairs(text: str) -> list[tuple[float, float]]:
    nums = [float(n) for n in re.findall(r"-?\d+(?:\.\d+)?(?:e-?\d+)?", text)]
    return list(zip(nums[0::2], nums[1::2]))


def _curve(d: str, samples: int = 10) -> list[tuple[float, float]]:
    """Points along Graphviz's path ``M p0 C p1 p2 p3 p4 p5 p6 ...`` (cubic Béziers)."""
    ps = _pairs(d)
    out = ps[:1]
    for i in range(1, len(ps) - 2, 3):
        p0, p1, p2, p3 = ps[i - 1:i + 3]
        for k in range(1, samples + 1):
            t = k / samples
            u = 1 - t
            out.append(tuple(u**3 * a + 3 * u * u * t * b + 3 * u * t * t * c + t**3 * e
                             for a, b, c, e in zip(p0, p1, p2, p3)))
    return out


def _bounds(points) -> Box:
    xs, ys = [x for x, _ in points], [y for _, y in points]
    return min(xs), max(xs), min(ys), max(ys)


def _centre(box: Box) -> tuple[float, float]:
    return (box[0] + box[1]) / 2, (box[2] + box[3]) / 2


def _meets(span: Box, box: Box, margin: float) -> bool:
    """Whether the rectangle ``span`` reaches into ``box`` shrunk by ``margin`` (``_inside``'s test)."""
    return span[0] < box[1] - margin and span[1] > box[0] + margin and span[2] < box[3] - margin \
        and span[3] > box[2] + margin


def _inside(p, box: Box, margin: float = 0.0) -> bool:
    x0, x1, y0, y1 = box
    return x0 + margin < p[0] < x1 - margin and y0 + margin < p[1] < y1 - margin
