"""Frames of one column put back in the order of the picture before, after dot's layout.

Dot orders the boxes of one rank that lie in different frames (clusters) itself: an ordering
edge between two frames is dropped. So a derivation's step can swap two frames the step did
not touch. This pass takes dot's finished layout (``dot -Tdot``: every node's place, every
frame's box, every edge's curve) and moves sibling blocks (a frame with all it holds, or a
box) of one column up or down while that puts more untouched boxes back in their order
before: two blocks swap, or one is lifted over the blocks above it (or dropped under those
below) and those move by its height (``_moves``). A move is made only if no block lands on
another, every block stays inside its frame, the wires stay short (``STRETCH``) and every
wire can still be drawn clear of the frames it does not enter (``_clear``). ``neato -n2``
draws the result: nodes and frames where they are now, an edge within a moved block moved
with it, an edge between blocks that moved apart routed afresh by neato, or, where that
runs through a frame, dot's curve bent from its tail's shift to its head's over the widest
stretch that stays clear (``_window``), every other edge as dot drew it.
"""
from __future__ import annotations

import functools
import math
import re
import subprocess
from dataclasses import dataclass, field

from .crossings import _curve, crossings

TOKEN = re.compile(r'\s+|"(?:[^"\\]|\\.)*"|->|[{}\[\];=,:]|(?:[^\s{}\[\];=,"<>:-]|-(?!>))+|<', re.S)
Rect = tuple[float, float, float, float]  # x0, x1, y0, y1, y down (as in the SVG)
PASSES = 6  # of swapping: each pass may free another swap
STRETCH = 1.1  # at most this much longer wires, end to end, than dot drew


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
        self.near: dict[str, set[str]] = {}  # node -> the nodes wired to it
        for t, h, _ in lay.edges:
            self.near.setdefault(t, set()).add(h)
            self.near.setdefault(h, set()).add(t)
        self.children: dict[str, list[tuple[str, str]]] = {}
        self.held: dict[tuple[str, str], set[str]] = {}  # a frame's nodes, once worked out
        self.tangled: set[int] = set()  # edges dot ran through a frame (``_tangled``): not held against a move
        for key in self.rect:
            self.children.setdefault(lay.parent.get(key, ""), []).append(key)

    def tied(self, key: tuple[str, str], members: set[str]) -> bool:
        """Whether ``key`` is a point wired only to ``members`` (it moves with them)."""
        return key[0] == "node" and bool(self.near.get(key[1])) and self.near[key[1]] <= members

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


def _union(a: Rect, b: Rect) -> Rect:
    return min(a[0], b[0]), max(a[1], b[1]), min(a[2], b[2]), max(a[3], b[3])


def reorder(source: str, before: dict[str, tuple[float, float]], disorder) -> str | None:
    """The picture of ``source`` (DOT) laid out by dot, with sibling blocks moved while that
    lowers ``disorder(centres, before)`` (and the wires stay short), drawn by ``neato -n2`` as
    SVG; None when no move helps. No move is made that leaves a wire no way clear of the
    frames (``_clear``)."""
    laid = subprocess.run(["dot", "-Tdot"], input=source, capture_output=True, text=True, check=True).stdout
    lay = parse(laid)
    blocks = Blocks(lay)
    blocks.tangled = _tangled(blocks)
    now = {n: blocks.centre(n) for kind, n in blocks.rect if kind == "node"}
    start = best = disorder(now, before)
    wires = [(t, h) for t, h, _ in lay.edges if t in now and h in now]
    limit = STRETCH * _length(now, wires)
    score = lambda trial: disorder(trial, before) if _length(trial, wires) <= limit else best  # noqa: E731
    moved: dict[str, float] = {}  # node -> how far it moved down
    for _ in range(PASSES):
        swapped = False
        for items in blocks.children.values():
            for a in items:
                for b in items:
                    for move in _moves(blocks, items, a, b):
                        gain = _try_move(blocks, items, move, now, score, best, moved)
                        if gain is not None:
                            best, swapped = gain, True
                            break
        if not swapped or not best:
            break
    if best >= start:
        return None
    _rewrite(lay, blocks, moved)
    return _drawn(lay, moved)


