"""The backtracking search for one pattern in one indexed target.

Place the anchor, then each box along the pattern's plan; every placement of a pattern box
on a target box is a bijection of that box's labels (the rest of the target box's labels
become context) and a permutation of axes for each wire it reaches first. Wires are matched
*up to a permutation of their axes*: a rule written for ``a[i, j]`` also matches a
transposed use. The conditions a placement and a whole match must meet are in
``conditions.py``.
"""
from __future__ import annotations

from ..syntax.records import Mutable, field
from typing import Any, Iterator

from .conditions import (context_links, every_label_placed, holds, same_box, same_cell, same_constant, same_definition,
                         same_generics, same_local_types, same_locality, same_scan, same_shape, scan_kept,
                         weight_ties)
from ..graph.box import Box
from ..graph.diagram import Diagram
from .cell import CellMatch, match_cell
from .context import Slots
from .index import Index
from .names import wire_name
from .occurrence import Match
from .pattern import Pattern, Step
from .unify import Unifier, bind_function, identity
from .view import Perm


class SearchState(Mutable, frozen=False):
    """A partial match: what is placed so far, shared by the states that extend it."""

    boxes: dict[int, int] = field(default_factory=dict)
    used: frozenset = frozenset()
    wires: dict[int, tuple[int, Perm]] = field(default_factory=dict)
    uni: Unifier = field(default_factory=lambda: Unifier(frozenset()))
    idents: dict[str, tuple[tuple, int]] = field(default_factory=dict)
    links: tuple = ()
    ctx: dict[int, tuple[str, ...]] = field(default_factory=dict)  # target box -> its context labels
    inner: dict[str, Box] = field(default_factory=dict)  # box variables bound inside scanned cells


Lam = dict  # pattern label -> target label, one box's bijection


