"""Dot's finished layout (``dot -Tdot``), parsed and editable, for a picture we place ourselves.

``dot -Tdot`` writes the graph back with every node's place and size, every frame's box and
label, every edge's curve. ``stacked.py`` reads it (``parse``, ``Blocks``), moves blocks, edits
the attributes in place (``Layout.set``) and has ``neato -n2`` draw the result (``_neato``): the
places as given, the curves as given, an edge with no curve routed by neato. ``_clear`` says
whether a curve moved with its ends still runs clear of the frames holding neither end.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from .crossings import _curve
from .dotrun import laid_out

TOKEN = re.compile(r'\s+|"(?:[^"\\]|\\.)*"|->|[{}\[\];=,:]|(?:[^\s{}\[\];=,"<>:-]|-(?!>))+|<', re.S)
Rect = tuple[float, float, float, float]  # x0, x1, y0, y1, y down (as in the SVG)


def _tokens(text: str) -> list[str]:
    """DOT's tokens, an HTML string (``<...>``, nested) as one."""
    out, i = [], 0
    while i < len(text):
        if text[i] == "<":
            depth, j = 0, i
            while True:
                depth += {"<": 1, ">": -1}.get(text[j], 0)
                j += 1
                if depth == 0:
                    break
            out.append(text[i:j])
            i = j
            continue
        m = TOKEN.match(text, i)
        if not m.group().isspace():
            out.append(m.group())
        i = m.end()
    return out


def _unquote(value: str) -> str:
    return value[1:-1].replace("\\\n", "").replace('\\"', '"') if value.startswith('"') else value


@dataclass
class _Attrs:
    """One statement's attribute list: name -> index of its value token."""
    where: dict[str, int] = field(default_factory=dict)


@dataclass
class Layout:
    """Dot's finished layout, editable in place and written back as DOT."""
    tokens: list[str]
    nodes: dict[str, _Attrs] = field(default_factory=dict)
    clusters: dict[str, _Attrs] = field(default_factory=dict)
    edges: list[tuple[str, str, _Attrs]] = field(default_factory=list)
    parent: dict[tuple[str, str], str] = field(default_factory=dict)  # ("node"|"cluster", name) -> cluster ("": none)
    root: _Attrs = field(default_factory=_Attrs)  # the whole graph's attributes (its box, its label)

    def get(self, attrs: _Attrs, key: str) -> str | None:
        k = attrs.where.get(key)
        return None if k is None else _unquote(self.tokens[k])

    def set(self, attrs: _Attrs, key: str, value: str) -> None:
        self.tokens[attrs.where[key]] = f'"{value}"'

    def text(self) -> str:
        return "\n".join(self.tokens)


def parse(text: str) -> Layout:
    """The statements of ``dot -Tdot``'s output that matter here: nodes, clusters, edges."""
    out = Layout(_tokens(text))
    t = out.tokens
    stack: list[str] = []  # the subgraphs open; "" for one that is not a cluster
    i = 0
    while i < len(t):
        if t[i] == "subgraph":
            stack.append(t[i + 1] if _unquote(t[i + 1]).startswith("cluster") else "")
            i += 3
            continue
        if t[i] == "}":
            stack and stack.pop()
            i += 1
            continue
        if i + 1 < len(t) and t[i + 1] in ("[", "->") and t[i] not in ("graph", "node", "edge"):
            i = _statement(out, t, i, next((s for s in reversed(stack) if s), ""))
            continue
        if t[i] == "graph" and not stack and t[i + 1] == "[" and not out.root.where:
            out.root, i = _attrs(t, i + 1)
            continue
        if t[i] == "graph" and stack and stack[-1] and t[i + 1] == "[":
            attrs, i = _attrs(t, i + 1)
            name = _unquote(stack[-1])
            out.clusters[name] = attrs
            outer = next((_unquote(s) for s in reversed(stack[:-1]) if s), "")
            out.parent[("cluster", name)] = outer
            continue
        i += 1
    return out


def _statement(out: Layout, t: list[str], i: int, cluster: str) -> int:
    tail = _unquote(t[i])
    if t[i + 1] == "->":
        head = _unquote(t[i + 2])
        attrs, j = _attrs(t, i + 3) if i + 3 < len(t) and t[i + 3] == "[" else (_Attrs(), i + 3)
        out.edges.append((tail, head, attrs))
        return j
    attrs, j = _attrs(t, i + 1)
    out.nodes.setdefault(tail, attrs)
    out.parent.setdefault(("node", tail), _unquote(cluster))
    return j


def _attrs(t: list[str], i: int) -> tuple[_Attrs, int]:
    """The attribute list opening at ``t[i] == '['``; the index after its ``]``."""
    out = _Attrs()
    j = i + 1
    while t[j] != "]":
        if t[j + 1] == "=":
            out.where[t[j]] = j + 2
            j += 3
        else:
            j += 1
    return out, j + 1