def _drawn(lay: Layout, moved: dict[str, float]) -> str:
    """``neato -n2``'s SVG of the moved layout. An edge whose ends moved apart is routed
    afresh by neato (straight, arrowhead on its head), unless that runs it through a frame:
    then dot's curve sheared (``_rewrite``) is drawn."""
    apart = [a for t, h, a in lay.edges if moved.get(t, 0.0) != moved.get(h, 0.0) and lay.get(a, "pos")]
    sheared = {id(a): lay.get(a, "pos") for a in apart}
    for a in apart:
        lay.set(a, "pos", "")
    svg = _neato(lay)
    bad = crossings(svg)
    if bad:
        for t, h, a in lay.edges:
            if (t, h) in bad and id(a) in sheared:
                lay.set(a, "pos", sheared[id(a)])
        svg = _neato(lay)
    return svg


def _neato(lay: Layout) -> str:
    return subprocess.run(["neato", "-n2", "-Gsplines=true", "-Tsvg"], input=lay.text(), capture_output=True,
                          text=True, check=True).stdout


def _length(at: dict[str, tuple[float, float]], wires: list[tuple[str, str]]) -> float:
    """The wires' length, end to end: a move must not stretch them much (``STRETCH``)."""
    return sum(math.dist(at[t], at[h]) for t, h in wires)


def _groups(blocks: Blocks, items, keys) -> list[list[tuple[str, str]]]:
    """Each block of ``keys`` with the sibling points only it is wired to (a deletion dot, a
    copy point, a stub: ``Blocks.tied``), which move with it."""
    out, taken = [], set(keys)
    for k in keys:
        extra = [c for c in items if c not in taken and blocks.tied(c, blocks.members(k))]
        taken.update(extra)
        out.append([k, *extra])
    return out


def _rect(blocks: Blocks, group) -> Rect:
    return functools.reduce(_union, (blocks.rect[c] for c in group))


def _moves(blocks: Blocks, items, a, b):
    """The ways to put block ``b``, below ``a`` in one column, above it: swap the two, lift
    ``b`` to ``a``'s top with ``a`` and the blocks between moved down, or drop ``a`` to
    ``b``'s bottom with ``b`` and those between moved up; each as [(group, dy)]."""
    if a == b or not _above(blocks.rect[a], blocks.rect[b]):
        return
    ga = _groups(blocks, [c for c in items if c != b], [a])[0]
    gb = _groups(blocks, [c for c in items if c != a], [b])[0]
    ra, rb = _rect(blocks, ga), _rect(blocks, gb)
    if not _above(ra, rb):
        return
    yield [(ga, rb[3] - ra[3]), (gb, ra[2] - rb[2])]  # swap
    taken = set(ga) | set(gb)
    rest = [c for c in items if c not in taken]
    span = _union(ra, rb)
    between = [g for g in _groups(blocks, rest, rest) if _within_column(_rect(blocks, g), span)]
    if not between:
        return
    above_b = [_rect(blocks, g)[3] for g in [ga, *between] if _overlap_x(_rect(blocks, g), rb)] or [ra[3]]
    lift = rb[3] - rb[2] + max(0.0, rb[2] - max(above_b))  # b's height and its gap
    yield [(gb, ra[2] - rb[2]), (ga, lift), *((g, lift) for g in between if _rect(blocks, g)[3] <= rb[2])]
    below_a = [_rect(blocks, g)[2] for g in [gb, *between] if _overlap_x(_rect(blocks, g), ra)] or [rb[2]]
    drop = ra[3] - ra[2] + max(0.0, min(below_a) - ra[3])
    yield [(ga, rb[3] - ra[3]), (gb, -drop), *((g, -drop) for g in between if _rect(blocks, g)[2] >= ra[3])]


def _within_column(r: Rect, span: Rect) -> bool:
    """Whether ``r`` lies between the top and bottom of ``span`` and shares some of its x range."""
    return span[2] <= r[2] and r[3] <= span[3] and _overlap_x(r, span)


def _above(a: Rect, b: Rect) -> bool:
    """Whether ``a`` lies above ``b`` in one column (their x ranges overlap)."""
    return a[3] <= b[2] and _overlap_x(a, b)


