"""Double-pushout replacement: delete a match's interior, glue in the other side.

The matched boxes and the wires only they read are deleted; the boundary wires stay (the
context keeps reading the same output wires, so names and everything outside are
untouched); a copy of the replacement's boxes is inserted, reading the match's input wires
and writing its output wires. Inserted boxes get the match's context slots prepended to
their SIMD labels — only the slots their inputs depend on, as the elaborator tightens —
and a replacement output is laid out exactly as the wire it replaces (a ``reindex`` box
bridges the rare case where a box's local axes cannot be put in that order).

Processes named on both sides keep the target's identity (the same weights); a box
variable becomes the process it matched. A process the rule names once but that matched
several weight sets ties them first (``Match.ties``: a reduction). A definition the other
side brings in new gets an instance of its own (its own weights, ``weights.py``). Dimension variables take the values the match
gave them. Contractions are inserted with every free axis iterated (``y[i, c] = sum_j ...``),
the form matching reads them in.
"""
from __future__ import annotations

import weakref
from typing import Any

from ..errors import DiagError
from ..graph.diagram import Diagram
from ..graph.constants import show as show_const, substitute as substitute_const
from ..graph.gcpause import gc_paused
from ..graph.types import Dim, show_type
from ..graph.weights import fresh_instance, instances, tie
from .match import PROCESSES, Index, Match, Matcher, iter_matches, pattern, view

_IDENT_ATTRS = ("box", "op", "ref", "param", "local", "instance")
_counter = [0]


def _unique(label: str, taken: set[str]) -> str:
    while label in taken:
        label += "'"
    taken.add(label)
    return label


def rewrite(target: Diagram, match: Match, replacement: Diagram | None = None, *, index: Index | None = None,
            in_place: bool = False) -> Diagram:
    """The target with the match replaced by the other side of its rule (or ``replacement``).

    Returns a new diagram unless ``in_place`` (then ``index``, if given, is kept current).
    Rewrite in place only a diagram that nothing has expanded yet: ``expand`` caches its
    plan of a graph by the graph's size, which a rewrite may leave unchanged.
    """
    if replacement is None:
        if match.rule is None:
            raise DiagError("this match has no rule; pass the replacement diagram")
        replacement = match.rule.sides(match.reverse)[1]
    d = target if in_place else target.copy()
    ix = index if (in_place and index is not None) else None
    tie(d, match.ties)  # one name of the rule over several weight sets: they become one (⇒)
    _Splice(d, match, replacement, ix).run()
    return d


class _Plan:
    """A replacement side read once: its boxes in order, their views and local types."""

    def __init__(self, rep: Diagram):
        self.size = (rep.graph.number_of_nodes(), rep.graph.number_of_edges())
        self.boxes = rep.topological_boxes()
        self.views = {b: view(rep, b) for b in self.boxes}
        self.locals = {b: [rep.local_out_type(b, k) for k in range(len(self.views[b].outs))] for b in self.boxes}


_plans: "weakref.WeakKeyDictionary[object, _Plan]" = weakref.WeakKeyDictionary()


def _plan(rep: Diagram) -> _Plan:
    plan = _plans.get(rep.graph)
    if plan is None or plan.size != (rep.graph.number_of_nodes(), rep.graph.number_of_edges()):
        plan = _plans[rep.graph] = _Plan(rep)
    return plan


