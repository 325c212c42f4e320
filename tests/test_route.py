"""Wires routed around frames (render/route.py), against a plain search written here.

Over random walls: a path found enters no wall and joins its two ends; where a breadth-first
search over the same grid (written here, apart from the router) finds a way from one end to
the other, the router finds one too; the left-to-right router's path only runs right, up
and down.
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
