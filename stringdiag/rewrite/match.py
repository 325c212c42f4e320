"""Typed subgraph matching of a rule side's interior in a target diagram.

A match sends each box of the pattern (a rule side) to a distinct target box of the same
identity (class, op, generics after unifying the rule's dimension variables), port for
port, and each wire to a target wire. It is found by anchoring on the pattern box with
the fewest candidates (an index by op) and growing along ports, so enumerating every match
of a small pattern costs time linear in the target.

Indices are compared the way ``iso.py`` compares them: by position, never by name. Each
box's labels are local to it, so a match maps the pattern's labels of a box to the target
box's labels (one bijection per box, dimensions unified), and each wire to a target wire
*up to a permutation of its axes*: a rule written for ``a[i, j]`` also matches a
transposed use, which is what lets one associativity rule cover ``Q Kᵀ V``. A contraction's
local axes are read as iterated labels (``y[i] = sum_j a[i, j] * v[j]`` is
``y[i, c] = sum_j a[i, j] * v[j, c]``), so the two spellings match each other.

**Context.** Target boxes may carry more SIMD labels than the pattern's: the extra ones
are a common context (heads, layers, a query index), and the match records them as
*slots*. A slot is one index shared through the matched wires (a box's context label, the
axes it reads and writes with it); every matched box iterates each of its slots once. The
rewrite prepends the slots to the inserted boxes, so a rule written without SIMD applies
inside any SIMD box, tightened as the elaborator would place it.

**Conditions** (Chyp's, for implicit copies): a pattern input may go to any target wire of
unifying type (one input read twice goes to one wire; two inputs may share a wire); an
interior wire of the pattern that is not an output must have no reader outside the match
and not be a diagram output (gluing); no path leaves the match and re-enters it
(convexity, checked against levels that increase along every path).

Each match is described by its wires' names (with the instance path of expanded
definitions, ``Layer#3/Head#2/y``), which a derivation script uses to select it.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator

from ..errors import DiagError
from ..graph.diagram import Diagram
from ..graph.gcpause import gc_paused
from ..graph.iso import definition_key
from ..graph.types import Dim
from ..graph.weights import weight_key

LOCAL = "\u00b7"  # label prefix standing for a contraction's local axis k: "·k"
PROCESSES = ("learn", "abstract", "fixed", "diagram")  # what a box variable may stand for
Perm = tuple[int, ...]  # pattern wire axis p -> target wire axis perm[p]


# -- a box as matching sees it ----------------------------------------------------------
@dataclass(frozen=True)
class View:
    """A box with a contraction's local axes turned into iterated labels."""

    labels: tuple[tuple[str, Dim], ...]  # iterated labels, in the order of the output's axes
    summed: tuple[tuple[str, Dim], ...]
    ins: tuple[tuple[int, tuple], ...]   # (wire, axes): a label, or an int (a local axis)
    outs: tuple[int, ...]
    layouts: tuple[tuple, ...]           # per output: its axes, as labels or local ints
    scan: bool


def view(d: Diagram, b: int) -> View:
    node = d.box(b)
    simd, summed = tuple(node["simd"]), tuple(node.get("summed", ()))
    ins, outs = d.box_inputs(b), tuple(d.box_outputs(b))
    if node["box"] == "contract":
        extra = tuple((f"{LOCAL}{k}", dim) for k, dim in enumerate(d.local_out_type(b, 0)))
        ins = [(w, tuple(f"{LOCAL}{a}" if isinstance(a, int) else a for a in axes)) for w, axes in ins]
        labels = simd + extra
        return View(labels, summed, tuple(ins), outs, (tuple(lab for lab, _ in labels),), False)
    scan = bool(node.get("scan"))
    layouts = []
    for port, w in enumerate(outs):
        labs = [lab for lab, _ in simd][: len(simd) - (1 if scan and port == 0 else 0)]
        layouts.append(tuple(labs) + tuple(range(len(d.wire_type(w)) - len(labs))))
    return View(simd, summed, tuple(ins), outs, tuple(layouts), scan)


