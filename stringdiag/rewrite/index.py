"""The target, indexed: candidate boxes by key, levels for convexity, cached views.

Anchoring on the pattern box with the fewest candidates of its key, and growing along
ports, makes enumerating every match of a small pattern linear in the target.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Iterable

from ..graph.box import Box, Kind
from ..graph.diagram import Diagram
from .names import WireNames
from .view import View, view

def key(box: Box, n_in: int) -> tuple:
    """What the index files a box under: boxes of one key are the candidates for each other."""
    if box.kind is Kind.CONTRACT:
        return (box.kind, n_in)
    if box.kind in (Kind.REINDEX, Kind.CONST):
        return (box.kind,)
    return (box.kind, box.op)


class Index:
    """Candidates by key, levels (strictly increasing along every path) and cached views of
    a target diagram; a rewrite in place keeps it up to date."""

    def __init__(self, d: Diagram):
        self.d = d
        self.by_key: dict[tuple, list[int]] = defaultdict(list)
        self.level: dict[int, float] = {}
        self._views: dict[int, View] = {}
        self._names: WireNames | None = None
        for b in d.topological_boxes():
            self.add(b)
        self.n_processes = sum(len(v) for k, v in self.by_key.items() if k[0].is_process)

    def fresh_name(self, name: str | None) -> str | None:
        """A wire name not used in the target yet (``bc``, ``bc'``, ...)."""
        if self._names is None:
            self._names = WireNames(self.d)
        return self._names.fresh_name(name)

    def add(self, b: int) -> None:
        g = self.d.graph
        lev: float = 0
        for w in g.predecessors(b):
            p = next(iter(g.predecessors(w)), None)
            if p is not None:
                lev = max(lev, self.level[p])
        self.level[b] = lev + 1
        self.by_key[key(self.d.record(b), g.in_degree(b))].append(b)

    def view(self, b: int) -> View:
        v = self._views.get(b)
        if v is None:
            v = self._views[b] = view(self.d, b)
        return v

    def forget(self, b: int) -> None:
        self._views.pop(b, None)

    def raise_levels(self, boxes: Iterable[int]) -> None:
        """Restore strictly increasing levels around boxes a rewrite inserted, in time
        proportional to them: levels need only increase along every path, so the inserted
        boxes take fractional levels between the highest of what feeds them and the lowest of
        what reads them, by their depth among themselves. Only where that gap is closed (or worn
        too thin by many rewrites in one place) are the levels downstream pushed up."""
        g = self.d.graph
        new = [b for b in boxes if b in g]  # inserted in order: each after the boxes it reads
        if not new:
            return
        inside = set(new)
        depth: dict[int, int] = {}
        lo: float = 0
        for b in new:
            d = 0
            for w in g.predecessors(b):
                for p in g.predecessors(w):
                    if p in inside:
                        d = max(d, depth.get(p, 0))
                    else:
                        lo = max(lo, self.level[p])
            depth[b] = d + 1
        readers = [c for b in new for w in g.successors(b) for c in g.successors(w) if c not in inside]
        hi = min((self.level[c] for c in readers), default=None)
        top = max(depth.values())
        if hi is None or (hi > lo and (hi - lo) / (top + 1) > 1e-6 * max(1.0, abs(hi))):
            step = 1 if hi is None else (hi - lo) / (top + 1)
            for b in new:
                self.level[b] = lo + step * depth[b]
            return
        for b in new:
            self.level[b] = lo + depth[b]
        stack = list(new)
        while stack:
            b = stack.pop()
            lev = self.level[b]
            for c in [c for w in g.successors(b) for c in g.successors(w)]:
                if self.level.get(c, 0) <= lev:
                    self.level[c] = lev + 1
                    stack.append(c)

    def alive(self, b: int) -> bool:
        return b in self.d.graph


__all__ = ["key", "Index"]
