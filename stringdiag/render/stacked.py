"""A step of a derivation stacked in the order of the picture before: our own vertical layout.

Dot places each column (rank) itself and orders frames of one rank as it likes, whatever order
hints it is given (``draw._mark``). Where that turns untouched boxes round, dot keeps only its columns
(every x) and this module places every block (a frame with all it holds, or a box) top to
bottom afresh, frame by frame from the innermost out: the siblings of one frame that share some
x are ordered as the untouched boxes they hold were ordered before (a vote over the pairs of one
column, at the frame where the two boxes' paths part; dot's order where nothing is known), and
each is put between where the blocks above it push it down to and where those below push it up
to from dot's place (the mean of two placements that both keep the order). A frame grows or shrinks round
what it holds. Points (copies, deletions) are not stacked: each is put level with the wire that
feeds it where that is free (``_settle``). A wire whose ends moved apart, or whose curve now
runs through a frame, is routed around the frames and boxes by ``route.py``; ``neato -n2``
draws the result (its graph has the class ``stacked``).
"""
from __future__ import annotations

import math
import re
from functools import lru_cache

from .dotrun import laid_out
from .dag import Dag
from .dotlayout import Blocks, Layout, Rect, _clear, _floats, _foreign, _moved_points, _neato, _overlap, _within, parse
from .route import bezier, detour, route, taut

EPS = 1.0  # points: the boxes of one column of dot's layout share their x
ARROW = 5.0  # points: an arrowhead's length at dot's arrowsize 0.5
NEAR = 150.0  # points round a wire's ends searched first for a way around
GAP = 12.0  # points between two blocks of one column that dot did not put one above the other


def stacked(source: str, before: dict[int, tuple[float, float]]) -> str:
    """The picture of ``source`` (DOT) with dot's columns and each frame's blocks stacked in the
    order ``before`` (box -> centre in the picture before) gives, drawn by ``neato -n2`` as SVG."""
    laid = laid_out(source, "placed")[1]  # dot's placed layout (its SVG came from the same run)
    lay = parse(laid)
    blocks = Blocks(lay)
    votes = _votes(blocks, before)
    old = dict(blocks.rect)
    points = {key for key in old if key[0] == "node" and lay.get(lay.nodes[key[1]], "shape") == "point"}
    pads = {name: _pads(blocks, name) for kind, name in old if kind == "cluster"}
    _place(blocks, "", votes, pads, points)
    for key in sorted(points):
        _settle(blocks, key)
    moved = {name: (r[2] - old[("node", name)][2]) for (kind, name), r in blocks.rect.items() if kind == "node"}
    _write(lay, blocks, old, moved)
    if "class" in lay.root.where:  # the picture says how it was laid out
        lay.set(lay.root, "class", f"{lay.get(lay.root, 'class')} stacked")
    else:  # a statement before the graph's closing brace (no index before it moves)
        lay.tokens.insert(len(lay.tokens) - 1, 'graph [class="stacked"];')
    return _neato(lay)


def _path(blocks: Blocks, node: str) -> list[tuple[str, str]]:
    """The blocks from the outermost frame down to the node itself."""
    out = [("node", node)]
    while (up := blocks.lay.parent.get(out[-1], "")):
        out.append(("cluster", up))
    return out[::-1]


def _votes(blocks: Blocks, before: dict[int, tuple[float, float]]) -> dict[tuple, int]:
    """(upper block, lower block) -> how many pairs of untouched boxes in one column, before and
    now, want the first above the second: counted at the frame where the boxes' paths part."""
    at = [(str(b), before[b]) for b in sorted(before) if ("node", str(b)) in blocks.rect]
    out: dict[tuple, int] = {}
    for k, (p, (x0, y0)) in enumerate(at):
        for q, (x1, y1) in at[k + 1:]:
            if abs(x1 - x0) > EPS or abs(y1 - y0) <= EPS:
                continue
            if abs(blocks.centre(p)[0] - blocks.centre(q)[0]) > EPS:
                continue
            a, b = _path(blocks, p), _path(blocks, q)
            n = next(i for i, (u, v) in enumerate(zip(a, b)) if u != v)
            upper, lower = (a[n], b[n]) if y0 < y1 else (b[n], a[n])
            out[(upper, lower)] = out.get((upper, lower), 0) + 1
    return out