class Placement:
    """The ways one pattern box can be one target box: its labels sent to distinct target
    labels of the same role (iterated or summed) and unifying dimension, each wire it reaches
    first given a permutation of axes."""

    def __init__(self, pattern: Pattern, pb: int, ix: Index, tb: int):
        self.pv, self.tv = pv, tv = pattern.views[pb], ix.view(tb)
        self.pdim = dict(pv.labels + pv.summed)
        self.tdim = dict(tv.labels + tv.summed)
        self.prole = {lab: 0 for lab, _ in pv.labels} | {lab: 1 for lab, _ in pv.summed}
        self.trole = {lab: 0 for lab, _ in tv.labels} | {lab: 1 for lab, _ in tv.summed}
        self.pwt, self.twt = pattern.d.wire_type, ix.d.wire_type

    def bind(self, lam: Lam, used: frozenset, u: Unifier, pl: str, tl: Any) -> tuple[Lam, frozenset] | None:
        """Send the pattern label ``pl`` to ``tl``, or check it is sent there already."""
        if pl in lam:
            return (lam, used) if lam[pl] == tl else None
        if not isinstance(tl, str) or tl in used or self.prole[pl] != self.trole.get(tl) \
                or not u.unify(self.pdim[pl], self.tdim[tl]):
            return None
        return {**lam, pl: tl}, used | {tl}

    def perms(self, alpha: tuple, beta: tuple, pw: int, w: int, j: int, lam: Lam, used: frozenset, u: Unifier,
              acc: list) -> Iterator[tuple]:
        """Ways to send the pattern wire's axes ``j..`` to distinct target axes."""
        if j == len(alpha):
            yield tuple(acc), lam, used, u
            return
        a = alpha[j]
        if isinstance(a, int):
            qs = [q for q, b in enumerate(beta) if b == a]
        elif a in lam:
            qs = [q for q, b in enumerate(beta) if b == lam[a]]
        else:
            qs = [q for q, b in enumerate(beta) if isinstance(b, str) and b not in used]
        pt, tt = self.pwt(pw)[j], self.twt(w)
        for q in qs:
            if q in acc:
                continue
            u2 = u.copy()
            if not u2.unify(pt, tt[q]):
                continue
            r = (lam, used) if isinstance(a, int) else self.bind(lam, used, u2, a, beta[q])
            if r is not None:
                yield from self.perms(alpha, beta, pw, w, j + 1, r[0], r[1], u2, acc + [q])

    def again(self, alpha: tuple, beta: tuple, perm: Perm, lam: Lam, used: frozenset,
              u: Unifier) -> tuple[Lam, frozenset] | None:
        """A wire placed already, read again: its permutation must fit this port's labels."""
        for a, q in zip(alpha, perm):
            if isinstance(a, int):
                if beta[q] != a:
                    return None
                continue
            r = self.bind(lam, used, u, a, beta[q])
            if r is None:
                return None
            lam, used = r
        return lam, used

    def ports(self, k: int, lam: Lam, used: frozenset, u: Unifier, wires: dict) -> Iterator[tuple]:
        """Place the input ports ``k..``, then the outputs."""
        pv = self.pv
        if k == len(pv.ins):
            yield from self.outputs(0, lam, used, u, wires)
            return
        pw, alpha = pv.ins[k]
        w, beta = self.tv.ins[k]
        if pw not in wires:
            for perm, lam2, used2, u2 in self.perms(alpha, beta, pw, w, 0, lam, used, u, []):
                yield from self.ports(k + 1, lam2, used2, u2, {**wires, pw: (w, perm)})
            return
        w0, perm = wires[pw]
        u2 = u.copy()
        r = self.again(alpha, beta, perm, lam, used, u2) if w0 == w else None
        if r is not None:
            yield from self.ports(k + 1, r[0], r[1], u2, wires)

    def outputs(self, k: int, lam: Lam, used: frozenset, u: Unifier, wires: dict) -> Iterator[tuple]:
        """Place the output ports ``k..``: a label no input reads (a broadcast) may be any
        unused target label of its dimension; the output's layout then fixes its permutation."""
        pv, tv = self.pv, self.tv
        if k == len(pv.outs):
            yield lam, u, wires
            return
        play, tlay = pv.layouts[k], tv.layouts[k]
        free = [e for e in play if isinstance(e, str) and e not in lam]
        for lam2, used2, u2 in self.broadcast(free, 0, tlay, lam, used, u):
            wires2 = self.output_wire(pv.outs[k], tv.outs[k], play, tlay, lam2, u2, wires)
            if wires2 is not None:
                yield from self.outputs(k + 1, lam2, used2, u2, wires2)

    def broadcast(self, free: list, j: int, tlay: tuple, lam: Lam, used: frozenset,
                  u: Unifier) -> Iterator[tuple]:
        """Ways to send the labels ``free[j:]`` to labels of the target output's layout."""
        if j == len(free):
            yield lam, used, u
            return
        for tl in tlay:
            u2 = u.copy()
            r = self.bind(lam, used, u2, free[j], tl)
            if r is not None:
                yield from self.broadcast(free, j + 1, tlay, r[0], r[1], u2)

    def output_wire(self, pw: int, w: int, play: tuple, tlay: tuple, lam: Lam, u: Unifier,
                    wires: dict) -> dict | None:
        """The output wire placed by its layout, or ``None`` where the layouts disagree."""
        order = []
        for e in play:
            want = lam[e] if isinstance(e, str) else e
            if want not in tlay:
                return None
            order.append(tlay.index(want))
        perm = tuple(order)
        if pw in wires:
            return wires if wires[pw] == (w, perm) else None
        if not u.copy().unify_types(self.pwt(pw), tuple(self.twt(w)[q] for q in perm)):
            return None
        return {**wires, pw: (w, perm)}


