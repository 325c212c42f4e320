"""A wire routed left to right around the frames and boxes it must not cross.

Where this project places boxes itself (``stacked.py``) nobody routes the wires: ``neato -n2``
draws them straight through frames, and dot's curves belong to dot's places. A wire of a
left-to-right picture runs from its tail's right side to its head's left side; here it is a
path on a grid of points ``STEP`` apart that only moves right or up and down, never into a
frame holding neither end nor onto another box, found by dynamic programming column by column
(each bend costs ``BEND``, each point climbed ``1``): fewest bends first, then shortest
(``route``). Where a frame lies across the way, a path that may also run left is searched on a
coarser grid (``detour``). The path is pulled taut (``taut``) and its corners rounded into cubic
Béziers (DOT's ``pos``) as far as that stays clear (``bezier``).
"""
from __future__ import annotations

import math

import numpy as np

Rect = tuple[float, float, float, float]  # x0, x1, y0, y1, y down
Point = tuple[float, float]
STEP = 4.0  # points between grid points
BEND = 60.0  # a bend costs as much as climbing this many grid points (whole: costs stay exact)
WALL = 1e7  # larger than any cost: the running minimum forgets what lies beyond a wall
CLEAR = 3.0  # points kept between a wire and what it must not cross
CUT = int(WALL) // 2  # costs are searched as whole numbers (int64); this one, far above the bends and
# steps of any picture's way, stands for no way at all (a cost carried past a wall is cut to it)


def route(tail: Point, head: Point, walls: list[Rect], span: tuple[float, float]) -> list[Point] | None:
    """The corners of a path from ``tail`` to ``head`` (``head`` to its right) that moves
    right, up or down and enters none of ``walls``, between the heights ``span``; None when
    there is none."""
    if head[0] - tail[0] < 2 * STEP:
        return None
    xs = np.linspace(tail[0], head[0], max(2, int((head[0] - tail[0]) / STEP) + 1))
    ys = np.arange(span[0], span[1] + STEP, STEP)
    free = _free(xs, ys, walls)
    j0, j1 = (int(np.abs(ys - y).argmin()) for y in (tail[1], head[1]))
    free[0, :] = False
    free[0, j0] = True
    cost = np.full(len(ys), CUT)
    cost[j0] = 0
    came: list[np.ndarray] = []
    same = np.zeros(len(xs), dtype=bool)  # a column as free as the one before
    np.all(free[2:] == free[1:-1], axis=1, out=same[2:])
    climbs = np.flatnonzero(~same[1:]) + 1
    column = _Column(free, climbs)
    straight = np.arange(len(ys))
    k = 0
    for i in range(1, len(xs)):
        if same[i]:  # a climb's result climbs no further: the same costs, reached straight
            came.append(straight)
            continue
        cost, src = column.climb(k, cost)
        came.append(src)
        k += 1
    if cost[j1] >= CUT:
        return None
    path, j = [], j1
    x, y = xs.tolist(), ys.tolist()
    for i in range(len(x) - 1, 0, -1):
        path.append((x[i], y[j]))
        j2 = int(came[i - 1][j])
        if j2 != j:
            path.append((x[i], y[j2]))
        j = j2
    path.append((x[0], y[j]))
    path = [(tail[0], tail[1])] + _corners(path[::-1])[1:-1] + [(head[0], head[1])]
    return _straight_ends(path)


def _free(xs: np.ndarray, ys: np.ndarray, walls: list[Rect]) -> np.ndarray:
    """free[i, j]: whether the point (xs[i], ys[j]) lies in no wall (widened by ``CLEAR``):
    on the grid's rising xs and ys (``arange``, ``linspace``) the points strictly inside a wall
    are one block of indices, found by bisection, cleared a wall at a time."""
    w = np.asarray(walls, dtype=float).reshape(-1, 4)
    i0, j0 = (np.searchsorted(v, w[:, k] - CLEAR, "right") for v, k in ((xs, 0), (ys, 2)))
    i1, j1 = (np.searchsorted(v, w[:, k] + CLEAR, "left") for v, k in ((xs, 1), (ys, 3)))
    some = (i0 < i1) & (j0 < j1)  # the walls over some point of the grid
    free = np.ones((len(xs), len(ys)), dtype=bool)
    for a, b, c, d in zip(*(v[some].tolist() for v in (i0, i1, j0, j1))):
        free[a:b, c:d] = False
    return free


