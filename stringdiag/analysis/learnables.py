"""The weight sets of ``d.expand()`` and of its loops' bodies: the weights algebra of the fold,
and the listing of ``info``.

Weight sets (``graph/weights.py``): a global learnable box is one set however often it is
used; a local one (declared in a definition's body) is one set per *instance* of that
definition, and two ``diagram`` boxes with the same ``instance`` are one instance. The
counts are a fold (:class:`WeightsAlgebra`); the listing names each set by its instance
path (``H#2/F``, ``B#1/0/F``), the paths ``graph/expand.py`` gives, so it walks the
instances from the top, and stops where an instance lists nothing new.
"""
from __future__ import annotations

from collections import Counter
from typing import Any, Callable, Iterator, Mapping

from ..graph.box import Box, Kind
from ..graph.diagram import Diagram
from ..graph.expand import copy_path
from ..graph.hypergraph import repeated
from ..graph.types import Dim, show_type, substitute_type
from ..syntax.records import Mutable, field
from .fold import Algebra, Site, copies, fold, inlined, opened

Decl = tuple  # (id of the declaring definition's graph, param): a local learnable declaration


class Weights(Mutable, frozen=False):
    """The learnable boxes one instance of a definition expands to."""

    glob: Counter = field(default_factory=Counter)  # global weight set -> uses
    loc_uses: Counter = field(default_factory=Counter)  # local declaration -> uses
    loc_sets: Counter = field(default_factory=Counter)  # local declaration -> weight sets
    keys: frozenset = frozenset()  # global sets and local declarations reached
    has_local: bool = False
    listed: int = 0  # local weight sets as info lists them: a long stack's copies once (_collapsed)


class _Reading(Mutable, frozen=False):
    """A body being read: its Weights so far, the keys reached, the instances met."""

    w: Weights = field(default_factory=Weights)
    keys: set = field(default_factory=set)
    instances: set = field(default_factory=set)


class WeightsAlgebra(Algebra[_Reading, Weights]):
    """Uses and weight sets per definition. A callee run ``t`` times (a repeat) counts ``t``
    times in uses, and in sets unless its copies share them; an instance met twice (a copy)
    adds its uses again but no sets. ``through`` says which diagram boxes are opened."""

    def __init__(self, through: Callable[[Box], bool]):
        self.opens = through
        self.bodies: dict[int, list[Site]] = {}

    def start(self, x: Diagram) -> _Reading:
        return _Reading()

    def box(self, acc: _Reading, x: Diagram, site: Site) -> None:
        node, w = site.node, acc.w
        if node.kind is not Kind.LEARN:
            return
        if node.local:
            decl = (id(x.graph), node.param)
            w.loc_uses[decl] += 1
            w.listed += decl not in w.loc_sets
            w.loc_sets[decl] = 1
            acc.keys.add(decl)
            w.has_local = True
        else:
            w.glob[node.param] += 1
            acc.keys.add(node.param)

    def call(self, acc: _Reading, x: Diagram, site: Site, c: Weights) -> None:
        node, w = site.node, acc.w
        t = copies(node) or 1  # a count of unknown size counted once
        w.glob.update({k: n * t for k, n in c.glob.items()})
        w.loc_uses.update({k: n * t for k, n in c.loc_uses.items()})
        acc.keys |= c.keys
        w.has_local |= c.has_local
        inst = (site.segment, id(node.ref.graph))
        if inst not in acc.instances:
            acc.instances.add(inst)
            sets = 1 if node.shared else t
            w.loc_sets.update({k: n * sets for k, n in c.loc_sets.items()})
            w.listed += c.listed * (1 if _collapsed(node, c) else sets)

    def finish(self, acc: _Reading, x: Diagram) -> Weights:
        acc.w.keys = frozenset(acc.keys)
        return acc.w

    def definition(self, x: Diagram, body: list[Site], done: Mapping[int, Weights]) -> Weights:
        self.bodies[id(x.graph)] = body
        return super().definition(x, body, done)


def weights(d: Diagram, through: Callable[[Box], bool] = inlined) -> tuple[dict[int, Weights], dict[int, list]]:
    """Per reachable definition (by graph id) its Weights, and its body (:class:`~.fold.Site` list).

    ``through`` says which diagram boxes are opened (inlined ones for ``info``; scanned
    ones too for the compiled module's parameters)."""
    algebra = WeightsAlgebra(through)
    return fold(d, algebra), algebra.bodies


# at most this many weight sets are listed one by one; beyond, local ones are grouped by declaration
LIST_LIMIT = 1000


def _collapsed(node: Box, callee: Weights) -> bool:
    """A stack listed once for all its copies (``B#1/k<1000000000/F``): one of known count with
    weights of its own whose copies would make more than LIST_LIMIT lines."""
    t = copies(node) if repeated(node) and not node.shared else None
    return t is not None and t > 1 and t * callee.listed > LIST_LIMIT


def _signature(d: Diagram, b: int, sub: Mapping[str, Dim]) -> str:
    ins = ", ".join(show_type(substitute_type(d.local_in_type(b, k), sub)) for k in range(len(d.box_inputs(b))))
    outs = ", ".join(show_type(substitute_type(d.local_out_type(b, k), sub)) for k in range(len(d.box_outputs(b))))
    ref = d.record(b).ref  # what a learnable box's declaration adds: its approximator, its bounds
    extra = ([ref.via.show()] if getattr(ref, "via", None) else []) + \
        [f"where {', '.join(f'{n} <= {m}' for n, m in ref.bounds)}"] * bool(getattr(ref, "bounds", ()))
    return " ".join([f"{ins} -> {outs}".strip()] + extra)