class Matcher:
    """Backtracking search for one pattern in one indexed target: place the anchor, then each
    box along the plan, then check the conditions on the whole match."""

    def __init__(self, pattern: Pattern, index: Index):
        self.p = pattern
        self.ix = index
        self.t = index.d

    # candidates -------------------------------------------------------------------------
    def count(self, pb: int) -> int:
        k = self.p.keys[pb]
        return self.ix.n_processes if k is None else len(self.ix.by_key.get(k, ()))

    def anchor(self) -> int:
        return min(self.p.boxes, key=lambda b: (self.count(b), self.p.boxes.index(b)))

    def anchors(self, pb: int) -> Iterator[int]:
        """Every live target box of the pattern box's key (any process for a box variable)."""
        k, alive = self.p.keys[pb], self.ix.alive
        if k is not None:
            yield from (b for b in list(self.ix.by_key.get(k, ())) if alive(b))
            return
        for bs in [bs for kk, bs in self.ix.by_key.items() if kk[0].is_process]:
            yield from (b for b in bs if alive(b))

    def candidates(self, how: tuple, st: SearchState) -> Iterator[int]:
        """The target boxes at the port the plan says: the producer or a reader of a wire."""
        g = self.t.graph
        _, pw, port = how
        w = st.wires[pw][0]
        if how[0] == "producer":
            yield from (b for b in g.predecessors(w) if self.makes(b, port, w))
            return
        yield from (b for _, b, k in g.out_edges(w, keys=True) if k == port)

    def makes(self, b: int, port: int, w: int) -> bool:
        outs = self.ix.view(b).outs
        return port < len(outs) and outs[port] == w

    # search -----------------------------------------------------------------------------
    def run(self, seed: tuple[int, int] | None = None) -> Iterator[Match]:
        """Every match; with ``seed = (pattern box, target box)`` only those that send one to the other."""
        first = self.anchor() if seed is None else seed[0]
        plan = self.p.plan(first, self.count)
        start = SearchState(uni=Unifier(self.p.vars))
        seen: set = set()
        for tb in (self.anchors(first) if seed is None else [seed[1]]):
            for done in (d for st in self.box(first, tb, start) for d in self.grow(plan, 1, st)):
                m = self.finish(done)
                if m is None:
                    continue
                sig = (tuple(sorted(m.boxes.items())), tuple(sorted(m.wires.items())))
                if sig not in seen:
                    seen.add(sig)
                    m.seed = (first, tb)
                    yield m

    def grow(self, plan: list[Step], k: int, st: SearchState) -> Iterator[SearchState]:
        if k == len(plan):
            yield st
            return
        pb, how = plan[k]
        cands = self.anchors(pb) if how[0] == "anchor" else self.candidates(how, st)
        for tb in [tb for tb in cands if tb not in st.used]:  # one target box for one pattern box
            for st2 in self.box(pb, tb, st):
                yield from self.grow(plan, k + 1, st2)

    def box(self, pb: int, tb: int, st: SearchState) -> Iterator[SearchState]:
        """Every way the pattern box ``pb`` can be the target box ``tb`` in state ``st``."""
        pn, tn = self.p.node[pb], self.t.record(tb)
        pv, tv = self.p.views[pb], self.ix.view(tb)
        if not (same_shape(pv, tv) and same_scan(pv, tv) and same_box(pn, tn) and same_definition(pn, tn)
                and same_locality(pn, tn)):
            return
        uni = st.uni.copy()
        if not (same_constant(pn, tn, uni) and same_generics(pn, tn, uni)):
            return
        inner = same_cell(pn, tn, uni, _match_body)
        if inner is None:
            return
        idents: dict | None = st.idents
        if pn.kind.is_process:
            idents = bind_function(st.idents, pn.op, identity(tn, with_generics=bool(pn.var)), tb)
        for name, node in inner.items():  # one name, one function, inside a cell and out
            if idents is not None:
                idents = bind_function(idents, name, identity(node, with_generics=True), None)
        if idents is None or (pb in self.p.local and not same_local_types(self.p.local[pb], self.t, tb, uni)):
            return
        st = SearchState(st.boxes, st.used, st.wires, st.uni, st.idents, st.links, st.ctx, {**st.inner, **inner})
        yield from self.place(Placement(self.p, pb, self.ix, tb), pb, tb, st, uni, idents)

    def place(self, pl: Placement, pb: int, tb: int, st: SearchState, uni: Unifier,
              idents: dict) -> Iterator[SearchState]:
        """The placements of the box's labels and wires that meet the SIMD conditions."""
        pv, tv = pl.pv, pl.tv
        for lam, u, wires in pl.ports(0, {}, frozenset(), uni, st.wires):
            if not (every_label_placed(lam, pl.pdim) and scan_kept(pv, tv, lam)):
                continue
            image = set(lam.values())
            ctx = tuple(lab for lab, _ in tv.labels if lab not in image)
            links = context_links(pv, tv, tb, wires, ctx)
            if links is None:
                continue
            yield SearchState({**st.boxes, pb: tb}, st.used | {tb}, wires, u, idents, st.links + links,
                        {**st.ctx, tb: ctx}, st.inner)

    # the whole match ------------------------------------------------------------------
    def finish(self, st: SearchState) -> Match | None:
        """The match a complete state describes, if it meets the conditions on a whole match."""
        p, t = self.p, self.t
        uni = st.uni.copy()
        if not uni.settle() or not holds(p, self.ix, st.used, st.wires):
            return None
        slots = Slots(st.links)
        if not slots.count([st.boxes[pb] for pb in p.boxes], st.ctx):
            return None
        shown, box_slots = slots.shown(self.ix, st.ctx)
        boundary = self.boundary(st.wires, slots)
        if boundary is None:
            return None  # pragma: no cover - every context axis is read by a matched box
        names = [wire_name(t, st.wires[y][0]) for y in p.outputs if y in st.wires]
        every = frozenset(wire_name(t, st.wires[y][0]) for y in p.produced)
        return Match(p.d, dict(st.boxes), dict(st.wires), boundary, dict(uni.sub),
                     {n: tb for n, (_, tb) in st.idents.items() if tb is not None}, shown, box_slots,
                     ", ".join(dict.fromkeys(names)), every, ties=weight_ties(p, t, st.boxes), inner=dict(st.inner))

    def boundary(self, wires: dict, slots: Slots) -> dict | None:
        """Each input and output of the pattern: its target wire, permutation, context axes."""
        out = {}
        for x in self.p.inputs + self.p.outputs:
            if x not in wires or x in out:
                continue
            w, perm = wires[x]
            n = len(self.t.wire_type(w))
            ctx = slots.axes(w, perm, n)
            if len(ctx) + len(perm) != n:
                return None
            out[x] = (w, perm, ctx)
        return out

    def recheck(self, m: Match) -> bool:
        """Does a match found earlier still hold after other rewrites of the target? Its boxes
        must be alive and wired as they were; the conditions on a whole match hold again."""
        return all(self.wired_as_before(pb, tb, m.wires) for pb, tb in m.boxes.items()) and \
            holds(self.p, self.ix, m.targets, m.wires)

    def wired_as_before(self, pb: int, tb: int, wires: dict) -> bool:
        if not self.ix.alive(tb):
            return False
        self.ix.forget(tb)
        pv, tv = self.p.views[pb], self.ix.view(tb)
        return tuple(w for w, _ in tv.ins) == tuple(wires[w][0] for w, _ in pv.ins) and \
            tv.outs == tuple(wires[w][0] for w in pv.outs)


def _match_body(pat: Diagram, target: Diagram) -> CellMatch | None:
    """A cell pattern's body as the whole body of a scanned cell (``cell.match_cell``)."""
    return match_cell(pat, target, lambda p, t: Matcher(Pattern(p, passing=True), Index(t)).run())


__all__ = ["Matcher", "Placement", "SearchState"]
