"""Wires routed around frames (render/route.py), against plain searches written here.

Over random walls: a path found enters no wall and joins its two ends; where a breadth-first
search over the same grid (written here, apart from the router) finds a way from one end to
the other, the router finds one too; the left-to-right router's path only runs right, up
and down. The detour's path costs (steps and bends) what a plain Dijkstra over the grid finds
cheapest; the free grid and the straight-run test agree with the plain point-by-point tests.
"""
from __future__ import annotations

from collections import deque

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from stringdiag.render import route as R

W, H = 160.0, 120.0


def _walls(draw_rects) -> list[tuple[float, float, float, float]]:
    return [(x, x + w, y, y + h) for x, y, w, h in draw_rects]


rects = st.lists(st.tuples(st.floats(20, 130), st.floats(-10, 110), st.floats(4, 40), st.floats(4, 60)),
                 max_size=6)
ends = st.tuples(st.floats(0, 10), st.floats(0, H), st.floats(W - 10, W), st.floats(0, H))


def _inside(p, walls, margin=0.5) -> bool:
    return any(x0 + margin < p[0] < x1 - margin and y0 + margin < p[1] < y1 - margin for x0, x1, y0, y1 in walls)


def _along(path, n=8):
    for a, b in zip(path, path[1:]):
        for t in range(n + 1):
            yield a[0] + (b[0] - a[0]) * t / n, a[1] + (b[1] - a[1]) * t / n


def _reachable(tail, head, walls, box, step) -> bool:
    """Breadth-first over the grid the router uses (points ``step`` apart, a point free when
    no wall widened by ``CLEAR`` holds it), four neighbours."""
    xs = np.arange(box[0], box[1] + step, step)
    ys = np.arange(box[2], box[3] + step, step)

    def free(i, j):
        x, y = xs[i], ys[j]
        return not any(x0 - R.CLEAR < x < x1 + R.CLEAR and y0 - R.CLEAR < y < y1 + R.CLEAR
                       for x0, x1, y0, y1 in walls)
    start = (int(np.abs(xs - tail[0] - step).argmin()), int(np.abs(ys - tail[1]).argmin()))
    goal = (int(np.abs(xs - head[0] + step).argmin()), int(np.abs(ys - head[1]).argmin()))
    seen, todo = {start}, deque([start])
    while todo:
        i, j = todo.popleft()
        if (i, j) == goal:
            return True
        for u, v in ((i + 1, j), (i - 1, j), (i, j + 1), (i, j - 1)):
            if 0 <= u < len(xs) and 0 <= v < len(ys) and (u, v) not in seen and ((u, v) == goal or free(u, v)):
                seen.add((u, v))
                todo.append((u, v))
    return False


@settings(max_examples=60, deadline=None)
@given(rects, ends)
def test_a_left_to_right_route_runs_right_up_and_down_and_enters_no_wall(rs, e):
    walls = _walls(rs)
    tail, head = (e[0], e[1]), (e[2], e[3])
    if _inside(tail, walls, -R.CLEAR) or _inside(head, walls, -R.CLEAR):
        return
    path = R.route(tail, head, walls, (-20.0, H + 20))
    if path is None:
        return
    assert path[0] == tail and path[-1] == head
    assert all(b[0] >= a[0] - 1e-9 for a, b in zip(path, path[1:]))  # never left
    inner = path[1:-1]  # the ends join the grid's first and last points
    assert not any(_inside(p, walls) for p in _along(inner))
    taut = R.taut(path, walls)
    assert taut[0] == tail and taut[-1] == head and len(taut) <= len(path)
    assert not any(_inside(p, walls) for p in _along(taut[1:-1]))


@settings(max_examples=60, deadline=None)
@given(rects, ends)
def test_a_detour_exists_where_a_plain_search_finds_a_way_and_enters_no_wall(rs, e):
    walls = _walls(rs)
    tail, head = (e[0], e[1]), (e[2], e[3])
    box = (-20.0, W + 20, -20.0, H + 20)
    path = R.detour(tail, head, walls, box)
    assert (path is not None) == _reachable(tail, head, walls, box, 2 * R.STEP)
    if path is not None:
        assert path[0] == tail and path[-1] == head
        assert not any(_inside(p, walls) for p in _along(path[1:-1][1:-1]))


def test_a_wall_across_the_way_makes_the_wire_go_round_it():
    wall = (60.0, 100.0, -100.0, 100.0)  # from above the top to y = 100: only below is open
    assert R.route((0.0, 50.0), (160.0, 50.0), [wall], (-100.0, 150.0)) is not None
    path = R.route((0.0, 50.0), (160.0, 50.0), [wall], (-100.0, 150.0))
    assert max(y for _, y in path) > 100 + R.CLEAR
    closed = [wall, (60.0, 100.0, 99.0, 200.0)]
    assert R.route((0.0, 50.0), (160.0, 50.0), closed, (-100.0, 150.0)) is None
    around = R.detour((0.0, 50.0), (160.0, 50.0), [(60.0, 100.0, -100.0, 120.0)], (-20.0, 200.0, -120.0, 200.0))
    assert around is not None and max(y for _, y in around) > 120