def key(node: dict, n_in: int) -> tuple:
    """What the index files a box under: boxes of one key are the candidates for each other."""
    if node["box"] == "contract":
        return ("contract", n_in)
    if node["box"] in ("reindex", "const"):
        return (node["box"],)
    return (node["box"], node["op"])


def identity(node: dict, with_generics: bool = False) -> tuple:
    """Which function a process box is, its weights aside: a name bound twice in a pattern
    must find one function twice; whether with one set of weights is :attr:`Match.ties`.
    A definition is told by its content, not its name alone."""
    ref = definition_key(node["ref"]) if node["box"] == "diagram" else None
    global_param = node.get("param") if node["box"] == "learn" and not node.get("local") else None
    ident = (node["box"], node["op"], ref, global_param, bool(node.get("scan")))
    return ident + (tuple(node.get("generics", ())),) if with_generics else ident


def instance_path(node: dict) -> str:
    """``Layer#3/Head#2/`` for a box inlined from definitions by ``expand``; else empty."""
    for c in reversed(tuple(node.get("clusters", ()))):
        if c and c[0] == "def":
            return c[1]
    return ""


def wire_name(d: Diagram, w: int) -> str:
    """A wire's name as matches spell it: its own name, qualified by the instance of the
    definition it was opened from (``Layer#3/Head#2/y``) unless the diagram that used the
    definition named it; an unnamed wire by the box making it (``F@3:7``)."""
    node = d.graph.nodes[w]
    pr = d.producer(w)
    path = instance_path(d.box(pr)) if pr is not None else ""
    if "scope" in node:  # named by the definition that used the one making it
        path = node["scope"]
    if node.get("name"):
        return path + node["name"]
    if pr is not None:
        pos = d.box(pr).get("pos")
        op = d.box(pr)["op"]
        return path + (f"{op}@{pos.line}:{pos.col}" if pos else f"{op}#{pr}")
    return f"#{w}"


# -- the target, indexed ----------------------------------------------------------------
class Index:
    """Candidates by key, levels (strictly increasing along every path) and cached views of
    a target diagram; a rewrite in place keeps it up to date."""

    def __init__(self, d: Diagram):
        self.d = d
        self.by_key: dict[tuple, list[int]] = defaultdict(list)
        self.level: dict[int, int] = {}
        self._views: dict[int, View] = {}
        self._names: dict[str, int] | None = None
        for b in d.topological_boxes():
            self.add(b)
        self.n_processes = sum(len(v) for k, v in self.by_key.items() if k[0] in PROCESSES)

    def fresh_name(self, name: str | None) -> str | None:
        """A wire name not used in the target yet (``bc``, ``bc'``, ...)."""
        if name is None:
            return None
        if self._names is None:
            self._names = {}
            for _, a in self.d.graph.nodes(data=True):
                if a["kind"] == "wire" and a.get("name"):
                    self._names[a["name"]] = 1
        while name in self._names:
            name += "'"
        self._names[name] = 1
        return name

    def add(self, b: int) -> None:
        g = self.d.graph
        lev = 0
        for w in g.predecessors(b):
            p = next(iter(g.predecessors(w)), None)
            if p is not None:
                lev = max(lev, self.level[p])
        self.level[b] = lev + 1
        self.by_key[key(g.nodes[b], g.in_degree(b))].append(b)

    def view(self, b: int) -> View:
        v = self._views.get(b)
        if v is None:
            v = self._views[b] = view(self.d, b)
        return v

    def forget(self, b: int) -> None:
        self._views.pop(b, None)

    def raise_levels(self, boxes: Iterable[int]) -> None:
        """Restore strictly increasing levels downstream of (re)inserted boxes."""
        g = self.d.graph
        stack = list(boxes)
        while stack:
            b = stack.pop()
            lev = self.level[b]
            for w in g.successors(b):
                for c in g.successors(w):
                    if self.level.get(c, 0) <= lev:
                        self.level[c] = lev + 1
                        stack.append(c)

    def alive(self, b: int) -> bool:
        return b in self.d.graph