class _Splice:
    def __init__(self, d: Diagram, m: Match, rep: Diagram, ix: Index | None):
        self.d, self.m, self.rep, self.ix = d, m, rep, ix
        self.plan = _plan(rep)
        self.g = d.graph
        pat = m.pattern
        if len(rep.inputs) != len(pat.inputs) or len(rep.outputs) != len(pat.outputs):
            raise DiagError(f"'{rep.name}' and '{pat.name}' do not have one boundary")
        self.sub: dict[str, Dim] = dict(m.dims)
        _counter[0] += 1
        self.tag = _counter[0]
        self.taken: set | None = None  # instances in the target, read when a new one is needed

    def fail(self, msg: str) -> DiagError:
        name = f"rule '{self.m.rule.name}'" if self.m.rule is not None else f"'{self.rep.name}'"
        return DiagError(f"{name} cannot be applied at {self.m.where}: {msg}", self.rep.pos)

    def dim(self, x: Dim) -> Dim:
        missing = (x.names() & set(self.rep.generics)) - self.sub.keys()
        if missing:
            raise self.fail(f"dimension variable '{sorted(missing)[0]}' is not determined by the match")
        return x.substitute(self.sub)

    # -- the whole splice -------------------------------------------------------------
    def run(self) -> None:
        g, m, rep, pat = self.g, self.m, self.rep, self.m.pattern
        # where the replacement's boundary goes: (target wire, layout), a layout entry per
        # target axis: ("p", axis of the rule's wire) or ("s", context slot)
        env: dict[int, tuple[int, tuple]] = {}
        for xr, xp in zip(rep.inputs, pat.inputs):
            if xp in m.boundary:
                env[xr] = self.layout(m.boundary[xp])
            elif g_uses(rep, xr):
                raise self.fail(f"input {pat.inputs.index(xp) + 1} is not used by the matched side, "
                                "so the match does not say what the other side reads there")
        goals = [self.layout(m.boundary[yp]) for yp in pat.outputs]
        for k, (yr, goal) in enumerate(zip(rep.outputs, goals)):
            for j in range(k):
                if goal[0] == goals[j][0] and rep.outputs[j] != yr:
                    raise self.fail("it would split a copied wire in two (the matched side returns one wire "
                                    "twice); copy the box that makes it first")
        matched = list(m.boxes.values())
        if any(tb not in g or g.nodes[tb]["kind"] != "box" for tb in matched):
            raise DiagError("this match is not one of this diagram's (was it rewritten already?)")
        idents = {n: dict(g.nodes[tb]) for n, tb in m.idents.items()}
        prefix = _common_prefix([tuple(g.nodes[tb].get("clusters", ())) for tb in matched])
        # delete the interior: the matched boxes and the wires only they read
        interior = {m.wires[y][0] for y in m.wires if y not in set(pat.inputs) | set(pat.outputs)}
        for tb in matched:
            if self.ix is not None:
                self.ix.forget(tb)
            g.remove_node(tb)
        for w in interior:
            g.remove_node(w)
        # insert the other side's boxes; a replaced wire that still has a writer (an input of
        # the match passed straight through) is not theirs to write
        claimed: set[int] = {w for w, _ in goals if g.in_degree(w) or w in self.d.inputs}
        wants = {}
        for k, yr in enumerate(rep.outputs):
            wants.setdefault(yr, []).append(goals[k])
        new_boxes = []
        for rb in self.plan.boxes:
            new_boxes += self.insert(rb, env, wants, claimed, idents, prefix)
        # glue outputs not written directly: identities, merged copies, reordered axes
        for k, yr in enumerate(rep.outputs):
            tw, lay = env[yr]
            if tw != goals[k][0]:
                new_boxes += self.attach(tw, lay, goals[k])
        if self.ix is not None:
            self.ix.raise_levels(new_boxes)

    def layout(self, b: tuple[int, tuple, tuple]) -> tuple[int, tuple]:
        w, perm, ctx = b
        lay: list[Any] = [None] * len(self.d.wire_type(w))
        for p, q in enumerate(perm):
            lay[q] = ("p", p)
        for q, s in ctx:
            lay[q] = ("s", s)
        return w, tuple(lay)

    # -- one box of the replacement ---------------------------------------------------------
    def insert(self, rb: int, env: dict, wants: dict, claimed: set, idents: dict, prefix: tuple) -> list[int]:
        d, rep, m = self.d, self.rep, self.m
        rn = rep.box(rb)
        rv = self.plan.views[rb]
        need: set[int] = set()
        for w, _ in rv.ins:
            need |= {e[1] for e in env[w][1] if e[0] == "s"}
        goals = [wants.get(w, [None])[0] for w in rv.outs]
        for k, goal in enumerate(goals):
            if goal is None:
                continue
            have = {e[1] for e in goal[1] if e[0] == "s"}
            if not need <= have:
                extra = ", ".join(m.slots[s][0] for s in sorted(need - have))
                raise self.fail(f"output {rep.outputs.index(rv.outs[k]) + 1} would depend on index {extra}, "
                                "which the wire it replaces does not")
            need |= have
        slots = sorted(need)
        taken: set[str] = set()
        ctx_label = {s: _unique(m.slots[s][0] or "c", taken) for s in slots}
        rename = {lab: _unique(_clean(lab, rn), taken) for lab, _ in rv.labels + rv.summed}
        rdim = dict(rv.labels + rv.summed)
        order = [("s", s) for s in slots] + [("l", lab) for lab, _ in rv.labels]
        scan = bool(rn.get("scan"))
        direct: dict[int, tuple] = {}
        for k, goal in enumerate(goals):  # lay the iterated labels out as the replaced wire is
            if goal is None or goal[0] in claimed or scan:
                continue
            want = []
            for e in goal[1]:
                if e[0] == "s":
                    want.append(("s", e[1]))
                else:
                    a = rv.layouts[k][e[1]]
                    want.append(("l", a) if isinstance(a, str) else ("i", a))
            locs = [e for e in want if e[0] == "i"]
            n_lab = len(want) - len(locs)
            if want[n_lab:] != locs or [e[1] for e in locs] != list(range(len(locs))):
                continue  # local axes not last: a reindex box will reorder them
            if set(want[:n_lab]) != set(order) or (direct and want[:n_lab] != order):
                continue  # another output already fixed the order, or an index is missing
            order = want[:n_lab]
            direct[k] = goal
        simd = []
        for e in order:
            if e[0] == "s":
                simd.append((ctx_label[e[1]], m.slots[e[1]][1]))
            else:
                simd.append((rename[e[1]], self.dim(rdim[e[1]])))
        inputs = []
        for w, alpha in rv.ins:
            tw, lay = env[w]
            axes = []
            for e in lay:
                if e[0] == "s":
                    axes.append(ctx_label[e[1]])
                else:
                    a = alpha[e[1]]
                    axes.append(rename[a] if isinstance(a, str) else a)
            inputs.append((tw, tuple(axes)))
        attrs = self.attrs(rn, rename, idents)
        # frames for the picture: those around every matched box, then the context indices
        # (unless those frames already draw them), then the rule's own
        if sum(1 for c in prefix if c and c[0] == "simd") < len(slots):
            prefix = prefix + tuple(("simd", ("rewrite", self.tag, "slot", s), m.slots[s][0], m.slots[s][1], False)
                                    for s in slots)
        attrs["clusters"] = prefix + tuple(
            ("simd", ("rewrite", self.tag, c[1]), c[2], self.dim(c[3]), c[4]) if c and c[0] == "simd" else c
            for c in rn.get("clusters", ()))
        display = {ctx_label[s]: m.slots[s][0] for s in slots}
        shown = rn.get("display", {})
        display.update({rename[lab]: shown.get(lab, _clean(lab, rn)) for lab in rename})
        attrs["display"] = display
        if rn["box"] == "contract":
            attrs["summed"] = tuple((rename[lab], self.dim(dim)) for lab, dim in rv.summed)
            out_locals = [()]
        else:
            out_locals = [tuple(self.dim(x) for x in t) for t in self.plan.locals[rb]]
        names = [rep.graph.nodes[w].get("name") for w in rv.outs]
        b = self.add_box(rn, attrs, inputs, simd, out_locals, direct, claimed, scan, names)
        # record where each output went, as a layout over the rule wire's axes
        outs = d.box_outputs(b)
        for k, (w_r, tw) in enumerate(zip(rv.outs, outs)):
            lay = []
            labs = list(order)
            if scan and k == 0:
                labs = labs[:-1]
            for e in labs:
                if e[0] == "s":
                    lay.append(("s", e[1]))
                else:
                    lay.append(("p", rv.layouts[k].index(e[1])))
            n_loc = len(out_locals[k])
            lay += [("p", rv.layouts[k].index(j)) for j in range(n_loc)]
            env[w_r] = (tw, tuple(lay))
        return [b]

    def attrs(self, rn: dict, rename: dict, idents: dict) -> dict:
        skip = ("kind", "simd", "pos", "display", "clusters", "summed", "var")
        attrs = {k: v for k, v in rn.items() if k not in skip}
        name = rn["op"]
        if rn["box"] in PROCESSES and name in idents:
            src = idents[name]
            for k in _IDENT_ATTRS:
                if k in src:
                    attrs[k] = src[k]
                else:
                    attrs.pop(k, None)
            if rn.get("var"):
                if "generics" in src:
                    attrs["generics"] = src["generics"]
                return attrs
        elif rn.get("var"):
            raise self.fail(f"box variable '{name}' is not bound by the matched side")
        elif rn["box"] == "diagram":
            if self.taken is None:
                self.taken = instances(self.d)
            attrs["instance"] = fresh_instance(name, self.taken)
        if "generics" in attrs:
            attrs["generics"] = tuple((gname, self.dim(x)) for gname, x in attrs["generics"])
        if "value" in attrs:
            attrs["value"] = substitute_const(attrs["value"], self.sub)
            attrs["op"] = show_const(attrs["value"])
        return attrs

    def add_box(self, rn: dict, attrs: dict, inputs: list, simd: list, out_locals: list, direct: dict,
                claimed: set, scan: bool, names: list) -> int:
        """Add the box; outputs laid out as a replaced wire is go straight into that wire."""
        d, g = self.d, self.g
        box, op = attrs.pop("box"), attrs.pop("op")
        b = d.new_id()
        g.add_node(b, kind="box", box=box, op=op, simd=tuple(simd), pos=rn.get("pos"), **attrs)
        for port, (w, axes) in enumerate(inputs):
            g.add_edge(w, b, key=port, axes=tuple(axes))
        dims = tuple(x for _, x in simd)
        for port, loc in enumerate(out_locals):
            t = (dims[:-1] if scan and port == 0 else dims) + tuple(loc)
            goal = direct.get(port)
            if goal is not None and goal[0] not in claimed:
                w = goal[0]
                if tuple(d.wire_type(w)) != t:
                    raise self.fail(f"the replacement makes a wire of type {show_type(t)} where the target "
                                    f"has {show_type(d.wire_type(w))}")
                claimed.add(w)
            else:
                w = d.add_wire(t, name=self.fresh_name(names[port]), pos=rn.get("pos"))
            g.add_edge(b, w, key=port)
        if self.ix is not None:
            self.ix.add(b)
        return b

    def fresh_name(self, name: str | None) -> str | None:
        """The rule's name for a new wire, made unique in the target (``bc``, ``bc'``)."""
        if name is None:
            return None
        if self.ix is None:
            self.ix = _Names(self.d)
        return self.ix.fresh_name(name)

    # -- outputs that need gluing -------------------------------------------------------------
    def attach(self, tw: int, lay: tuple, goal: tuple) -> list[int]:
        """Make the replaced wire ``goal`` carry ``tw``: redirect its readers when the axes
        agree, else put a reindex box between."""
        d, g = self.d, self.g
        w, glay = goal
        if g.in_degree(w) or w in d.inputs:
            raise self.fail("an output of the matched side is one of its inputs, which the other side "
                            "would overwrite")
        if lay == glay and tuple(d.wire_type(tw)) == tuple(d.wire_type(w)):
            for _, c, k, a in list(g.out_edges(w, keys=True, data=True)):
                g.remove_edge(w, c, key=k)
                g.add_edge(tw, c, key=k, **a)
                if self.ix is not None:
                    self.ix.forget(c)
            d.outputs = [tw if o == w else o for o in d.outputs]
            if not g.nodes[tw].get("name"):
                g.nodes[tw]["name"] = g.nodes[w].get("name")
            g.remove_node(w)
            return []
        have = {e for e in lay}
        for e in have:
            if e not in set(glay):
                raise self.fail("an output would depend on an index the wire it replaces does not have")
        taken: set[str] = set()
        labels = [_unique(self.m.slots[e[1]][0] if e[0] == "s" else f"a{e[1]}", taken) for e in glay]
        simd = tuple((lab, x) for lab, x in zip(labels, d.wire_type(w)))
        axes = tuple(labels[glay.index(e)] for e in lay)
        b = d.new_id()
        g.add_node(b, kind="box", box="reindex", op="reindex", simd=simd, pos=self.rep.pos,
                   display={lab: lab for lab in labels}, clusters=())
        g.add_edge(tw, b, key=0, axes=axes)
        g.add_edge(b, w, key=0)
        if self.ix is not None:
            self.ix.add(b)
        return [b]