def learnables(d: Diagram, limit: int = LIST_LIMIT) -> list[dict]:
    """The learnable boxes of the compiled module (those of ``d.expand()`` and of the bodies
    of its scans): one entry per weight set in order of first use (name, box, signature,
    uses, shared), as ``info`` lists them.

    When there are more than ``limit`` weight sets, a local learnable with several weight
    sets is listed once for its declaration instead: name ``F (local to H)``, with
    ``weight_sets`` (how many the expansion holds: one per instance of ``H``), ``local_to``
    and ``uses`` (over all of its weight sets). A stack whose copies would take more than
    ``LIST_LIMIT`` lines is listed once, its path naming the count (``B#1/k<1000000000/F``),
    with ``weight_sets`` and ``uses`` over its copies."""
    ws, bodies = weights(d, through=opened)
    top = ws[id(d.graph)]
    listing = _Listing(d, ws, bodies, grouped=len(top.glob) + top.listed > limit)
    listing.walk(d, "", {})
    for param, uses in top.glob.items():
        listing.entries[param]["uses"] += uses
    return list(listing.entries.values())


class _Listing:
    """:func:`learnables`' entries, made by walking the instances from the top: each weight set
    at its first use, named by its instance path."""

    def __init__(self, d: Diagram, ws: Mapping[int, Weights], bodies: Mapping[int, list[Site]], grouped: bool):
        self.d, self.ws, self.bodies, self.grouped = d, ws, bodies, grouped
        self.top = ws[id(d.graph)]
        self.entries: dict[Any, dict] = {}

    def walk(self, x: Diagram, path: str, sub: Mapping[str, Dim], here: int = 1) -> Counter:
        """List the weight sets of ``x`` not listed yet, each standing for ``here`` sets (the
        copies of the stacks around it listed once); returns the uses of local sets it counted."""
        counted: Counter = Counter()
        walked: dict[tuple, Counter] = {}  # (instance, callee) -> the uses one copy adds
        for site in self.bodies[id(x.graph)]:
            if site.node.kind is Kind.LEARN:
                self.learn(x, site, path, sub, here, counted)
            elif opened(site.node):
                self.call(site, path, sub, here, counted, walked)
        return counted

    def learn(self, x: Diagram, site: Site, path: str, sub: Mapping[str, Dim], here: int, counted: Counter) -> None:
        """A learnable box: its entry made at its first use; a local one's uses counted here."""
        node, top = site.node, self.top
        local = bool(node.local)
        param = node.param
        group = self.grouped and local and x is not self.d
        key: Any = (id(x.graph), param) if group else f"{path}{param}" if local else param
        entry = self.entries.get(key)
        if entry is None:
            sets = top.loc_sets[key] if group else here if local else 1
            name = f"{param} (local to {x.name})" if group and sets > 1 else f"{path}{param}" if local else param
            entry = self.entries[key] = {"name": name, "box": node.op, "signature": _signature(x, site.box, sub),
                                         "uses": top.loc_uses[key] if group else 0, "shared": not local}
            if sets > 1:
                entry["weight_sets"], entry["local_to"] = sets, x.name
        if local and not group:
            entry["uses"] += here
            counted[key] += here

    def call(self, site: Site, path: str, sub: Mapping[str, Dim], here: int, counted: Counter, walked: dict) -> None:
        """An opened box: each instance it runs walked once, its copies counted again."""
        node = site.node
        c = self.ws[id(node.ref.graph)]
        for seg, times, sets in _layer_segments(node, site.segment or "", c):  # (an opened box has one)
            if (self.grouped or not c.has_local) and all(k in self.entries for k in c.keys):
                break  # the copies list nothing new (their global uses are counted by the caller)
            inst = (seg, id(node.ref.graph))
            if inst not in walked:
                csub = {g: dim.substitute(sub) for g, dim in node.generics}
                walked[inst] = self.walk(node.ref, f"{path}{seg}/", csub, here * sets)
                counted.update(walked[inst])
                times -= 1
            for k, n in walked[inst].items():  # copies of an instance walked: the same weight sets again
                self.entries[k]["uses"] += n * times
                counted[k] += n * times


def _layer_segments(node: Box, seg: str, callee: Weights) -> Iterator[tuple[str, int, int]]:
    """The instance paths of the copies a box runs, each with how many copies run it and how
    many weight sets it stands for: ``B#1/0`` ... for a repeat with weights of its own, ``B#1``
    for all copies when shared; one path ``B#1/k<L`` stands for the copies of a count whose size
    is not given (counted once), ``B#1/k<1000000000`` for those of a long stack (_collapsed)."""
    t = copies(node)
    if t is None:
        yield (seg if node.shared else f"{seg}/k<{node.count}"), 1, 1
    elif node.shared or not repeated(node):
        yield seg, t, 1
    elif _collapsed(node, callee):
        yield f"{seg}/k<{t}", 1, t
    else:
        yield from ((copy_path(seg, k, False), 1, 1) for k in range(t))