# -- unification of dimensions -----------------------------------------------------------
class Unifier:
    """Bindings of a rule's dimension variables to target dimensions."""

    __slots__ = ("vars", "sub", "pending")

    def __init__(self, variables: frozenset[str], sub: dict | None = None, pending: tuple = ()):
        self.vars = variables
        self.sub: dict[str, Dim] = dict(sub or {})
        self.pending: tuple = pending

    def copy(self) -> "Unifier":
        return Unifier(self.vars, self.sub, self.pending)

    def unify(self, r: Dim, t: Dim) -> bool:
        n = r.name
        if n is not None and n in self.vars:
            have = self.sub.get(n)
            if have is None:
                self.sub[n] = t
                return True
            return have == t
        free = r.names() & self.vars
        if not free:
            return r == t
        if free <= self.sub.keys():
            return r.substitute(self.sub) == t
        self.pending = self.pending + ((r, t),)  # a sum of variables: decided once they are bound
        return True

    def settle(self) -> bool:
        for r, t in self.pending:
            if not (r.names() & self.vars) <= self.sub.keys() or r.substitute(self.sub) != t:
                return False
        self.pending = ()
        return True

    def unify_types(self, r, t) -> bool:
        return len(r) == len(t) and all(self.unify(a, b) for a, b in zip(r, t))

    def unify_value(self, r, t) -> bool:
        """Constant expressions (``sqrt(k)``) with dimensions in them."""
        if not (isinstance(r, tuple) and isinstance(t, tuple)) or len(r) != len(t) or r[0] != t[0]:
            return r == t
        if r[0] == "dim":
            return self.unify(r[1], t[1])
        if r[0] == "num":
            return r == t
        return all(self.unify_value(a, b) for a, b in zip(r[1:], t[1:]))


# -- the pattern -----------------------------------------------------------------------
class Pattern:
    """A rule side prepared for matching: views, local types, consumers, a search plan."""

    def __init__(self, side: Diagram):
        self.d = side
        self.boxes = side.topological_boxes()
        if not self.boxes:
            raise DiagError(f"'{side.name}' has no boxes, so there is nothing to match", side.pos)
        self.views = {b: view(side, b) for b in self.boxes}
        self.inputs = list(side.inputs)
        self.outputs = list(side.outputs)
        read = {w for v in self.views.values() for w, _ in v.ins}
        for k, w in enumerate(self.outputs):
            if w in self.inputs and w not in read:
                raise DiagError(f"output {k + 1} of '{side.name}' is an input that no box reads, so a match "
                                "cannot say which wire it is; use the rule the other way", side.pos)
        self.vars = frozenset(side.generics)
        self.node = {b: side.box(b) for b in self.boxes}
        self.keys = {b: (None if self.node[b].get("var") else key(self.node[b], len(self.views[b].ins)))
                     for b in self.boxes}
        self.local = {}
        for b in self.boxes:
            if self.node[b]["box"] != "contract":
                v = self.views[b]
                self.local[b] = ([side.local_in_type(b, p) for p in range(len(v.ins))],
                                 [side.local_out_type(b, p) for p in range(len(v.outs))])
        self.produced = {w: (b, p) for b in self.boxes for p, w in enumerate(self.views[b].outs)}
        self.readers: dict[int, list[tuple[int, int]]] = defaultdict(list)
        for b in self.boxes:
            for p, (w, _) in enumerate(self.views[b].ins):
                self.readers[w].append((b, p))
        self.interior = [w for w in self.produced if w not in set(self.outputs)]
        self._plans: dict[int, list] = {}

    def plan(self, anchor: int, count) -> list[tuple[int, tuple]]:
        """An order of the boxes: the anchor, then each box next to one already placed
        (its producer first, a single candidate), a fresh anchor only between components."""
        if anchor in self._plans:
            return self._plans[anchor]
        order: list[tuple[int, tuple]] = [(anchor, ("anchor",))]
        placed = {anchor}
        while len(placed) < len(self.boxes):
            step = None
            for b, _ in order:
                v = self.views[b]
                for w, _axes in v.ins:  # the producer of something a placed box reads
                    pr = self.produced.get(w)
                    if pr is not None and pr[0] not in placed:
                        step = (pr[0], ("producer", w, pr[1]))
                        break
                if step:
                    break
            if step is None:
                for b, _ in order:  # another reader of a wire a placed box touches
                    v = self.views[b]
                    for w in [w for w, _ in v.ins] + list(v.outs):
                        for r, port in self.readers.get(w, ()):
                            if r not in placed:
                                step = (r, ("consumer", w, port))
                                break
                        if step:
                            break
                    if step:
                        break
            if step is None:  # a new component
                rest = [b for b in self.boxes if b not in placed]
                step = (min(rest, key=count), ("anchor",))
            order.append(step)
            placed.add(step[0])
        self._plans[anchor] = order
        return order


