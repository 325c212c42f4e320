"""A reduction's right side is an instance of its left: :func:`check_reduction`, run when a
``.rules`` file is loaded (``rule.py``) on every ``=>`` rule.

A matcher of its own (rules are small: plain backtracking): it maps the left side's skeleton
into the right one to one and reads what replaces each hole. Boxes are compared by
:meth:`~stringdiag.graph.box.Box.identity` (a learnable by its weight set, a hole by
:func:`_hole_id`), the one definition of what a box is.
"""
from __future__ import annotations

from typing import Any, Protocol

from ..errors import DiagError, Pos
from ..graph.box import Box, Global, Kind, Local, Weights
from ..graph.diagram import Diagram


class Sides(Protocol):
    """What the check reads of a rule (a ``rule.Rule``, which imports this module): its name,
    its position and its two sides."""

    name: str
    pos: Pos | None
    lhs: Diagram
    rhs: Diagram


def check_reduction(rule: Sides, source: str | None = None) -> dict[str, str]:
    """Check that a reduction's right side is an instance of its left side; return, for each
    box the left may specialise, what replaces it on the right (``"itself"``, ``"the
    identity"``, ``"3 boxes"``). Otherwise raise a positioned ``DiagError``, ``rule 'NAME'
    is not a reduction: ...``, saying what is wrong.

    The reading (Khatri et al. (2024), Definition 3.1 and App. A.2: a universal approximator is a typed
    hole; an expressivity reduction fills holes with composites of their types, which may
    themselves contain universal approximators — operadic precomposition). Both sides are
    opened to primitives. The *holes* of the left side are its learnable boxes, its box
    variables (``given f``) and its abstract families (``sim``); every other box of the left
    is its *skeleton*. The right side is an instance of the left when:

    1. the skeleton appears in the right side unchanged: a one-to-one map of the left's
       skeleton boxes to boxes of the right with the same identity (class, name, dimension
       arguments, SIMD dimensions, summed dimensions, constant), reading the images of the
       same wires with the same indexing, and the rule's outputs are the images of the
       left's outputs (found by backtracking; rules are small);
    2. every hole ``h`` is replaced by a sub-diagram of the right with the same boundary:
       the image of each of its outputs is computed, by boxes that are not skeleton images,
       from the images of ``h``'s own inputs only (possibly an input itself: the identity).
       A hole applied for every ``i`` (inside SIMD boxes) must become a composite applied
       for every ``i``: position by position, never summing, scanning or reading another
       position along ``i``;
    3. every box of the right side is a skeleton image or part of some hole's replacement;
    4. two uses of one hole (a learnable box used twice: one set of weights; a box variable
       used twice) are replaced by the same composite. Several holes may become one
       (``F(x), G(y) => F(x), F(y)`` ties the weights of G to F's; replacements may share
       boxes: a copy);
    5. the right side introduces no named box the left lacks: no top-level learnable box
       (it would be tied, on application, to the target's box of that name, or to none)
       and no box variable or abstract family (a match of the left could not determine
       it). A fresh approximator is written as a learnable box declared inside a helper
       diagram (fresh for every use), or by reusing one of the left's.

    This is a syntactic check of the specialisation; nothing is evaluated (a reduction's
    sides are not equal functions, so the numerical oracle has nothing to say about them).
    """
    return _Instance(rule, rule.lhs.expand(), rule.rhs.expand(), source).run()


class _NotAnInstance(Exception):
    """One reading of the right side as an instance failed; ``stage`` ranks how far it
    got, so that the most informative failure is the one reported."""

    def __init__(self, stage: float, message: str, pos: Pos | None):
        super().__init__(message)
        self.stage, self.message, self.pos = stage, message, pos


def _hole_id(box: Box) -> tuple | Weights | None:
    """Which hole a box is: a learnable box's weight set, or the name of a box variable or
    abstract family."""
    i = box.identity()
    return i.weights if i.kind is Kind.LEARN else (i.kind, i.op)