def _floats(text: str) -> list[float]:
    return [float(x) for x in re.findall(r"-?\d+(?:\.\d+)?(?:e-?\d+)?", text)]


class Blocks:
    """The geometry of a layout in the SVG's orientation (y down), by block: a node or a frame."""

    def __init__(self, lay: Layout):
        self.lay = lay
        self.rect: dict[tuple[str, str], Rect] = {}
        for name, a in lay.nodes.items():
            if lay.get(a, "style") == "invis" or lay.get(a, "pos") is None:
                continue
            x, y = _floats(lay.get(a, "pos"))[:2]
            w, h = (float(lay.get(a, k) or 0) * 36 for k in ("width", "height"))
            self.rect[("node", name)] = (x - w, x + w, -y - h, -y + h)
        for name, a in lay.clusters.items():
            if lay.get(a, "bb"):
                x0, y0, x1, y1 = _floats(lay.get(a, "bb"))
                self.rect[("cluster", name)] = (x0, x1, -y1, -y0)
        self.children: dict[str, list[tuple[str, str]]] = {}
        self.held: dict[tuple[str, str], set[str]] = {}  # a frame's nodes, once worked out
        for key in self.rect:
            self.children.setdefault(lay.parent.get(key, ""), []).append(key)

    def members(self, key: tuple[str, str]) -> set[str]:
        """The nodes a block holds (itself, for a node)."""
        if key[0] == "node":
            return {key[1]}
        if key not in self.held:
            self.held[key] = set().union(*(self.members(k) for k in self.children.get(key[1], [])))
        return self.held[key]

    def centre(self, node: str) -> tuple[float, float]:
        x0, x1, y0, y1 = self.rect[("node", node)]
        return (x0 + x1) / 2, (y0 + y1) / 2


def _overlap(a: Rect, b: Rect) -> bool:
    return a[0] < b[1] and b[0] < a[1] and a[2] < b[3] and b[2] < a[3]


def _neato(lay: Layout) -> str:
    """``neato -n2``'s SVG of the layout: places and curves as given, an edge with none routed."""
    return laid_out(lay.text(), "neato")[0]


def _foreign(blocks: Blocks, tail: str, head: str) -> list[Rect]:
    """The frames holding neither end of an edge."""
    return [r for (kind, name), r in blocks.rect.items()
            if kind == "cluster" and not {tail, head} & blocks.members((kind, name))]


def _inside(p: tuple[float, float], r: Rect, margin: float = 2.0) -> bool:
    return r[0] + margin < p[0] < r[1] - margin and r[2] + margin < p[1] < r[3] - margin


def _within(r: Rect, outer: Rect) -> bool:
    return outer[0] <= r[0] and r[1] <= outer[1] and outer[2] <= r[2] and r[3] <= outer[3]


def _clear(blocks: Blocks, pos: str, tail: str, head: str, dy: float) -> bool:
    """Whether an edge's curve moved by ``dy`` (dot's y, up), as its two ends moved, runs
    through no frame holding neither end."""
    curve = _sampled([(x, -y) for x, y in _points(_moved_points(pos, dy))])
    xs, ys = [x for x, _ in curve], [y for _, y in curve]
    x0, x1, y0, y1 = min(xs), max(xs), min(ys), max(ys)  # a frame these bounds do not reach holds no point
    near = [r for r in _foreign(blocks, tail, head) if x0 < r[1] - 2 and x1 > r[0] + 2 and y0 < r[3] - 2 and y1 > r[2] + 2]
    return not any(_inside(p, r) for r in near for p in curve)


def _sampled(pts: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Points along the cubic Béziers of a DOT spline (its control points, the arrow's tip last)."""
    ctrl = pts[:-1] if len(pts) % 3 == 2 else pts
    return _curve("M" + " ".join(f"{x!r},{y!r}" for x, y in ctrl))


POINT = re.compile(r"(-?\d+(?:\.\d+)?(?:e-?\d+)?),(-?\d+(?:\.\d+)?(?:e-?\d+)?)")


def _points(text: str) -> list[tuple[float, float]]:
    """A DOT point list's points, tail first (``e,x,y``, the arrow's tip, last)."""
    pts = [(float(m.group(1)), float(m.group(2))) for m in POINT.finditer(text)]
    return pts[1:] + pts[:1] if text.startswith("e,") else pts


def _moved_points(text: str, dy: float) -> str:
    """A DOT point list (``e,x,y x,y ...``) moved by ``dy`` (dot's orientation)."""
    return POINT.sub(lambda m: f"{float(m.group(1)):.2f},{float(m.group(2)) + dy:.2f}", text)