def _place(blocks: Blocks, frame: str, votes: dict[tuple, int], pads: dict, points: set) -> None:
    """Stack the blocks ``frame`` holds (each stacked inside first), then fit the frame round
    them; its points (copies, deletions) are placed on their wires afterwards (``_settle``)."""
    kids = [c for c in blocks.children.get(frame, []) if c not in points] or blocks.children.get(frame, [])
    for kind, name in kids:
        if kind == "cluster":
            _place(blocks, name, votes, pads, points)
    order = _order(blocks, kids, votes)
    wish = {c: blocks.rect[c][2] for c in kids}
    high = {c: _height(blocks.rect[c]) for c in kids}
    gap = {e: order.data(*e)["gap"] for e in order.edges()}
    ranked = order.ordered(key=lambda c: (wish[c], c))
    down: dict[tuple, float] = {}  # each as high as it wishes or as those above push it down
    for c in ranked:
        down[c] = max([wish[c]] + [down[p] + high[p] + gap[p, c] for p in order.pred[c]])
    up: dict[tuple, float] = {}  # each as low as it wishes or as those below push it up
    for c in reversed(ranked):
        up[c] = min([wish[c]] + [up[b] - high[c] - gap[c, b] for b in order.succ[c]])
    for c in ranked:  # both keep every block clear of those above and below: so does their mean
        _shift(blocks, c, (down[c] + up[c]) / 2 - wish[c])
    if frame and kids:
        pad_top, pad_bottom = pads[frame]
        x0, x1, _, _ = blocks.rect[("cluster", frame)]
        blocks.rect[("cluster", frame)] = (x0, x1, min(blocks.rect[c][2] for c in kids) - pad_top,
                                           max(blocks.rect[c][3] for c in kids) + pad_bottom)


