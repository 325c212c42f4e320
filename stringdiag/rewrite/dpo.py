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
several weight sets ties them (``Match.ties``: a reduction): the inserted boxes take the
tied identities, then the boxes the splice left take them too. A definition the other
side brings in new gets an instance of its own (its own weights, ``weights.py``). Dimension
variables take the values the match gave them. Contractions are inserted with every free
axis iterated (``y[i, c] = sum_j ...``), the form matching reads them in.
"""
from __future__ import annotations

from typing import Any

from ..errors import DiagError
from ..graph.box import Box, Instance, Kind, Repeat
from ..graph.clusters import SimdFrame
from ..graph.diagram import Diagram
from ..graph.hypergraph import per_graph_cache
from ..graph.constants import dims_in, show as show_const, substitute as substitute_const
from ..graph.types import Dim, show_type
from ..graph.weights import fresh_instance, instances, renamed, renaming, tie
from .cell import build_cell
from .index import Index
from .layouts import BOX_LABEL, CONTEXT_SLOT, OWN_AXIS, RULE_AXIS, BoxLabel, ContextSlot, Layout, OwnAxis, Placed
from .names import WireNames
from .occurrence import Match
from .view import View, view

_counter = [0]


def _unique(label: str, taken: set[str]) -> str:
    while label in taken:
        label += "'"
    taken.add(label)
    return label


def rewrite(target: Diagram, match: Match, replacement: Diagram | None = None, *, index: Index | None = None,
            in_place: bool = False) -> Diagram:
    """The target with the match replaced by the other side of its rule (or ``replacement``).

    Returns a new diagram unless ``in_place`` (then ``index``, if given, is kept current;
    every edit goes through the graph's editing methods, so what is cached about it goes stale).
    """
    if replacement is None:
        if match.rule is None:
            raise DiagError("this match has no rule; pass the replacement diagram")
        replacement = match.rule.sides(match.reverse)[1]
    d = target if in_place else target.copy()
    ix = index if (in_place and index is not None) else None
    # one name of the rule over several weight sets: they become one (⇒); the splice reads the
    # matched identities as tied, then the boxes it left are tied (it made the others so)
    rename = renaming(match.ties) if match.ties else {}
    made = _Splice(d, match, replacement, ix, rename).run()
    if rename:
        tie(d, match.ties, skip=frozenset(made))
    return d


class _Plan:
    """A replacement side read once: its boxes in order, their views and local types."""

    def __init__(self, rep: Diagram):
        self.boxes = rep.topological_boxes()
        self.views = {b: view(rep, b) for b in self.boxes}
        self.locals = {b: [rep.local_out_type(b, k) for k in range(len(self.views[b].outs))] for b in self.boxes}


_plan = per_graph_cache(_Plan)


class _Labels:
    """The labels of a box the splice inserts: its context slots named, and the rule's own
    labels renamed apart from them (a rule's ``i`` may meet a context index ``i``)."""

    def __init__(self, m: Match, rn: Box, rv: View, slots: list[int]):
        taken: set[str] = set()
        self.ctx = {s: _unique(m.slots[s][0] or "c", taken) for s in slots}
        self.rename = {lab: _unique(_clean(lab, rn), taken) for lab, _ in rv.labels + rv.summed}
        self.dims = dict(rv.labels + rv.summed)

    def axes(self, lay: Layout, alpha: tuple) -> tuple:
        """An input's axes in the target: a slot's label, a rule label renamed, or a local axis."""
        out = []
        for e in lay:
            if e.is_slot:
                out.append(self.ctx[e.slot])
            else:
                a = alpha[e.pos]
                out.append(self.rename[a] if isinstance(a, str) else a)
        return tuple(out)


class _Splice:
    """One double pushout: delete the match's interior, insert the replacement's boxes box
    by box, glue its outputs to the wires the match's outputs were."""

    def __init__(self, d: Diagram, m: Match, rep: Diagram, ix: Index | None, rename: dict):
        self.d, self.m, self.rep, self.ix, self.rename = d, m, rep, ix, rename
        self.plan = _plan(rep)
        self.g = d.graph
        pat = m.pattern
        if len(rep.inputs) != len(pat.inputs) or len(rep.outputs) != len(pat.outputs):
            raise DiagError(f"'{rep.name}' and '{pat.name}' do not have one boundary")
        self.sub: dict[str, Dim] = dict(m.dims)
        _counter[0] += 1
        self.tag = _counter[0]
        self.taken: set | None = None  # instances in the target, read when a new one is needed
        self.names: Index | WireNames | None = ix  # wire names in the target, read when a new one is needed

    def fail(self, msg: str) -> DiagError:
        name = f"rule '{self.m.rule.name}'" if self.m.rule is not None else f"'{self.rep.name}'"
        return DiagError(f"{name} cannot be applied at {self.m.where}: {msg}", self.rep.pos)

    def dim(self, x: Dim) -> Dim:
        missing = (x.names() & set(self.rep.generics)) - self.sub.keys()
        if missing:
            raise self.fail(f"dimension variable '{sorted(missing)[0]}' is not determined by the match")
        return x.substitute(self.sub)

    # -- the whole splice -------------------------------------------------------------
    def run(self) -> list[int]:
        """Splice; returns the boxes inserted."""
        g, m, rep = self.g, self.m, self.rep
        env, goals = self.boundary()
        matched = list(m.boxes.values())
        if any(not self.d.is_box(tb) for tb in matched):
            raise DiagError("this match is not one of this diagram's (was it rewritten already?)")
        idents = {n: self.d.record(tb) for n, tb in m.idents.items()}
        if self.rename:  # the matched identities as the match's tie leaves them
            idents = {n: renamed(box, self.rename) for n, box in idents.items()}
        idents = {**m.inner, **idents}
        prefix = _common_prefix([tuple(self.d.record(tb).clusters) for tb in matched])
        self.delete(matched)
        # a replaced wire that still has a writer (an input of the match passed straight
        # through) is not the inserted boxes' to write
        claimed: set[int] = {w for w, _ in goals if g.in_degree(w) or w in self.d.inputs}
        wants: dict[int, list] = {}
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
        return new_boxes

    def boundary(self) -> tuple[dict, list]:
        """Where the replacement's inputs are read from and its outputs go: (target wire,
        layout), a layout entry per target axis: an axis of the rule's wire or a context slot."""
        m, rep, pat = self.m, self.rep, self.m.pattern
        env: dict[int, tuple[int, tuple]] = {}
        for xr, xp in zip(rep.inputs, pat.inputs):
            if xp in m.boundary:
                env[xr] = self.layout(m.boundary[xp])
            elif g_uses(rep, xr):
                raise self.fail(f"input {pat.inputs.index(xp) + 1} is not used by the matched side, "
                                "so the match does not say what the other side reads there")
        goals = [self.layout(m.boundary[yp]) for yp in pat.outputs]
        for k, (yr, goal) in enumerate(zip(rep.outputs, goals)):
            if any(goal[0] == goals[j][0] and rep.outputs[j] != yr for j in range(k)):
                raise self.fail("it would split a copied wire in two (the matched side returns one wire "
                                "twice); copy the box that makes it first")
        return env, goals

    def delete(self, matched: list[int]) -> None:
        """The pushout complement: the matched boxes and the wires only they read go."""
        m, pat = self.m, self.m.pattern
        interior = {m.wires[y][0] for y in m.wires if y not in set(pat.inputs) | set(pat.outputs)}
        for tb in matched:
            if self.ix is not None:
                self.ix.forget(tb)
            self.d.remove_box(tb, outputs=False)
        for w in interior:
            self.d.remove_wire(w)

    def layout(self, b: tuple[int, tuple, tuple]) -> tuple[int, Layout]:
        w, perm, ctx = b
        lay: list[Any] = [None] * len(self.d.wire_type(w))
        for p, q in enumerate(perm):
            lay[q] = RULE_AXIS[p]
        for q, s in ctx:
            lay[q] = CONTEXT_SLOT[s]
        return w, tuple(lay)

    # -- one box of the replacement ---------------------------------------------------------
    def insert(self, rb: int, env: dict, wants: dict, claimed: set, idents: dict, prefix: tuple) -> list[int]:
        """Insert the replacement's box ``rb`` inside the match's context and record in ``env``
        where its outputs went."""
        m, rn, rv = self.m, self.rep.record(rb), self.plan.views[rb]
        goals = [wants.get(w, [None])[0] for w in rv.outs]
        slots = self.slots_needed(rv, env, goals)
        labels = _Labels(m, rn, rv, slots)
        scan = bool(rn.scan)
        order, direct = self.order(rv, goals, claimed, scan, slots)
        simd = [(labels.ctx[e.slot], m.slots[e.slot][1]) if e.is_slot else
                (labels.rename[e.label], self.dim(labels.dims[e.label])) for e in order]
        inputs = [(env[w][0], labels.axes(env[w][1], alpha)) for w, alpha in rv.ins]
        box = self.decorate(self.identity(rn, idents), rn, labels, slots, prefix)._replace(simd=tuple(simd), pos=rn.pos)
        if rn.kind is Kind.CONTRACT:
            box = box._replace(summed=tuple((labels.rename[lab], self.dim(dim)) for lab, dim in rv.summed))
            out_locals: list[tuple] = [()]
        else:
            out_locals = [tuple(self.dim(x) for x in t) for t in self.plan.locals[rb]]
        names = [self.rep.wire_label(w) for w in rv.outs]
        b = self.new_box(box, inputs, out_locals, direct, claimed, scan, names)
        self.record(env, rv, b, order, scan, out_locals)
        return [b]

    def slots_needed(self, rv: View, env: dict, goals: list) -> list[int]:
        """The context slots a new box iterates: those of its inputs, and those of the wires
        its outputs replace; an output may not gain one its wire does not have."""
        need = {e.slot for w, _ in rv.ins for e in env[w][1] if e.is_slot}
        for k, goal in enumerate(goals):
            have = need if goal is None else {e.slot for e in goal[1] if e.is_slot}
            if not need <= have:
                extra = ", ".join(self.m.slots[s][0] for s in sorted(need - have))
                raise self.fail(f"output {self.rep.outputs.index(rv.outs[k]) + 1} would depend on index {extra}, "
                                "which the wire it replaces does not")
            need |= have
        return sorted(need)

    def order(self, rv: View, goals: list, claimed: set, scan: bool, slots: list[int]) -> tuple[list, dict]:
        """The order of a new box's SIMD labels (slots first, then the rule's), and the outputs
        it can write straight into the wire they replace: laid out as that wire is."""
        order: list[Any] = [CONTEXT_SLOT[s] for s in slots] + [BOX_LABEL[lab] for lab, _ in rv.labels]
        direct: dict[int, tuple] = {}
        for k, goal in enumerate(goals):
            if goal is None or goal[0] in claimed or scan:
                continue
            want = _wanted(goal[1], rv.layouts[k])
            if want is None or set(want) != set(order) or (direct and want != order):
                continue  # a reindex box will reorder, another output fixed the order, or an index is missing
            order = want
            direct[k] = goal
        return order, direct

    def decorate(self, box: Box, rn: Box, labels: _Labels, slots: list[int], prefix: tuple) -> Box:
        """Frames for the picture: those around every matched box, then the context indices
        (unless those frames already draw them), then the rule's own; and the labels' names."""
        m = self.m
        if sum(1 for c in prefix if c.is_simd) < len(slots):
            prefix = prefix + tuple(SimdFrame(("rewrite", self.tag, "slot", s), m.slots[s][0], m.slots[s][1], False)
                                    for s in slots)
        clusters = prefix + tuple(
            c.with_(statement=("rewrite", self.tag, c.statement), dim=self.dim(c.dim)) if c.is_simd else c
            for c in rn.clusters)
        display = {labels.ctx[s]: m.slots[s][0] for s in slots}
        shown = (rn.display or {})
        display.update({new: shown.get(lab, _clean(lab, rn)) for lab, new in labels.rename.items()})
        return box._replace(clusters=clusters, display=display)

    def record(self, env: dict, rv: View, b: int, order: list, scan: bool, out_locals: list) -> None:
        """Where each output of the new box went, as a layout over the rule wire's axes."""
        for k, (w_r, tw) in enumerate(zip(rv.outs, self.d.box_outputs(b))):
            labs = order[:-1] if scan and k == 0 else order
            lay = [e if e.is_slot else RULE_AXIS[rv.layouts[k].index(e.label)] for e in labs]
            lay += [RULE_AXIS[rv.layouts[k].index(j)] for j in range(len(out_locals[k]))]
            env[w_r] = (tw, tuple(lay))

    def identity(self, rn: Box, idents: dict) -> Box:
        """The new box's identity: a process named on both sides keeps the target's (its
        weights), a box variable becomes the process it matched, a definition brought in new
        gets an instance of its own; dimension variables take the match's values."""
        box = rn._replace(summed=(), var=False, cell=False)
        name = rn.op
        if rn.kind.is_process and name in idents:
            have = idents[name]
            box = box._replace(kind=have.kind, op=have.op, ref=have.ref, weights=have.weights)
            if rn.var:
                return box._replace(generics=have.generics)
        elif rn.var:
            raise self.fail(f"box variable '{name}' is not bound by the matched side")
        elif rn.kind is Kind.DIAGRAM:
            if self.taken is None:
                self.taken = instances(self.d, self.rename)
            box = box._replace(weights=Instance(fresh_instance(name, self.taken)))
            if rn.cell:  # a cell the rule brings in: its pattern, at these sizes, of these processes
                ref = build_cell(rn.ref, {g: self.dim(x) for g, x in rn.generics}, idents)
                box = box._replace(ref=ref, generics=())
        box = box._replace(generics=tuple((gname, self.dim(x)) for gname, x in box.generics))
        if box.repeat is not None:
            box = box._replace(loop=Repeat(self.dim(box.repeat.count), box.repeat.shared))
        if box.value is not None:
            for x in dims_in(box.value):
                self.dim(x)  # a constant's dimension must be determined too (sqrt(m))
            value = substitute_const(box.value, self.sub)
            if value is not box.value:  # (the same constant when nothing is substituted: its text stands)
                box = box._replace(value=value, op=show_const(value))
        return box

    def new_box(self, box: Box, inputs: list, out_locals: list, direct: dict, claimed: set, scan: bool,
                names: list) -> int:
        """Add the box; outputs laid out as a replaced wire is go straight into that wire."""
        d = self.d
        b = d.add(box, inputs)
        dims = tuple(x for _, x in box.simd)
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
                w = d.add_wire(t, name=self.fresh_name(names[port]), pos=box.pos)
            d.write(b, port, w)
        if self.ix is not None:
            self.ix.add(b)
        return b

    def fresh_name(self, name: str | None) -> str | None:
        """The rule's name for a new wire, made unique in the target (``bc``, ``bc'``)."""
        if self.names is None:
            self.names = WireNames(self.d)
        return self.names.fresh_name(name)

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
            for c in d.replace_uses(w, tw):
                if self.ix is not None:
                    self.ix.forget(c)
            if not d.wire_label(tw):
                d.update(tw, name=d.wire_label(w))
            d.remove_wire(w)
            return []
        have = {e for e in lay}
        for e in have:
            if e not in set(glay):
                raise self.fail("an output would depend on an index the wire it replaces does not have")
        taken: set[str] = set()
        labels = [_unique(self.m.slots[e.slot][0] if e.is_slot else f"a{e.pos}", taken) for e in glay]
        simd = tuple((lab, x) for lab, x in zip(labels, d.wire_type(w)))
        axes = tuple(labels[glay.index(e)] for e in lay)
        b = d.add(Box(Kind.REINDEX, "reindex", simd, pos=self.rep.pos, display={lab: lab for lab in labels}),
                  [(tw, axes)], [w])
        if self.ix is not None:
            self.ix.add(b)
        return [b]


def g_uses(d: Diagram, w: int) -> bool:
    return bool(d.graph.out_degree(w)) or w in d.outputs


def _clean(label: str, node: Box) -> str:
    """A readable name for a rule's label (a contraction's local axis ``·0`` shows as ``c0``)."""
    shown = (node.display or {}).get(label)
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


def _wanted(glay: Layout, rlay: tuple) -> list | None:
    """A replaced wire's layout in a new box's terms (context slots, the box's labels), its
    local axes dropped; ``None`` where those are not last and in order."""
    want: list[ContextSlot | BoxLabel | OwnAxis] = []
    for e in glay:
        if e.is_slot:
            want.append(e)
        else:
            a = rlay[e.pos]
            want.append(BOX_LABEL[a] if isinstance(a, str) else OWN_AXIS[a])
    locs = [e for e in want if e.__class__ is OwnAxis]
    n_lab = len(want) - len(locs)
    if want[n_lab:] != locs or [e.pos for e in locs] != list(range(len(locs))):
        return None
    return want[:n_lab]


__all__ = ["rewrite"]