def _overlap_x(a: Rect, b: Rect) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def _try_move(blocks: Blocks, items, move, now, disorder, best, moved) -> int | None:
    """Move each group of ``move`` down by its dy, with the points outside wired only to it,
    if no block lands on another and the disorder falls; the new disorder, or None."""
    move = [(list(g), dy) for g, dy in move if dy]
    if not move:
        return None
    moving = {c for g, _ in move for c in g}
    for g, dy in move:  # a point outside wired only to the block goes with it
        inside = set().union(*map(blocks.members, g))
        far = [key for key in blocks.rect if key not in items and key[1] not in inside and blocks.tied(key, inside)]
        if not all(_free(blocks, key, dy, inside) for key in far):
            return None
        g += far
    at = {c: _shifted(blocks.rect[c], dy) for g, dy in move for c in g}
    parent = blocks.lay.parent
    for c, r in at.items():
        for other in items:
            if other != c and _overlap(r, at.get(other, blocks.rect[other])):
                return None
        p = parent.get(c, "")
        if c in items and p and not _within(r, blocks.rect[("cluster", p)]):
            return None
    shift = {n: dy for g, dy in move for c in g for n in blocks.members(c)}
    trial = {n: (x, y + shift.get(n, 0.0)) for n, (x, y) in now.items()}
    score = disorder(trial)
    if score >= best:
        return None
    for g, dy in move:
        for c in g:
            _shift_rects(blocks, c, dy)
    total = {n: moved.get(n, 0.0) + shift.get(n, 0.0) for n in set(moved) | set(shift)}
    if not _clear(blocks, total):  # a wire would run through a frame: undone
        for g, dy in move:
            for c in g:
                _shift_rects(blocks, c, -dy)
        return None
    now.update(trial)
    moved.update(total)
    return score


def _clear(blocks: Blocks, total: dict[str, float]) -> bool:
    """Whether every edge, moved as its ends moved (``total``: how far down), can run through no
    frame holding neither end (``_window``), but for those dot drew so (``_tangled``)."""
    lay = blocks.lay
    for k, (tail, head, a) in enumerate(lay.edges):
        if k not in blocks.tangled and lay.get(a, "pos") and \
                _window(blocks, lay.get(a, "pos"), tail, head, -total.get(tail, 0.0), -total.get(head, 0.0)) is None:
            return False
    return True


def _foreign(blocks: Blocks, tail: str, head: str) -> list[Rect]:
    """The frames holding neither end of an edge."""
    return [r for (kind, name), r in blocks.rect.items()
            if kind == "cluster" and not {tail, head} & blocks.members((kind, name))]


def _inside(p: tuple[float, float], r: Rect, margin: float = 2.0) -> bool:
    return r[0] + margin < p[0] < r[1] - margin and r[2] + margin < p[1] < r[3] - margin


def _tangled(blocks: Blocks) -> set[int]:
    """The edges (by index) that run through a frame holding neither end as dot drew them."""
    lay = blocks.lay
    return {k for k, (tail, head, a) in enumerate(lay.edges)
            if lay.get(a, "pos") and _window(blocks, lay.get(a, "pos"), tail, head, 0.0, 0.0) is None}


def _shifted(r: Rect, dy: float) -> Rect:
    return r[0], r[1], r[2] + dy, r[3] + dy


def _within(r: Rect, outer: Rect) -> bool:
    return outer[0] <= r[0] and r[1] <= outer[1] and outer[2] <= r[2] and r[3] <= outer[3]


def _free(blocks: Blocks, key: tuple[str, str], dy: float, moving: set[str]) -> bool:
    """Whether the point ``key`` moved down by ``dy`` lands on no box that stays, in the same frames."""
    x0, x1, y0, y1 = blocks.rect[key]
    there = (x0, x1, y0 + dy, y1 + dy)
    for other, r in blocks.rect.items():
        if other[0] == "node" and other[1] not in moving and other != key and _overlap(r, there):
            return False
        if other[0] == "cluster" and _overlap(r, blocks.rect[key]) != _overlap(r, there):
            return False
    return True


def _shift_rects(blocks: Blocks, key: tuple[str, str], dy: float) -> None:
    x0, x1, y0, y1 = blocks.rect[key]
    blocks.rect[key] = (x0, x1, y0 + dy, y1 + dy)
    if key[0] == "cluster":
        for k in blocks.children.get(key[1], []):
            _shift_rects(blocks, k, dy)


