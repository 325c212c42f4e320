"""The space of mechanisms, stage by stage (Khatri et al. (2024), Sec. 5): raw, not-composite, reduced.

- ``raw``: every member (``space.py``), built as a diagram (``build.py``); deduplicated by
  the wirings' canonical form, and confirmed by the engine's own canonical hash (every
  member's hash differs, or isomorphism is checked exactly).
- ``not-composite``: members that are a sequential composite ``f ; g`` of two smaller members
  removed (``space.is_composite``).
- ``reduced``: members related by local applications of the given reductions are one
  class (the symmetric, transitive closure of "one rule applied at one match of one member
  gives another member"); each class keeps its member with the fewest generators (first in
  enumeration order on a tie).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from ..errors import DiagError
from ..graph.diagram import Diagram
from ..rewrite.dpo import rewrite
from ..rewrite.match import Index, find_matches
from .build import build
from .space import Wiring, generators, is_composite, wirings


@dataclass
class Member:
    name: str
    wiring: Wiring
    diagram: Diagram
    generators: int


@dataclass
class Stage:
    name: str
    members: list[Member]

    @property
    def count(self) -> int:
        return len(self.members)


@dataclass
class Space:
    stages: list[Stage] = field(default_factory=list)
    classes: dict[str, list[str]] = field(default_factory=dict)  # survivor -> members it stands for

    @property
    def result(self) -> list[Member]:
        return self.stages[-1].members


def enumerate_space(defns: list[Diagram], max_size: int, rules=(), copy_outputs: bool = False,
                    progress=None) -> Space:
    """The stages for generators ``defns`` (their first input's type is the stream type)."""
    gens, stream = generators(defns)
    ws = list(wirings(gens, stream, max_size, copy_outputs))
    space = Space()
    raw = [Member(f"R{k}", w, None, w.size) for k, w in enumerate(ws)]  # type: ignore[arg-type]
    space.stages.append(Stage("raw", raw))
    kept = [m for m in raw if not is_composite(m.wiring, gens, stream)]
    for m in (progress(kept) if progress else kept):
        m.diagram = build(m.wiring, gens, m.name)
    _confirm_distinct(kept)
    space.stages.append(Stage("not-composite", kept))
    if rules:
        survivors, classes = reduce(kept, list(rules))
        space.classes = classes
        space.stages.append(Stage("reduced", survivors))
    return space


def _confirm_distinct(members: list[Member]) -> None:
    """The engine's canonical hash must tell the members apart; where two hashes meet, the
    exact isomorphism decides (two isomorphic members would be a bug in the enumeration)."""
    by_hash: dict[str, Member] = {}
    for m in members:
        h = m.diagram.canonical_hash()
        other = by_hash.get(h)
        if other is not None and other.diagram.isomorphic(m.diagram):
            raise DiagError(f"internal check failed: members {other.name} and {m.name} are isomorphic")
        by_hash[h] = m


def reduce(members: list[Member], rules: list) -> tuple[list[Member], dict[str, list[str]]]:
    """Classes of members related by one application of a rule (either way), closed
    transitively; the smallest member of each class survives."""
    index = {m.diagram.canonical_hash(): m for m in members}
    bound = max((len(m.diagram) for m in members), default=0)
    parent = {m.name: m.name for m in members}

    def find(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for m in members:
        for other in _neighbours(m.diagram, rules, index, bound):
            a, b = find(m.name), find(other.name)
            if a != b:
                parent[a] = b
    classes: dict[str, list[Member]] = {}
    for m in members:
        classes.setdefault(find(m.name), []).append(m)
    order = {m.name: k for k, m in enumerate(members)}
    survivors, shown = [], {}
    for group in classes.values():
        best = min(group, key=lambda m: (m.generators, order[m.name]))
        survivors.append(best)
        shown[best.name] = [m.name for m in group if m is not best]
    survivors.sort(key=lambda m: order[m.name])
    return survivors, shown


def _ops(d: Diagram) -> Counter:
    return Counter(d.box(b)["op"] for b in d.boxes())


def _neighbours(d: Diagram, rules: list, index: dict, bound: int) -> list[Member]:
    """Members one rewrite away from ``d``: each rule applied at each of its matches (a rule
    whose left side has boxes ``d`` lacks cannot match, and is not tried)."""
    out = []
    have = _ops(d)
    ix = None
    for rule in rules:
        need = _ops(rule.lhs)
        if not need or any(have[op] < n for op, n in need.items()) or len(d) + len(rule.rhs) - len(rule.lhs) > bound:
            continue  # cannot match, or makes a diagram larger than every member
        ix = ix or Index(d)
        for m in find_matches(d, rule, index=ix):
            try:
                res = rewrite(d, m)
            except DiagError:
                continue
            hit = index.get(res.canonical_hash())
            if hit is not None and hit.diagram.isomorphic(res):
                out.append(hit)
    return out


__all__ = ["Member", "Stage", "Space", "enumerate_space", "reduce"]