def _label(d: Diagram, b: int, drop: frozenset | set = frozenset()) -> tuple:
    """What a box is (its identity: a learnable by its weight set), up to the names of its
    SIMD labels (those in ``drop`` left out), with its ports."""
    i = d.identity(b)
    return (i.kind, i.weights if i.kind is Kind.LEARN else i.name, id(i.ref) if i.ref is not None else None,
            tuple(str(dim) for dim in i.dims(i.simd, drop)), tuple(str(dim) for dim in i.dims(i.summed)),
            tuple((g, str(dim)) for g, dim in i.generics), repr(i.value), i.loop, len(d.box_inputs(b)),
            tuple(tuple(str(x) for x in d.local_out_type(b, k)) for k in range(len(d.box_outputs(b)))))


def _axes(node: Box, axes: tuple) -> tuple:
    """An input's indexing with the box's labels numbered (simd first, then summed)."""
    simd = [lab for lab, _ in node.simd]
    summed = [lab for lab, _ in node.summed]
    return tuple(a if isinstance(a, int) else ("s", simd.index(a)) if a in simd else ("σ", summed.index(a))
                 for a in axes)


def _type(d: Diagram, w: int) -> tuple:
    return tuple(str(x) for x in d.wire_type(w))


class _Instance:
    """The search behind :func:`check_reduction`."""

    BUDGET = 20000  # readings tried before giving up (rules are a handful of boxes)

    def __init__(self, rule: Sides, left: Diagram, right: Diagram, source: str | None):
        self.rule, self.L, self.R, self.source = rule, left, right, source
        order = left.topological_boxes()
        self.holes = [b for b in order if left.record(b).kind.is_hole]
        self.skel = [b for b in order if not left.record(b).kind.is_hole]
        self.candidates: dict[tuple, list[int]] = {}
        for c in right.topological_boxes():
            self.candidates.setdefault(_label(right, c), []).append(c)
        self.best: _NotAnInstance | None = None
        self.tries = 0

    # -- messages ------------------------------------------------------------------------
    def error(self, message: str, pos: Pos | None = None) -> DiagError:
        here = self.rule.pos
        pos = pos if (pos is not None and here is not None and pos.file == here.file) else here
        return DiagError(f"rule '{self.rule.name}' is not a reduction: {message}", pos, self.source)

    def where(self, node: Box) -> Pos | None:
        pos, here = node.pos, self.rule.pos
        return pos if (pos is not None and here is not None and pos.file == here.file) else None

    def describe(self, node: Box) -> str:
        kind = node.kind
        what = {Kind.CONTRACT: "contraction", Kind.REINDEX: "reindexing"}.get(kind)
        what = what or (f"constant {node.op}" if kind is Kind.CONST else f"'{node.op}'")
        pos = self.where(node)
        return what + (f" (line {pos.line})" if pos is not None else "")

    def hole_names(self) -> str:
        names = list(dict.fromkeys(self.L.record(h).op for h in self.holes))
        return ", ".join(f"'{n}'" for n in names)

    def note(self, e: _NotAnInstance) -> None:
        if self.best is None or e.stage > self.best.stage:
            self.best = e

    # -- the search ------------------------------------------------------------------------
    def run(self) -> dict[str, str]:
        """Try every reading (within a budget); of those that work, report the one that keeps
        the most holes as they are, then the one with the fewest replacing boxes."""
        self.fresh_boxes()
        best: tuple | None = None
        for img, phi in self.readings():
            self.tries += 1
            if self.tries > self.BUDGET:
                if best is not None:
                    return best[1]
                raise self.error("too many ways to read the right side as an instance of the left to "
                                 "try them all; split the rule")
            try:
                found = self.replacements(img, phi)
            except _NotAnInstance as e:
                self.note(e)
                continue
            score = (-sum(v == "itself" for v in found[0].values()), found[1])
            if best is None or score < best[0]:
                best = (score, found[0])
        if best is not None:
            return best[1]
        if self.best is not None:
            raise self.error(self.best.message, self.best.pos)
        raise self.error("its right side is not an instance of its left")  # pragma: no cover

    def readings(self):
        """Every map of the left's skeleton (rule 1) and outputs into the right, with the
        outputs of holes that only holes read assigned; lazily, as the search tries them."""
        img0 = dict(zip(self.L.inputs, self.R.inputs))
        for img, phi in self.skeleton(0, img0, {}):
            for img2 in self.outputs(img):
                for img3 in self.pending(img2, phi):
                    yield img3, phi

    def fresh_boxes(self) -> None:
        """Rule 5: the right side names no box the left lacks."""
        L, R = self.L, self.R
        have = {_hole_id(L.record(b)) for b in self.holes}
        for c in R.topological_boxes():
            node = R.record(c)
            if not node.kind.is_hole or _hole_id(node) in have:
                continue
            if node.kind is Kind.LEARN and node.local:
                continue  # declared inside a helper diagram: a fresh approximator
            name = node.op
            if node.kind is Kind.LEARN:
                msg = (f"its right side uses the learnable box '{name}', which its left side does not: on "
                       f"application it would be tied to whatever box '{name}' the target has; a reduction "
                       "specialises the left's boxes (declare a fresh approximator inside a helper diagram, "
                       "or reuse one of the left's)")
            elif node.var:
                msg = (f"box variable '{name}' is used on the right side only, so a match of the left side "
                       "cannot determine it")
            else:
                msg = (f"its right side uses the abstract family '{name}', which its left side does not, so a "
                       "match of the left side cannot determine it")
            raise self.error(msg, self.where(node))

    def skeleton(self, i: int, img: dict, phi: dict):
        """Rule 1: map the left's skeleton boxes, in order, to boxes of the right."""
        if i == len(self.skel):
            yield img, phi
            return
        b = self.skel[i]
        used = set(phi.values())
        found = False
        for c in self.candidates.get(_label(self.L, b), ()):
            if c in used:
                continue
            new = self.pair(b, c, img)
            if new is not None:
                found = True
                yield from self.skeleton(i + 1, new, {**phi, b: c})
        if not found:
            holes = self.hole_names()
            tail = (f"a reduction keeps every box of the left except its learnable boxes, box variables and "
                    f"abstract families ({holes}), which it may replace by composites of their types" if holes else
                    "its left side has no learnable box, box variable or abstract family to specialise, so "
                    "its right side must be its left side")
            self.note(_NotAnInstance(i, f"the left side's {self.describe(self.L.record(b))} has no counterpart on "
                                        f"the right reading the same wires; {tail}", self.where(self.L.record(b))))

    def pair(self, b: int, c: int, img: dict) -> dict | None:
        L, R = self.L, self.R
        new = dict(img)
        for (wl, al), (wr, ar) in zip(L.box_inputs(b), R.box_inputs(c)):
            if _axes(L.record(b), al) != _axes(R.record(c), ar):
                return None
            if wl in new:
                if new[wl] != wr:
                    return None
            elif _type(L, wl) != _type(R, wr):
                return None
            else:
                new[wl] = wr  # the output of a hole: its replacement computes this wire
        for wl, wr in zip(L.box_outputs(b), R.box_outputs(c)):
            new[wl] = wr
        return new

    def outputs(self, img: dict):
        """The rule's outputs are the images of the left's outputs."""
        new = dict(img)
        for j, (wl, wr) in enumerate(zip(self.L.outputs, self.R.outputs)):
            if wl not in new:
                new[wl] = wr
            elif new[wl] != wr:
                p = self.L.producer(wl)
                what = (f"the output of {self.describe(self.L.record(p))}" if p is not None else
                        f"input {self.L.inputs.index(wl) + 1}")
                self.note(_NotAnInstance(len(self.skel) + 0.5,
                                         f"on the left, output {j + 1} is {what}; on the right it is computed "
                                         "otherwise, and only learnable boxes, box variables and abstract "
                                         f"families ({self.hole_names() or 'none here'}) may be specialised",
                                         self.where(self.R.record(p)) if (p := self.R.producer(wr)) else None))
                return
        yield new

    def pending(self, img: dict, phi: dict):
        """Outputs of holes read only by other holes: any wire of the right of their type
        (the replacements then say which readings hold)."""
        L, R = self.L, self.R
        todo = [w for h in self.holes for w in L.box_outputs(h)
                if w not in img and L.consumers(w)]
        if not todo:
            yield img
            return
        choices = [[w for w in R.wires() if _type(R, w) == _type(L, wl)] for wl in todo]

        def assign(k: int, new: dict):
            if k == len(todo):
                yield new
                return
            for w in choices[k]:
                yield from assign(k + 1, {**new, todo[k]: w})

        yield from assign(0, dict(img))

    def replacements(self, img: dict, phi: dict) -> tuple[dict[str, str], int]:
        """Rules 2, 3 and 4, for one map of the skeleton: what replaces each hole, and how
        many boxes replace them in all."""
        L, R = self.L, self.R
        images = set(phi.values())
        stage = len(self.skel) + 1
        cones: dict[int, set] = {}
        sigs: dict[int, tuple] = {}
        for h in self.holes:
            cones[h], sigs[h] = self.cone(h, img, images, stage)
        covered = images.union(*cones.values())
        for c in R.topological_boxes():
            if c not in covered:
                holes = self.hole_names() or "none here"
                raise _NotAnInstance(stage + 1, f"the right side's {self.describe(R.record(c))} is neither a box of "
                                                "the left nor part of what replaces one of its learnable boxes, "
                                                f"box variables or abstract families ({holes})",
                                     self.where(R.record(c)))
        first: dict[tuple | Weights | None, int] = {}
        for h in self.holes:
            ident = _hole_id(L.record(h))
            if ident not in first:
                first[ident] = h
                continue
            h0 = first[ident]
            if any(a is not None and b is not None and a != b for a, b in zip(sigs[h0], sigs[h])):
                name = L.record(h).op
                what = "one set of weights" if isinstance(ident, (Global, Local)) else "one process"
                raise _NotAnInstance(stage + 2, f"'{name}' is used more than once on the left ({what}), but its "
                                                "uses are replaced by different composites on the right",
                                     self.where(L.record(h)))
        out: dict[str, str] = {}
        for ident, h in first.items():
            name, cone = L.record(h).op, cones[h]
            if not cone:
                out[name] = "the identity" if any(s is not None for s in sigs[h]) else "nothing (unused)"
            elif len(cone) == 1 and _hole_id(R.record(next(iter(cone)))) == ident:
                out[name] = "itself"
            elif len(cone) == 1 and _hole_id(R.record(next(iter(cone)))) in first:
                out[name] = f"'{R.record(next(iter(cone))).op}' (tied)"
            else:
                out[name] = f"{len(cone)} box{'es' if len(cone) != 1 else ''}"
        return out, sum(len(c) for c in cones.values())

    def cone(self, h: int, img: dict, images: set, stage: float) -> tuple[set, tuple]:
        """The boxes of the right that replace hole ``h``, and a signature of that composite
        (up to the names of its labels and its SIMD context), one entry per output."""
        return _Cone(self, h, img, images, stage).run()