# -- matches -----------------------------------------------------------------------------
@dataclass
class Match:
    """An occurrence of a pattern in a target.

    ``boundary`` gives, for each input and output wire of the pattern, its target wire, the
    permutation of axes (pattern axis ``p`` is target axis ``perm[p]``) and the target
    wire's context axes as ``(axis, slot)``; ``slots`` are the context indices, with their
    dimensions and a name to show them by.
    """

    pattern: Diagram
    boxes: dict[int, int]                            # pattern box -> target box
    wires: dict[int, tuple[int, Perm]]               # pattern wire -> (target wire, perm)
    boundary: dict[int, tuple[int, Perm, tuple]]     # pattern in/out wire -> (wire, perm, ctx axes)
    dims: dict[str, Dim]                             # the rule's dimension variables
    idents: dict[str, int]                           # process name (or box variable) -> target box
    slots: list[tuple[str, Dim]]                     # context: (name, dimension)
    box_slots: dict[int, tuple[int, ...]]            # target box -> its slots, in its SIMD order
    where: str = ""                                  # the names of the output wires
    names: frozenset[str] = frozenset()              # names of every matched (non-input) wire
    rule: Any = None
    reverse: bool = False
    seed: tuple = ()                                 # (anchor pattern box, its target box)
    ties: tuple[frozenset, ...] = ()                 # weight sets one pattern name would merge (⇒)

    def __repr__(self) -> str:
        ctx = f" inside {', '.join(f'{n} : {d}' for n, d in self.slots)}" if self.slots else ""
        return f"<Match {self.where}{ctx}: {len(self.boxes)} boxes>"

    @property
    def targets(self) -> frozenset[int]:
        return frozenset(self.boxes.values())


@dataclass
class _State:
    boxes: dict[int, int] = field(default_factory=dict)
    used: frozenset = frozenset()
    wires: dict[int, tuple[int, Perm]] = field(default_factory=dict)
    uni: Unifier | None = None
    idents: dict[str, tuple[tuple, int]] = field(default_factory=dict)
    links: tuple = ()
    ctx: dict[int, tuple[str, ...]] = field(default_factory=dict)  # target box -> its context labels

    def extend(self, **kw) -> "_State":
        s = _State(self.boxes, self.used, self.wires, self.uni, self.idents, self.links, self.ctx)
        for k, v in kw.items():
            setattr(s, k, v)
        return s