def _rewrite(lay: Layout, blocks: Blocks, moved: dict[str, float]) -> None:
    """The layout's text with the blocks where they are now: nodes and frames moved (dot's y
    points up), an edge within one moved block moved with it, an edge between two that moved
    apart sheared."""
    for (kind, name), (x0, x1, y0, y1) in blocks.rect.items():
        if kind == "node":
            lay.set(lay.nodes[name], "pos", f"{(x0 + x1) / 2:.2f},{-(y0 + y1) / 2:.2f}")
            continue
        a = lay.clusters[name]
        old = _floats(lay.get(a, "bb"))
        dy = -y1 - old[1]
        lay.set(a, "bb", f"{x0:.2f},{-y1:.2f},{x1:.2f},{-y0:.2f}")
        if lay.get(a, "lp"):
            lx, ly = _floats(lay.get(a, "lp"))
            lay.set(a, "lp", f"{lx:.2f},{ly + dy:.2f}")
    for tail, head, a in lay.edges:
        dt, dh = moved.get(tail, 0.0), moved.get(head, 0.0)
        if dt == dh == 0.0:
            continue
        if dt == dh:  # moved with both its ends
            for key in ("pos", "lp"):
                if lay.get(a, key):
                    lay.set(a, key, _moved_points(lay.get(a, key), -dt))
            continue
        xs = [x for x, _ in _points(lay.get(a, "pos") or "")]
        if not xs:
            continue
        x0, x1 = _window(blocks, lay.get(a, "pos"), tail, head, -dt, -dh) or (xs[0], xs[-1])
        for key in ("pos", "lp"):
            if lay.get(a, key):
                lay.set(a, key, _moved_points(lay.get(a, key), -dt, -dh, x0, x1))


STOPS = (0.0, 1 / 16, 1 / 8, 1 / 4, 3 / 8, 1 / 2, 5 / 8, 3 / 4, 7 / 8, 15 / 16, 1.0)
WINDOWS = sorted(((a, b) for a in STOPS for b in STOPS if a < b), key=lambda w: (w[0] - w[1], w))  # widest first


def _window(blocks: Blocks, pos: str, tail: str, head: str, dt: float, dh: float) -> tuple[float, float] | None:
    """Where along x an edge between blocks that moved apart bends from its tail's shift to
    its head's (dot's y, up): the widest stretch (the whole way first) that runs it through no
    frame holding neither end; None when every one does."""
    pts = _points(pos)
    x0, x1 = pts[0][0], pts[-1][0]  # tail to head (the arrow's tip last)
    foreign = _foreign(blocks, tail, head)
    for f0, f1 in (WINDOWS if dt != dh else WINDOWS[:1]):
        w = x0 + f0 * (x1 - x0), x0 + f1 * (x1 - x0)
        curve = _sampled([(x, -y) for x, y in _points(_moved_points(pos, dt, dh, *w))])
        if not any(_inside(p, r) for r in foreign for p in curve):
            return w
    return None


def _sampled(pts: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Points along the cubic Béziers of a DOT spline (its control points, the arrow's tip last)."""
    ctrl = pts[:-1] if len(pts) % 3 == 2 else pts
    return _curve("M" + " ".join(f"{x!r},{y!r}" for x, y in ctrl))


POINT = re.compile(r"(-?\d+(?:\.\d+)?(?:e-?\d+)?),(-?\d+(?:\.\d+)?(?:e-?\d+)?)")


def _points(text: str) -> list[tuple[float, float]]:
    """A DOT point list's points, tail first (``e,x,y``, the arrow's tip, last)."""
    pts = [(float(m.group(1)), float(m.group(2))) for m in POINT.finditer(text)]
    return pts[1:] + pts[:1] if text.startswith("e,") else pts


def _moved_points(text: str, dy: float, dy1: float | None = None, x0: float = 0.0, x1: float = 0.0) -> str:
    """A DOT point list (``e,x,y x,y ...``) moved by ``dy`` (dot's orientation), or sheared
    from ``dy`` at ``x0`` to ``dy1`` at ``x1``: a curve between two blocks that moved apart."""
    def one(m: re.Match) -> str:
        x, y = float(m.group(1)), float(m.group(2))
        t = 0.0 if dy1 is None or abs(x1 - x0) < 1e-6 else min(1.0, max(0.0, (x - x0) / (x1 - x0)))
        return f"{x:.2f},{y + dy + t * ((dy1 if dy1 is not None else dy) - dy):.2f}"
    return POINT.sub(one, text)