class _Cone:
    """What replaces one hole of the left on the right: the boxes computing the images of its
    outputs back to the images of its inputs. Every wire is tagged, axis by axis, with the
    hole's SIMD index it runs along (if any), so that a composite mixing positions along one
    is refused."""

    def __init__(self, inst: _Instance, h: int, img: dict, images: set, stage: float):
        self.inst, self.L, self.R = inst, inst.L, inst.R
        self.h, self.img, self.images, self.stage = h, img, images, stage
        self.node = self.L.record(h)
        self.name = self.node.op
        simd = self.node.simd
        scanned = simd[-1][0] if self.node.scan and simd else None
        self.tag_of = {lab: j for j, (lab, _) in enumerate(simd) if lab != scanned}
        self.over = ", ".join(lab for lab in self.tag_of)
        self.tags: dict[int, tuple] = {}
        self.sig: dict[int, Any] = {}
        for p, (wl, al) in enumerate(self.L.box_inputs(h)):
            wr = img[wl]
            self.tags.setdefault(wr, tuple(self.tag_of.get(a) if isinstance(a, str) else None for a in al))
            self.sig[wr] = ("in", *(self.sig.get(wr, ("in",))[1:]), p)
        self.boxes: set = set()

    def run(self) -> tuple[set, tuple]:
        node, simd = self.node, self.node.simd
        out_sigs: list = []
        for k, wl in enumerate(self.L.box_outputs(self.h)):
            if wl not in self.img:  # read by nobody on the left: whatever replaces it is deleted
                out_sigs.append(None)
                continue
            wr = self.img[wl]
            self.visit(wr)
            n = len(simd) - (1 if node.scan and k == 0 else 0)
            want = tuple(self.tag_of.get(simd[q][0]) for q in range(n)) + (None,) * (len(self.L.wire_type(wl)) - n)
            if self.tags[wr] != want:
                c = self.R.producer(wr)
                raise self.mixes(c) if c is not None else _NotAnInstance(
                    self.stage, f"on the left '{self.name}' is applied for every {self.over}; on the right its "
                                "output is an input read another way", self.inst.where(node))
            out_sigs.append(self.sig[wr])
        return self.boxes, tuple(out_sigs)

    def mixes(self, c: int) -> _NotAnInstance:
        over = self.over
        return _NotAnInstance(self.stage, f"on the left '{self.name}' is applied for every {over} (a SIMD box), so "
                                          f"it can only become a composite applied for every {over}; the right "
                                          f"side's {self.inst.describe(self.R.record(c))} in its replacement mixes "
                                          f"positions along {over}", self.inst.where(self.R.record(c)))

    def visit(self, w: int) -> None:
        """Tag wire ``w`` and the boxes computing it, back to the hole's inputs."""
        if w in self.tags:
            return
        R, name = self.R, self.name
        c = R.producer(w)
        if c is None:
            k = R.inputs.index(w)
            raise _NotAnInstance(self.stage, f"what replaces '{name}' on the right reads input {k + 1} "
                                             f"('{R.input_names[k]}'), which '{name}' does not read on the left",
                                 self.inst.where(self.node))
        if c in self.images:
            raise _NotAnInstance(self.stage, f"what replaces '{name}' on the right reads the output of "
                                             f"{self.inst.describe(R.record(c))}, which '{name}' does not read on "
                                             "the left", self.inst.where(R.record(c)))
        for wi, _ in R.box_inputs(c):
            self.visit(wi)
        self.boxes.add(c)
        self.tag(c)

    def tag(self, c: int) -> None:
        """Tag the outputs of box ``c`` from its inputs' tags, and sign it."""
        R, cnode = self.R, self.R.record(c)
        ins = R.box_inputs(c)
        labels = [lab for lab, _ in cnode.simd]
        lab_tag = self.label_tags(c, ins, labels)
        kept = [lab for lab in labels if lab not in lab_tag]
        summed = [lab for lab, _ in cnode.summed]

        def ax(a):
            return a if isinstance(a, int) else ("s", kept.index(a)) if a in kept else ("σ", summed.index(a))

        s_ins = tuple((tuple(ax(a) for a in ai if a not in lab_tag), self.sig[wi]) for wi, ai in ins)
        s_box = _label(R, c, drop=set(lab_tag))
        for k, wo in enumerate(R.box_outputs(c)):
            n = len(labels) - (1 if cnode.scan and k == 0 else 0)
            self.tags[wo] = tuple(lab_tag.get(labels[q]) for q in range(n)) + (None,) * (len(R.wire_type(wo)) - n)
            self.sig[wo] = (s_box, k, s_ins)

    def label_tags(self, c: int, ins: list, labels: list[str]) -> dict[str, int]:
        """Which of the hole's SIMD indices each SIMD label of box ``c`` runs along: one each,
        distinct, never a scanned one; a position read as a local axis, or summed, mixes."""
        seen: dict[str, set] = {lab: set() for lab in labels}
        for wi, ai in ins:
            for axis, a in enumerate(ai):
                t = self.tags[wi][axis]
                if isinstance(a, str) and a in seen:
                    seen[a].add(t)
                elif t is not None:  # a position read as a local axis, or summed over
                    raise self.mixes(c)
        lab_tag = {}
        for lab, ts in seen.items():
            real = ts - {None}
            if len(real) > 1 or (real and None in ts):
                raise self.mixes(c)
            if real:
                lab_tag[lab] = next(iter(real))
        if len(set(lab_tag.values())) != len(lab_tag) or (self.R.record(c).scan and labels[-1] in lab_tag):
            raise self.mixes(c)
        return lab_tag


__all__ = ["check_reduction"]