class Matcher:
    """Backtracking search for one pattern in one indexed target: place the anchor, then each
    box along the plan; every placement is a bijection of that box's labels (the rest of the
    target box's labels become context) and a permutation for each wire it reaches first."""

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
        k = self.p.keys[pb]
        if k is not None:
            yield from (b for b in list(self.ix.by_key.get(k, ())) if self.ix.alive(b))
            return
        for kk, bs in list(self.ix.by_key.items()):
            if kk[0] in PROCESSES:
                yield from (b for b in bs if self.ix.alive(b))

    def candidates(self, how: tuple, st: _State) -> Iterator[int]:
        g = self.t.graph
        if how[0] == "anchor":
            return
        _, pw, port = how
        w = st.wires[pw][0]
        if how[0] == "producer":
            for b in g.predecessors(w):
                outs = self.ix.view(b).outs
                if port < len(outs) and outs[port] == w:
                    yield b
            return
        for _, b, k in g.out_edges(w, keys=True):
            if k == port:
                yield b

    # search -----------------------------------------------------------------------------
    def run(self, seed: tuple[int, int] | None = None) -> Iterator[Match]:
        """Every match; with ``seed = (pattern box, target box)`` only those that send one to the other."""
        first = self.anchor() if seed is None else seed[0]
        plan = self.p.plan(first, self.count)
        start = _State(uni=Unifier(self.p.vars))
        seen: set = set()
        for tb in (self.anchors(first) if seed is None else [seed[1]]):
            for st in self.box(first, tb, start):
                for done in self.grow(plan, 1, st):
                    m = self.finish(done)
                    if m is None:
                        continue
                    m.seed = (first, tb)
                    sig = (tuple(sorted(m.boxes.items())), tuple(sorted(m.wires.items())))
                    if sig not in seen:
                        seen.add(sig)
                        yield m

    def grow(self, plan, k: int, st: _State) -> Iterator[_State]:
        if k == len(plan):
            yield st
            return
        pb, how = plan[k]
        cands = self.anchors(pb) if how[0] == "anchor" else self.candidates(how, st)
        for tb in list(cands):
            if tb in st.used:
                continue
            for st2 in self.box(pb, tb, st):
                yield from self.grow(plan, k + 1, st2)

    def box(self, pb: int, tb: int, st: _State) -> Iterator[_State]:
        """Every way the pattern box ``pb`` can be the target box ``tb`` in state ``st``."""
        if tb in st.used:
            return
        p, t = self.p, self.t
        pn, tn = p.node[pb], t.box(tb)
        pv, tv = p.views[pb], self.ix.view(tb)
        if len(pv.ins) != len(tv.ins) or len(pv.outs) != len(tv.outs) or pv.scan != tv.scan:
            return
        if len(pv.summed) != len(tv.summed) or len(tv.labels) < len(pv.labels):
            return
        uni = st.uni.copy()
        idents = st.idents
        if pn.get("var"):
            if tn["box"] not in PROCESSES:
                return
            ident = identity(tn, with_generics=True)
        else:
            if pn["box"] != tn["box"]:
                return
            if pn["box"] in PROCESSES and pn["op"] != tn["op"]:
                return
            if pn["box"] == "diagram" and pn["ref"] is not tn["ref"] and \
                    definition_key(pn["ref"]) != definition_key(tn["ref"]):
                return  # one name, two definitions
            if pn["box"] == "learn" and bool(pn.get("local")) != bool(tn.get("local")):
                return  # a local learnable (fresh per instance) is not a global one of that name
            if pn["box"] == "const" and not uni.unify_value(pn.get("value"), tn.get("value")):
                return
            pg, tg = tuple(pn.get("generics", ())), tuple(tn.get("generics", ()))
            if [g for g, _ in pg] != [g for g, _ in tg] or not all(uni.unify(a, b) for (_, a), (_, b) in zip(pg, tg)):
                return
            ident = identity(tn)
        if pn["box"] in PROCESSES:
            name = pn["op"]
            have = idents.get(name)
            if have is not None and have[0] != ident:
                return
            if have is None:
                idents = {**idents, name: (ident, tb)}
        if pb in p.local:
            ins, outs = p.local[pb]
            for q, lt in enumerate(ins):
                if not uni.unify_types(lt, t.local_in_type(tb, q)):
                    return
            for q, lt in enumerate(outs):
                if not uni.unify_types(lt, t.local_out_type(tb, q)):
                    return
        pdim = dict(pv.labels + pv.summed)
        tdim = dict(tv.labels + tv.summed)
        prole = {lab: 0 for lab, _ in pv.labels} | {lab: 1 for lab, _ in pv.summed}
        trole = {lab: 0 for lab, _ in tv.labels} | {lab: 1 for lab, _ in tv.summed}
        pwt, twt = p.d.wire_type, t.wire_type

        def bind(lam: dict, used: frozenset, u: Unifier, pl: str, tl: Any):
            if pl in lam:
                return (lam, used) if lam[pl] == tl else None
            if not isinstance(tl, str) or tl in used or prole[pl] != trole.get(tl) or not u.unify(pdim[pl], tdim[tl]):
                return None
            return {**lam, pl: tl}, used | {tl}

        def perms(alpha, beta, pw, w, j, lam, used, u, acc):
            """Ways to send the pattern wire's axes j.. to distinct target axes."""
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
            for q in qs:
                if q in acc:
                    continue
                u2 = u.copy()
                if not u2.unify(pwt(pw)[j], twt(w)[q]):
                    continue
                if isinstance(a, int):
                    yield from perms(alpha, beta, pw, w, j + 1, lam, used, u2, acc + [q])
                    continue
                r = bind(lam, used, u2, a, beta[q])
                if r is not None:
                    yield from perms(alpha, beta, pw, w, j + 1, r[0], r[1], u2, acc + [q])

        def ports(k, lam, used, u, wires):
            if k == len(pv.ins):
                yield from outputs(0, lam, used, u, wires)
                return
            pw, alpha = pv.ins[k]
            w, beta = tv.ins[k]
            if pw in wires:
                w0, perm = wires[pw]
                if w0 != w:
                    return
                u2 = u.copy()
                for a, q in zip(alpha, perm):
                    if isinstance(a, int):
                        if beta[q] != a:
                            return
                        continue
                    r = bind(lam, used, u2, a, beta[q])
                    if r is None:
                        return
                    lam, used = r
                yield from ports(k + 1, lam, used, u2, wires)
                return
            for perm, lam2, used2, u2 in perms(alpha, beta, pw, w, 0, lam, used, u, []):
                yield from ports(k + 1, lam2, used2, u2, {**wires, pw: (w, perm)})

        def outputs(k, lam, used, u, wires):
            if k == len(pv.outs):
                yield lam, u, wires
                return
            pw, w = pv.outs[k], tv.outs[k]
            play, tlay = pv.layouts[k], tv.layouts[k]
            free = [e for e in play if isinstance(e, str) and e not in lam]
            yield from assign(free, 0, k, pw, w, play, tlay, lam, used, u, wires)

        def assign(free, j, k, pw, w, play, tlay, lam, used, u, wires):
            if j < len(free):  # a label no input reads (a broadcast): any unused label of its dimension
                for tl in tlay:
                    u2 = u.copy()
                    r = bind(lam, used, u2, free[j], tl)
                    if r is not None:
                        yield from assign(free, j + 1, k, pw, w, play, tlay, r[0], r[1], u2, wires)
                return
            perm = []
            for e in play:
                want = lam[e] if isinstance(e, str) else e
                if want not in tlay:
                    return
                perm.append(tlay.index(want))
            perm = tuple(perm)
            if pw in wires:
                if wires[pw] != (w, perm):
                    return
            else:
                if not u.copy().unify_types(pwt(pw), tuple(twt(w)[q] for q in perm)):
                    return
                wires = {**wires, pw: (w, perm)}
            yield from outputs(k + 1, lam, used, u, wires)

        for lam, u, wires in ports(0, {}, frozenset(), uni, st.wires):
            if len(lam) != len(pdim):
                continue
            if pv.scan and lam[pv.labels[-1][0]] != tv.labels[-1][0]:
                continue
            image = set(lam.values())
            ctx = tuple(lab for lab, _ in tv.labels if lab not in image)
            links = list(st.links)
            ok = True
            for k, (pw, _alpha) in enumerate(pv.ins):
                w, beta = tv.ins[k]
                perm = wires[pw][1]
                for q, b in enumerate(beta):
                    if q in perm:
                        continue
                    if not (isinstance(b, str) and b in ctx):
                        ok = False
                        break
                    links.append((("w", w, q), ("b", tb, b)))
                if not ok:
                    break
            if not ok:
                continue
            for k, w in enumerate(tv.outs):
                for q, e in enumerate(tv.layouts[k]):
                    if isinstance(e, str) and e in ctx:
                        links.append((("w", w, q), ("b", tb, e)))
            yield st.extend(boxes={**st.boxes, pb: tb}, used=st.used | {tb}, wires=wires, uni=u, idents=idents,
                            links=tuple(links), ctx={**st.ctx, tb: ctx})

    # the conditions on a whole match ------------------------------------------------
    def finish(self, st: _State) -> Match | None:
        p, t, g = self.p, self.t, self.t.graph
        uni = st.uni.copy()
        if not uni.settle():
            return None
        matched = st.used
        for x in p.inputs:
            if x in st.wires:
                pr = t.producer(st.wires[x][0])
                if pr is not None and pr in matched:
                    return None  # an input fed by the match itself: a cycle after rewriting
        outs = set(t.outputs)
        for y in p.interior:  # gluing: interior wires are read only inside the match
            w = st.wires[y][0]
            if w in outs or g.out_degree(w) != len(p.readers.get(y, ())):
                return None
        # context slots: union-find over the links
        parent: dict = {}

        def find(x):
            root = x
            while parent.get(root, root) != root:
                root = parent[root]
            while parent.get(x, x) != root:
                parent[x], x = root, parent[x]
            return root

        for a, b in st.links:
            ra, rb = find(a), find(b)
            if ra != rb:
                parent[ra] = rb
        order: dict = {}
        for pb in p.boxes:
            tb = st.boxes[pb]
            roots = [find(("b", tb, lab)) for lab in st.ctx[tb]]
            if len(set(roots)) != len(roots):
                return None  # one box would iterate one context index twice
            for r in roots:
                order.setdefault(r, len(order))
        slot_of = {r: k for k, r in enumerate(order)}
        slots: list[tuple[str, Dim]] = [("", Dim.const(0))] * len(order)
        box_slots = {}
        for tb, labs in st.ctx.items():
            dims = dict(self.ix.view(tb).labels)
            shown = t.box(tb).get("display", {})
            ks = []
            for lab in labs:
                k = slot_of[find(("b", tb, lab))]
                if not slots[k][0]:  # a contraction's local axis is shown by its dimension
                    slots[k] = (shown.get(lab) or (lab if not lab.startswith(LOCAL) else
                                                   (dims[lab].name or "c")), dims[lab])
                ks.append(k)
            box_slots[tb] = tuple(ks)
        if not self.convex(matched, [st.wires[y][0] for y in p.outputs if y in st.wires]):
            return None
        boundary = {}
        for x in list(p.inputs) + list(p.outputs):
            if x not in st.wires or x in boundary:
                continue
            w, perm = st.wires[x]
            ctx = tuple((q, slot_of[find(("w", w, q))]) for q in range(len(t.wire_type(w)))
                        if q not in perm and find(("w", w, q)) in slot_of)
            if len(ctx) + len(perm) != len(t.wire_type(w)):
                return None  # pragma: no cover - every context axis is read by a matched box
            boundary[x] = (w, perm, ctx)
        names = []
        for y in p.outputs:
            if y in st.wires:
                names.append(self.wire_name(st.wires[y][0]))
        every = frozenset(self.wire_name(st.wires[y][0]) for y in p.produced)
        return Match(p.d, dict(st.boxes), dict(st.wires), boundary, dict(uni.sub),
                     {n: tb for n, (_, tb) in st.idents.items()}, slots, box_slots,
                     ", ".join(dict.fromkeys(names)), every, ties=self.ties(st))

    def ties(self, st: _State) -> tuple[frozenset, ...]:
        """Weight sets that one name of the pattern binds together: the pattern says one
        function where the target has several sets of weights. Rewriting there ties them,
        an expressivity reduction (⇒), never an equation."""
        sets: dict[Any, set] = {}
        for pb, tb in st.boxes.items():
            node = self.p.node[pb]
            if node["box"] in PROCESSES:
                key = weight_key(self.t.box(tb))
                if key is not None:  # one set of the pattern (or one box variable): one set here
                    sets.setdefault(weight_key(node) or node["op"], set()).add(key)
        return tuple(frozenset(s) for s in sets.values() if len(s) > 1)

    def recheck(self, m: Match) -> bool:
        """Does a match found earlier still hold after other rewrites of the target? Its boxes
        must be alive and wired as they were; gluing and convexity are checked again."""
        t, g = self.t, self.t.graph
        for pb, tb in m.boxes.items():
            if not self.ix.alive(tb):
                return False
            self.ix.forget(tb)
            pv, tv = self.p.views[pb], self.ix.view(tb)
            if tuple(w for w, _ in tv.ins) != tuple(m.wires[w][0] for w, _ in pv.ins) or \
                    tv.outs != tuple(m.wires[w][0] for w in pv.outs):
                return False
        matched = m.targets
        outs = set(t.outputs)
        for y in self.p.interior:
            w = m.wires[y][0]
            if w in outs or g.out_degree(w) != len(self.p.readers.get(y, ())):
                return False
        for x in self.p.inputs:
            if x in m.wires:
                pr = t.producer(m.wires[x][0])
                if pr is not None and pr in matched:
                    return False
        return self.convex(matched, [m.wires[y][0] for y in self.p.outputs if y in m.wires])

    def wire_name(self, w: int) -> str:
        return wire_name(self.t, w)

    def convex(self, matched: frozenset, out_wires: list[int]) -> bool:
        """No path from an output of the match through outside boxes back into it."""
        g, level = self.t.graph, self.ix.level
        top = max(level[b] for b in matched)
        stack = [c for w in out_wires for c in g.successors(w) if c not in matched]
        seen = set()
        while stack:
            b = stack.pop()
            if b in seen or level[b] >= top:
                continue
            seen.add(b)
            for w in g.successors(b):
                for c in g.successors(w):
                    if c in matched:
                        return False
                    stack.append(c)
        return True