class _Column:
    """Climbing within each column of a left-to-right route: a point's cost is the cheapest of
    reaching it straight from the column before and of a bend up or down (``BEND`` plus one
    per point climbed) from another point of its column with no wall between. Costs are whole
    numbers (int64), ``CUT`` for none; both ways up and down are one running minimum over the
    column and its reverse, what depends on the walls alone made once a route."""

    def __init__(self, free: np.ndarray, climbs: np.ndarray):
        self.idx = np.arange(free.shape[1])
        here = free[climbs]  # only the columns climbed in
        self.both = here & free[climbs - 1]  # reached straight: free here and before
        lanes = np.stack([here, here[:, ::-1]], axis=1)  # down the column and up it (reversed)
        offset = np.cumsum(~lanes, axis=2) * int(WALL) + self.idx  # walls passed, steps taken
        self.lifted = np.where(lanes, offset, -(2**62))  # a wall's point: any cost less this is cut
        self.offset = offset + int(BEND)
        self.sel = np.stack([self.idx, self.idx[::-1]])

    def climb(self, i: int, cost: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The ``i``-th climbed column's costs from those of the column before, and where each
        came from (a point's own index where reached straight: ties go straight, down, up)."""
        level = np.where(self.both[i], cost, CUT)
        v = level[self.sel] - self.lifted[i]
        acc = np.minimum.accumulate(v, axis=1)
        start = np.maximum.accumulate(np.where(v == acc, self.idx, 0), axis=1)  # where the minimum was met
        run = np.minimum(acc + self.offset[i], CUT)  # carried past a wall: at least WALL dearer, cut
        down, up = run[0], run[1][::-1]
        better = down < level
        best, src = np.where(better, down, level), np.where(better, start[0], self.idx)
        better = up < best
        return np.where(better, up, best), np.where(better, len(level) - 1 - start[1][::-1], src)


def _corners(path: list[Point]) -> list[Point]:
    """The path with the points where it goes on the same way left out."""
    out = path[:2]
    for p in path[2:]:
        a, b = out[-2], out[-1]
        if (b[0] - a[0]) * (p[1] - b[1]) == (b[1] - a[1]) * (p[0] - b[0]):
            out[-1] = p
        else:
            out.append(p)
    return out


def _straight_ends(path: list[Point]) -> list[Point]:
    """The grid's first and last points levelled with the ends they join (the grid rounds heights)."""
    out = list(path)
    if len(out) > 2 and abs(out[1][1] - out[0][1]) < STEP / 2:
        out[1] = (out[1][0], out[0][1])
    if len(out) > 2 and abs(out[-2][1] - out[-1][1]) < STEP / 2:
        out[-2] = (out[-2][0], out[-1][1])
    return out


def bezier(path: list[Point], walls: list[Rect]) -> list[Point]:
    """DOT's control points (3n + 1) of ``path`` (pulled taut: ``taut``) with its corners
    rounded as far as the walls leave room."""
    pts: list[Point] = [path[0]]
    rows = _array(walls)
    for k in range(1, len(path) - 1):
        a, c, b = path[k - 1], path[k], path[k + 1]
        r = min(0.45 * math.dist(a, c), 0.45 * math.dist(c, b), 30.0)
        while r > 1.0:
            p, q = _towards(c, a, r), _towards(c, b, r)
            near = _near(rows, (p, c, q))  # the curve lies within its control points' bounds
            if not len(near) or not _hit(np.array(_sample([p, c, c, q])), near):
                break
            r /= 2
        if r <= 1.0:
            _line(pts, c)
            continue
        _line(pts, _towards(c, a, r))
        pts += [c, c, _towards(c, b, r)]
    _line(pts, path[-1])
    return pts


def taut(path: list[Point], walls: list[Rect]) -> list[Point]:
    """The corners of ``path`` with every corner left out that a straight run clear of the
    walls can skip: from each kept corner, the farthest one it sees."""
    out, i = [path[0]], 0
    rows = _array(walls)
    while i < len(path) - 1:
        i = next(k for k in range(len(path) - 1, i, -1) if k == i + 1 or _clear(path[i], path[k], rows))
        out.append(path[i])
    return out


def _clear(a: Point, b: Point, walls: np.ndarray) -> bool:
    """Whether the points every 2 or so along the segment from ``a`` to ``b`` hit no wall."""
    walls = _near(walls, (a, b))
    if not len(walls):
        return True
    n = max(2, int(math.dist(a, b) / 2))
    t = np.arange(1, n)
    return not _hit(np.stack([a[0] + (b[0] - a[0]) * t / n, a[1] + (b[1] - a[1]) * t / n], axis=1), walls)


def _array(walls: list[Rect]) -> np.ndarray:
    """The walls as rows (x0, x1, y0, y1), each widened by a point."""
    return np.asarray(walls, dtype=float).reshape(-1, 4) + np.array([-1.0, 1.0, -1.0, 1.0])


ROUNDING = 1e-6  # points: far more than a point sampled between corners strays from their bounds


def _near(walls: np.ndarray, corners: tuple[Point, ...]) -> np.ndarray:
    """The walls (``_array``) that may hold a point sampled between ``corners`` (a segment's ends,
    a curve's control points): those meeting the corners' bounds widened by ``ROUNDING``."""
    x0, x1 = min(p[0] for p in corners) - ROUNDING, max(p[0] for p in corners) + ROUNDING
    y0, y1 = min(p[1] for p in corners) - ROUNDING, max(p[1] for p in corners) + ROUNDING
    return walls[(walls[:, 0] < x1) & (walls[:, 1] > x0) & (walls[:, 2] < y1) & (walls[:, 3] > y0)]


def _hit(pts: np.ndarray, walls: np.ndarray) -> bool:
    """Whether any of the points (rows x, y) lies strictly inside a widened wall (``_array``)."""
    x, y = pts[:, 0:1].T, pts[:, 1:2].T
    return bool(((walls[:, 0:1] < x) & (x < walls[:, 1:2]) & (walls[:, 2:3] < y) & (y < walls[:, 3:4])).any())


def _towards(c: Point, a: Point, r: float) -> Point:
    d = math.dist(c, a)
    return c[0] + (a[0] - c[0]) * r / d, c[1] + (a[1] - c[1]) * r / d


def _line(pts: list[Point], to: Point) -> None:
    a = pts[-1]
    if math.dist(a, to) > 1e-6:
        pts += [(a[0] + (to[0] - a[0]) / 3, a[1] + (to[1] - a[1]) / 3),
                (a[0] + 2 * (to[0] - a[0]) / 3, a[1] + 2 * (to[1] - a[1]) / 3), to]


def _sample(ctrl: list[Point], n: int = 12) -> list[Point]:
    p0, p1, p2, p3 = ctrl
    out = []
    for k in range(n + 1):
        t = k / n
        u = 1 - t
        out.append(tuple(u**3 * a + 3 * u * u * t * b + 3 * u * t * t * c + t**3 * e
                         for a, b, c, e in zip(p0, p1, p2, p3)))
    return out


def detour(tail: Point, head: Point, walls: list[Rect], box: Rect) -> list[Point] | None:
    """The corners of a path from ``tail`` to ``head`` that may also run left (around a
    frame between them), inside ``box``, entering none of ``walls``, on a coarser grid
    (``2 * STEP``): fewest bends, then shortest (each bend costs ``BEND`` grid points).
    Relaxed a bend at a time, every straight run of the grid at once (``_Lanes``); None when
    there is no way."""
    step = 2 * STEP
    xs = np.arange(box[0], box[1] + step, step)
    ys = np.arange(box[2], box[3] + step, step)
    free = _free(xs, ys, walls)
    start = (int(np.abs(xs - tail[0] - step).argmin()), int(np.abs(ys - tail[1]).argmin()))
    goal = (int(np.abs(xs - head[0] + step).argmin()), int(np.abs(ys - head[1]).argmin()))
    free[start] = free[goal] = True
    lanes = _Lanes(free)
    cost = np.full((4, len(xs), len(ys)), lanes.cut, dtype=lanes.dtype)  # by the way it moves: right, left, down, up
    cost[0][start] = 0
    src, turn, lower = np.empty_like(cost), np.empty_like(cost[0]), np.empty(cost.shape, dtype=bool)
    for _ in range(MAX_BENDS):  # each round in arrays made once a detour
        cost.min(axis=0, out=turn)  # a turn into each way: from the cheapest other way, plus a bend; from
        turn += int(BEND)  # the way itself too, as that costs more than staying on it: the cheapest of all four
        np.minimum(cost, turn, out=src)
        if not np.less(src, cost, out=lower).any():  # no turn lowers a cost: nor would runs from them (the
            break  # costs are the runs' already: running minima of running minima change nothing)
        lanes.runs(src, out=cost)  # at most src (a point's own run), so at most the cost it had
    end = [int(w[goal]) + int(BEND) * (d != 0) for d, w in enumerate(cost)]
    if min(end) >= lanes.cut:
        return None
    path = _walk(cost, goal, end.index(min(end)), start)
    return [tail] + _corners([(float(xs[i]), float(ys[j])) for i, j in path]) + [head]


MAX_BENDS = 16


AHEAD = ((1, 0), (-1, 0), (0, 1), (0, -1))


SMALL_CUT = 2**16  # no way, on a grid whose dearest way of MAX_BENDS bends is cheaper (int32 costs)


class _Lanes:
    """The four ways of moving (right, left, down, up) along the grid, stopped by walls: what
    depends on the walls alone (their running count and the step number along each way), made
    once a detour, and each way's running minimum taken along its own direction (a reversed
    view for left and up). Costs are int32 with ``SMALL_CUT`` for no way (and for a wall passed)
    where every way of at most ``MAX_BENDS`` bends on the grid costs less (then no sum
    overflows), else int64 with ``CUT`` (and ``WALL``)."""

    def __init__(self, free: np.ndarray):
        nx, ny = free.shape
        small = (MAX_BENDS + 1) * (max(nx, ny) + BEND) < SMALL_CUT  # runs of a line's length, bends
        self.dtype: type[np.signedinteger] = np.int32 if small else np.int64
        self.cut, unit = (SMALL_CUT, SMALL_CUT) if small else (CUT, int(WALL))
        wall = ~free
        offset = np.empty((4, nx, ny), dtype=self.dtype)
        for w, v, axis in zip(self.lanes(offset), self.lanes(np.broadcast_to(wall, offset.shape)), (0, 0, 1, 1)):
            np.cumsum(v, axis=axis, out=w)
        offset *= unit  # walls passed
        for w, axis in zip(self.lanes(offset), (0, 0, 1, 1)):
            w += np.arange(w.shape[axis]).reshape((-1, 1) if axis == 0 else (1, -1))  # steps taken
        self.offset = offset
        self.lifted = np.where(wall, self.dtype(-unit), offset)  # a wall's point: any cost less this is cut

    @staticmethod
    def lanes(a: np.ndarray) -> list[np.ndarray]:
        """The four ways of a (way, x, y) array as each runs: forward along its axis (views)."""
        return [a[0], a[1][::-1], a[2], a[3][:, ::-1]]

    def runs(self, src: np.ndarray, out: np.ndarray) -> None:
        """From each point's ``src`` cost (way, x, y: whole numbers, ``cut`` for none), one per
        step: the cost of reaching each point each way, into ``out`` (a running minimum along the
        way, reset at each wall: a minimum carried past a wall, a wall's own point too, comes back
        at least a wall's unit dearer and is cut to ``cut``); ``src`` is spent on the way."""
        src -= self.lifted
        for w, axis in zip(self.lanes(src), (0, 0, 1, 1)):
            np.minimum.accumulate(w, axis=axis, out=w)
        src += self.offset
        np.minimum(src, self.cut, out=out)


def _walk(cost: np.ndarray, at: tuple[int, int], d: int, start: tuple[int, int]) -> list[tuple[int, int]]:
    """The grid points of the cheapest way to ``at`` (moving ``d``), walked back to ``start``
    (``cost``: by way; no way, cut, is never a step or a bend below a cost on the way)."""
    path = [at]
    nx, ny = cost[0].shape
    while at != start or d != 0 or cost[0][at] != 0:
        v = cost[d][at]
        di, dj = AHEAD[d]
        back = (at[0] - di, at[1] - dj)
        if 0 <= back[0] < nx and 0 <= back[1] < ny and cost[d][back] + 1 == v:
            at = back
            path.append(at)
            continue
        d = next(e for e in range(4) if e != d and cost[e][at] + BEND == v)
        if at == start and cost[d][at] == 0:
            break
    return path[::-1]
