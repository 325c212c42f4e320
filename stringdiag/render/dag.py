"""A small directed acyclic graph on plain dicts, for the order hints of a derivation's pictures.

The hints are edges added one at a time, each only where it closes no cycle (``reaches``), then
read in a topological order (``ordered``). networkx did this, but importing it costs more CPU
(about 0.13 s) than laying out a step of a derivation; ``tests/test_dag.py`` checks both against
networkx's ``has_path`` and ``lexicographical_topological_sort``.
"""
from __future__ import annotations

import heapq
from typing import Any, Callable, Hashable, Iterable


class Dag:
    """Nodes, and edges ``a -> b`` each with an attribute dict (``data[a, b]``)."""

    def __init__(self, nodes: Iterable[Hashable] = ()):
        self.succ: dict[Hashable, dict[Hashable, dict[str, Any]]] = {}
        self.pred: dict[Hashable, dict[Hashable, dict[str, Any]]] = {}
        for n in nodes:
            self.add_node(n)

    @classmethod
    def of(cls, succ: dict) -> "Dag":
        """A copy of a graph's edges (``succ``: node -> its successors), without their attributes."""
        out = cls(succ)
        for a, heads in succ.items():
            for b in heads:
                out.add_edge(a, b)
        return out

    def add_node(self, n: Hashable) -> None:
        self.succ.setdefault(n, {})
        self.pred.setdefault(n, {})

    def add_edge(self, a: Hashable, b: Hashable, **attrs: Any) -> None:
        self.add_node(a)
        self.add_node(b)
        self.succ[a][b] = self.pred[b][a] = {**self.succ[a].get(b, {}), **attrs}

    def has_edge(self, a: Hashable, b: Hashable) -> bool:
        return b in self.succ.get(a, ())

    def data(self, a: Hashable, b: Hashable) -> dict[str, Any]:
        return self.succ[a][b]

    def edges(self) -> list[tuple[Hashable, Hashable]]:
        return [(a, b) for a, heads in self.succ.items() for b in heads]

    def reaches(self, a: Hashable, b: Hashable) -> bool:
        """Whether a path leads from ``a`` to ``b`` (``a`` reaches itself)."""
        if a == b:
            return True
        seen, todo = {a}, [a]
        while todo:
            for m in self.succ[todo.pop()]:
                if m == b:
                    return True
                if m not in seen:
                    seen.add(m)
                    todo.append(m)
        return False

    def ordered(self, key: Callable[[Hashable], Any]) -> list[Hashable]:
        """Every node after those with an edge into it; of those free at once, the least ``key``
        first (``key`` tells every two nodes apart)."""
        waiting = {n: len(p) for n, p in self.pred.items() if p}
        free = [(key(n), n) for n, p in self.pred.items() if not p]
        heapq.heapify(free)
        out = []
        while free:
            _, n = heapq.heappop(free)
            out.append(n)
            for m in self.succ[n]:
                waiting[m] -= 1
                if not waiting[m]:
                    del waiting[m]
                    heapq.heappush(free, (key(m), m))
        if waiting:
            raise ValueError("the graph has a cycle")
        return out