# -- the public interface -------------------------------------------------------------------
def _pattern_of(rule, reverse: bool) -> tuple[Diagram, Any]:
    if isinstance(rule, Diagram):
        return rule, None
    return rule.sides(reverse)[0], rule


def find_matches(target: Diagram, rule, reverse: bool = False, index: Index | None = None,
                 limit: int | None = None, ties: bool = False) -> list[Match]:
    """Every occurrence of the rule's left side (right side with ``reverse``) in ``target``.

    ``rule`` is a :class:`~stringdiag.rewrite.rule.Rule` or a bare pattern diagram. Matches
    that would tie weight sets (:attr:`Match.ties`) are reductions, found only with ``ties``.
    """
    with gc_paused():
        return list(iter_matches(target, rule, reverse, index, limit, ties=ties))


def pattern(rule, reverse: bool = False) -> Pattern:
    """The prepared pattern of a rule side (kept on the rule, so prepared once)."""
    side, r = _pattern_of(rule, reverse)
    if r is None:
        return Pattern(side)
    cache = r.__dict__.setdefault("_patterns", {})
    if reverse not in cache:
        cache[reverse] = Pattern(side)
    return cache[reverse]


def iter_matches(target: Diagram, rule, reverse: bool = False, index: Index | None = None,
                 limit: int | None = None, seed: tuple[int, int] | None = None,
                 ties: bool = False) -> Iterator[Match]:
    """Like :func:`find_matches`, lazily; ``seed`` fixes one (pattern box, target box) pair."""
    _, r = _pattern_of(rule, reverse)
    pat = pattern(rule, reverse)
    ix = index if index is not None else Index(target)
    n = 0
    for m in Matcher(pat, ix).run(seed):
        if m.ties and not ties:
            continue
        m.rule, m.reverse = r, reverse
        yield m
        n += 1
        if limit is not None and n >= limit:
            return


def select(matches: list[Match], where: str) -> Match:
    """The match whose wires include every name in ``where`` (comma-separated names, as
    :attr:`Match.where` and :attr:`Match.names` spell them).

    Matches of the same boxes that differ only in which indices are the rule's and which
    are context are one place in the diagram: the first is taken. Otherwise an ambiguous
    or empty selection is an error that lists the candidates.
    """
    want = {w.strip() for w in where.split(",") if w.strip()}
    hits = [m for m in matches if want <= m.names]
    exact = [m for m in hits if m.where == ", ".join(w.strip() for w in where.split(","))]
    pick = exact or hits
    if pick and len({m.targets for m in pick}) == 1:
        return pick[0]
    shown = "; ".join(dict.fromkeys(m.where for m in (pick or matches))) or "none"
    if not pick:
        raise DiagError(f"no match at '{where}' (the matches are at: {shown})")
    raise DiagError(f"'{where}' names {len({m.targets for m in pick})} different matches ({shown}); "
                    "name more of their wires")


__all__ = ["Match", "Index", "find_matches", "iter_matches", "select", "view", "View"]