def g_uses(d: Diagram, w: int) -> bool:
    return bool(d.graph.out_degree(w)) or w in d.outputs


def _clean(label: str, node: dict) -> str:
    """A readable name for a rule's label (a contraction's local axis ``·0`` shows as ``c0``)."""
    shown = node.get("display", {}).get(label)
    if shown:
        return shown
    return "c" + label[1:] if label.startswith("\u00b7") else label


def _common_prefix(paths: list[tuple]) -> tuple:
    if not paths:
        return ()
    first = paths[0]
    n = min(len(p) for p in paths)
    k = 0
    while k < n and all(p[k] == first[k] for p in paths):
        k += 1
    return first[:k]


def copy_box(d: Diagram, box: int, readers: list[tuple[int, int]]) -> Diagram:
    """Naturality of copy (seed 003, Sec. 2): a box whose output is copied equals one copy of
    the box per reader. Returns a new diagram where ``readers`` ((box, port) pairs of one
    output) read a fresh copy of ``box``; everything else still reads the original."""
    out = d.copy()
    g = out.graph
    node = dict(g.nodes[box])
    ins = out.box_inputs(box)
    outs = out.box_outputs(box)
    if not readers:
        raise DiagError("name the readers that get the copy")
    wanted = {}
    for r, port in readers:
        hits = [k for k, w in enumerate(outs) if g.has_edge(w, r, key=port)]
        if not hits:
            raise DiagError(f"box {r} does not read box {box} at port {port}")
        wanted[(r, port)] = hits[0]
    b = out.new_id()
    attrs = {k: v for k, v in node.items() if k != "kind"}
    g.add_node(b, kind="box", **attrs)
    for port, (w, axes) in enumerate(ins):
        g.add_edge(w, b, key=port, axes=axes)
    fresh = []
    names = _Names(out)
    for port, w in enumerate(outs):
        name = g.nodes[w].get("name")  # the copy's wire is a' beside a, so that steps can name either
        nw = out.add_wire(out.wire_type(w), name=name and names.fresh_name(name), pos=g.nodes[w].get("pos"))
        g.add_edge(b, nw, key=port)
        fresh.append(nw)
    for (r, port), k in wanted.items():
        a = g.edges[outs[k], r, port]
        g.remove_edge(outs[k], r, key=port)
        g.add_edge(fresh[k], r, key=port, **a)
    return out