@settings(max_examples=60, deadline=None)
@given(rects, st.floats(-40, 40), st.floats(-40, 40), st.integers(2, 60), st.integers(2, 50))
def test_the_free_grid_is_the_plain_wall_test_at_every_point(rs, x0, y0, nx, ny):
    walls = _walls(rs)
    xs, ys = np.linspace(x0, x0 + 4 * nx, nx), np.arange(y0, y0 + 4 * ny, 4.0)
    free = R._free(xs, ys, walls)
    assert free.shape == (len(xs), len(ys))
    for i, x in enumerate(xs):
        for j, y in enumerate(ys):
            inside = any(a - R.CLEAR < x < b + R.CLEAR and c - R.CLEAR < y < d + R.CLEAR for a, b, c, d in walls)
            assert free[i, j] == (not inside)


@settings(max_examples=100, deadline=None)
@given(rects, st.tuples(st.floats(-20, 180), st.floats(-20, 140)), st.tuples(st.floats(-20, 180), st.floats(-20, 140)))
def test_a_straight_run_is_clear_where_no_sampled_point_is_in_any_wall(rs, a, b):
    walls = _walls(rs)
    n = max(2, int(np.hypot(b[0] - a[0], b[1] - a[1]) / 2))
    points = [(a[0] + (b[0] - a[0]) * t / n, a[1] + (b[1] - a[1]) * t / n) for t in range(1, n)]
    hit = any(x0 - 1 < x < x1 + 1 and y0 - 1 < y < y1 + 1 for x, y in points for x0, x1, y0, y1 in walls)
    assert R._clear(a, b, R._array(walls)) == (not hit)


def _cheapest(free, start, goal) -> tuple[float, int]:
    """Dijkstra over (point, way moving) on the grid, written here: one per step ahead, ``BEND``
    per turn, leaving the start moving right and reaching the goal moving right (else one more
    turn); the least (cost, turns) on the way, the last turn apart."""
    import heapq
    ahead = ((1, 0), (-1, 0), (0, 1), (0, -1))
    best = {(start, 0): (0.0, 0)}
    todo = [(0.0, 0, start, 0)]
    while todo:
        c, k, p, d = heapq.heappop(todo)
        if best.get((p, d), (np.inf, 0)) < (c, k):
            continue
        moves = [((p[0] + ahead[d][0], p[1] + ahead[d][1]), d, c + 1, k)]
        moves += [(p, e, c + R.BEND, k + 1) for e in range(4) if e != d]
        for q, e, c2, k2 in moves:
            if 0 <= q[0] < free.shape[0] and 0 <= q[1] < free.shape[1] and free[q] and (c2, k2) < best.get((q, e), (np.inf, 0)):
                best[(q, e)] = (c2, k2)
                heapq.heappush(todo, (c2, k2, q, e))
    return min((best[(goal, d)][0] + R.BEND * (d != 0), best[(goal, d)][1]) for d in range(4) if (goal, d) in best)


@settings(max_examples=40, deadline=None)
@given(rects, ends)
def test_a_detour_costs_what_a_plain_cheapest_path_search_finds(rs, e):
    walls = _walls(rs)
    tail, head = (e[0], e[1]), (e[2], e[3])
    box, step = (-20.0, W + 20, -20.0, H + 20), 2 * R.STEP
    xs, ys = np.arange(box[0], box[1] + step, step), np.arange(box[2], box[3] + step, step)
    free = R._free(xs, ys, walls)
    start = (int(np.abs(xs - tail[0] - step).argmin()), int(np.abs(ys - tail[1]).argmin()))
    goal = (int(np.abs(xs - head[0] + step).argmin()), int(np.abs(ys - head[1]).argmin()))
    free[start] = free[goal] = True
    path = R.detour(tail, head, walls, box)
    if not _reachable(tail, head, walls, box, step):
        assert path is None
        return
    cost, turns = _cheapest(free, start, goal)
    if turns > R.MAX_BENDS:  # the detour gives up on ways of more turns
        return
    assert path is not None
    grid = [(round((x - box[0]) / step), round((y - box[2]) / step)) for x, y in path[1:-1]]
    assert grid[0] == start and grid[-1] == goal and all(free[p] for p in grid)
    ways = [((b[0] > a[0]) - (b[0] < a[0]), (b[1] > a[1]) - (b[1] < a[1])) for a, b in zip(grid, grid[1:])]
    assert all(dx == 0 or dy == 0 for dx, dy in ways)  # each run along the grid
    bends = sum(u != v for u, v in zip([(1, 0)] + ways, ways + [(1, 0)]))
    steps = sum(abs(b[0] - a[0]) + abs(b[1] - a[1]) for a, b in zip(grid, grid[1:]))
    assert steps + R.BEND * bends == cost


@settings(max_examples=40, deadline=None)
@given(rects, ends)
def test_a_detour_takes_the_same_way_with_costs_in_int32_as_in_int64(rs, e):
    walls = _walls(rs)
    tail, head = (e[0], e[1]), (e[2], e[3])
    box = (-20.0, W + 20, -20.0, H + 20)
    assert R._Lanes(np.ones((30, 20), dtype=bool)).dtype == np.int32  # this grid's costs in int32
    narrow = R.detour(tail, head, walls, box)
    small, R.SMALL_CUT = R.SMALL_CUT, 0  # no grid is small enough: int64, cut at CUT
    try:
        assert R._Lanes(np.ones((30, 20), dtype=bool)).dtype == np.int64
        assert R.detour(tail, head, walls, box) == narrow
    finally:
        R.SMALL_CUT = small
    assert R._Lanes(np.ones((4000, 2), dtype=bool)).dtype == np.int64  # a line too long for int32