def _settle(blocks: Blocks, key: tuple[str, str]) -> None:
    """Put a point (a copy, a deletion) at its column, as level as it can be with the wire that
    feeds it (else with the middle of those it feeds), nearest that height where it lies in
    its frames, in no other frame and on no box."""
    name = key[1]
    lay = blocks.lay
    feeds = [blocks.centre(t)[1] for t, h, _ in lay.edges if h == name and ("node", t) in blocks.rect]
    fed = sorted(blocks.centre(h)[1] for t, h, _ in lay.edges if t == name and ("node", h) in blocks.rect)
    wants = feeds[:1] + fed[len(fed) // 2:len(fed) // 2 + 1]
    x0, x1, y0, y1 = blocks.rect[key]
    half = (y1 - y0) / 2
    home = set(_path(blocks, name)[:-1])
    others = [(other in home, r) for other, r in blocks.rect.items() if other != key]
    for dy in sorted(range(-400, 401, 4), key=abs):
        for want in wants:
            there = (x0, x1, want + dy - half - 3, want + dy + half + 3)
            if all(_within(there, r) if mine else not _overlap(there, r) for mine, r in others):
                blocks.rect[key] = (x0, x1, want + dy - half, want + dy + half)
                return


def _pads(blocks: Blocks, frame: str) -> tuple[float, float]:
    """The room dot left in a frame above and below what it holds (its label above)."""
    x0, x1, y0, y1 = blocks.rect[("cluster", frame)]
    kids = [blocks.rect[c] for c in blocks.children.get(frame, [])]
    return (min(r[2] for r in kids) - y0, y1 - max(r[3] for r in kids)) if kids else (0.0, 0.0)


def _order(blocks: Blocks, kids, votes) -> Dag:
    """Which sibling goes above which, among those sharing some x: the votes first (the larger
    margin first), dot's order for the rest; an edge closing a cycle is left out."""
    g = Dag(kids)
    rect = blocks.rect
    pairs = [(a, b) for a in kids for b in kids if a != b and _share_x(rect[a], rect[b])]
    wished = sorted(((votes.get((a, b), 0) - votes.get((b, a), 0), a, b) for a, b in pairs), reverse=True)
    dots = sorted(((rect[a][2], a, b) for a, b in pairs if rect[a][2] < rect[b][2]))
    for a, b in [(a, b) for m, a, b in wished if m > 0] + [(a, b) for _, a, b in dots]:
        if not g.has_edge(a, b) and not g.reaches(b, a):
            gap = rect[b][2] - rect[a][3] if rect[a][3] <= rect[b][2] else GAP
            g.add_edge(a, b, gap=min(max(gap, 4.0), 18.0))
    return g


def _share_x(a: Rect, b: Rect) -> bool:
    return a[0] < b[1] - 0.5 and b[0] < a[1] - 0.5


def _height(r: Rect) -> float:
    return r[3] - r[2]


def _shift(blocks: Blocks, key: tuple[str, str], dy: float) -> None:
    if not dy:
        return
    x0, x1, y0, y1 = blocks.rect[key]
    blocks.rect[key] = (x0, x1, y0 + dy, y1 + dy)
    if key[0] == "cluster":
        for k in blocks.children.get(key[1], []):
            _shift(blocks, k, dy)


def _write(lay: Layout, blocks: Blocks, old: dict, moved: dict[str, float]) -> None:
    """The layout's text with the blocks where they are now (dot's y points up; the picture
    grows upward, so no y goes below 0): a wire whose ends moved alike and that still runs
    clear of the frames moved with them, any other routed again (``_reroute``)."""
    bottom = max(r[3] for r in old.values())
    lift = max(r[3] for r in blocks.rect.values()) - bottom  # the picture grows upward: dot's y stays >= 0
    for (kind, name), (x0, x1, y0, y1) in blocks.rect.items():
        if kind == "node":
            lay.set(lay.nodes[name], "pos", f"{(x0 + x1) / 2:.2f},{-(y0 + y1) / 2 + lift:.2f}")
            continue
        a = lay.clusters[name]
        lay.set(a, "bb", f"{x0:.2f},{-y1 + lift:.2f},{x1:.2f},{-y0 + lift:.2f}")
        if lay.get(a, "lp"):
            lx, ly = _floats(lay.get(a, "lp"))
            lay.set(a, "lp", f"{lx:.2f},{ly + (old[('cluster', name)][2] - y0) + lift:.2f}")
    top = min(r[2] for r in blocks.rect.values())
    grow = min(r[2] for r in old.values()) - top + lift
    root = lay.root
    x0, y0, x1, y1 = _floats(lay.get(root, "bb"))
    lay.set(root, "bb", f"{x0:.2f},{y0:.2f},{x1:.2f},{y1 + max(grow, 0.0):.2f}")
    if lay.get(root, "lp"):
        lx, ly = _floats(lay.get(root, "lp"))
        lay.set(root, "lp", f"{lx:.2f},{ly + max(grow, 0.0):.2f}")
    rects = blocks.rect.values()  # the extent a rerouted wire may use, the same for every wire
    whole = (min(r[0] for r in rects) - 2 * GAP, max(r[1] for r in rects) + 2 * GAP,
             min(r[2] for r in rects) - 2 * GAP, max(r[3] for r in rects) + 2 * GAP)
    for tail, head, a in lay.edges:
        dt, dh = moved.get(tail), moved.get(head)
        if lay.get(a, "pos") is None:
            continue
        if dt is not None and dt == dh and _clear(blocks, lay.get(a, "pos"), tail, head, -dt):
            for key in ("pos", "lp"):
                if lay.get(a, key):
                    lay.set(a, key, _moved_points(lay.get(a, key), -dt + lift))
            continue
        _reroute(lay, blocks, tail, head, a, lift, whole)


def _reroute(lay: Layout, blocks: Blocks, tail: str, head: str, a, lift: float, whole: Rect) -> None:
    """An edge whose ends moved apart routed around the frames and boxes it must not cross
    (``route.py``), its label over its longest level stretch; left to neato where no such way is."""
    arrow = lay.get(a, "pos").startswith("e,")
    way = None
    if ("node", tail) in blocks.rect and ("node", head) in blocks.rect:
        t, h = blocks.rect[("node", tail)], blocks.rect[("node", head)]
        walls = tuple(_foreign(blocks, tail, head) + [r for (kind, n), r in blocks.rect.items()
                                                       if kind == "node" and n not in (tail, head)])
        way = _way(t, h, walls, whole, arrow)
    if way is None:
        for key in ("pos", "lp"):
            if lay.get(a, key):
                lay.set(a, key, "")
        return
    path, curve = way
    dot = [(x, -y + lift) for x, y in curve]
    text = " ".join(f"{x:.2f},{y:.2f}" for x, y in dot)
    if arrow:
        text = f"e,{h[0]:.2f},{dot[-1][1]:.2f} " + text
    lay.set(a, "pos", text)
    if lay.get(a, "lp"):
        x, y = _label_at(path, _text_width(lay.get(a, "label") or ""), walls)
        lay.set(a, "lp", f"{x:.2f},{-y + lift:.2f}")


@lru_cache(maxsize=256)
def _way(t: Rect, h: Rect, walls: tuple[Rect, ...], whole: Rect, arrow: bool) -> tuple[list, list] | None:
    """The corners and the curve of a wire from the box ``t`` to the box ``h`` clear of ``walls``
    within ``whole`` (left, right, top, bottom): left to right where it can (``route``), else
    round a frame near its ends, else anywhere (``detour``). Kept: a step whose first stacked
    layout still turns boxes round is stacked again with fewer hints, most wires where they were."""
    left, right, top, bottom = whole
    ends = (t[1], (t[2] + t[3]) / 2), (h[0] - ARROW * arrow, (h[2] + h[3]) / 2)
    path = route(*ends, list(walls), (top, bottom))
    if path is None:
        near = (max(left, min(t[0], h[0]) - NEAR), min(right, max(t[1], h[1]) + NEAR),
                max(top, min(t[2], h[2]) - NEAR), min(bottom, max(t[3], h[3]) + NEAR))
        path = detour(*ends, list(walls), near) or detour(*ends, list(walls), whole)
    if path is None:
        return None
    path = taut(path, list(walls))
    return path, bezier(path, list(walls))


def _text_width(label: str) -> float:
    """About how wide a wire's label is drawn (its HTML's text at dot's 10-point font)."""
    return 5.5 * len(re.sub(r"&#?\w+;", "x", re.sub(r"<[^>]*>", "", label)))


def _label_at(path: list[tuple[float, float]], width: float, walls: list[Rect]) -> tuple[float, float]:
    """Where a wire's label goes: over its longest straight run, at the first of a few places
    along it where the label covers no box, else mid-way."""
    a, b = max(zip(path, path[1:]), key=lambda s: math.dist(*s))
    spots = [(a[0] + (b[0] - a[0]) * t, a[1] + (b[1] - a[1]) * t - 9.0) for t in (0.5, 0.35, 0.65, 0.2, 0.8)]
    for x, y in spots:
        box = (x - width / 2, x + width / 2, y - 7.0, y + 7.0)
        if not any(r[0] < box[1] and box[0] < r[1] and r[2] < box[3] and box[2] < r[3] for r in walls):
            return x, y
    return spots[0]