def rewrite_all(target: Diagram, rule, reverse: bool = False, limit: int | None = None) -> tuple[Diagram, int]:
    """Apply the rule at every match found in ``target`` (matches that overlap one already
    rewritten, or that it invalidated, are skipped; new boxes are not searched again).

    Returns the new diagram and the number of rewrites. One copy of the target, one index,
    and a local re-check of each match before it is applied: linear in the target.
    """
    with gc_paused():
        out = target.copy()
        ix = Index(out)
        matches = list(iter_matches(out, rule, reverse, index=ix, limit=limit))
        done = 0
        checker = Matcher(pattern(rule, reverse), ix)
        for m in matches:
            if checker.recheck(m):
                rewrite(out, m, index=ix, in_place=True)
                done += 1
    return out, done


class _Names:
    """Wire names of a diagram being rewritten once (an :class:`Index` does this in bulk)."""

    def __init__(self, d: Diagram):
        self._names = {a.get("name") for _, a in d.graph.nodes(data=True) if a["kind"] == "wire"}

    def fresh_name(self, name: str) -> str:
        while name in self._names:
            name += "'"
        self._names.add(name)
        return name

    def forget(self, b: int) -> None:
        pass

    def add(self, b: int) -> None:
        pass

    def raise_levels(self, boxes) -> None:
        pass


__all__ = ["rewrite", "rewrite_all", "copy_box"]
