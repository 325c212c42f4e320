"""Why a rule does not match: the closest partial match the search reached, and what stopped it.

The matcher (:mod:`.search`) places the pattern's boxes one by one along its plan and backtracks.
When no match comes out, the user sees only that; here the same search runs with a probe that keeps
the deepest partial match (most pattern boxes placed) and, for the pattern box that could not be
placed next, why each candidate box of the diagram was refused — by the first condition it fails,
in the matcher's own order. When every box was placed but the whole match was refused, the
condition on the whole match that failed is named instead. The search is bounded (``budget``
partial states), so an explanation never costs more than a bounded search.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..graph.box import Kind
from ..graph.diagram import Diagram
from ..graph.difference import source_line
from .conditions import (convex, every_label_placed, fed_from_outside, glued, same_box, same_constant,
                         same_definition, same_generics, same_local_types, same_locality, same_scan, same_shape)
from .index import Index
from .match import pattern as prepared
from .pattern import Pattern
from .search import Matcher, Placement, SearchState
from .names import wire_name
from .unify import Unifier, bind_function, identity

BUDGET = 20000  # partial states explored before the explanation settles for what it has seen


@dataclass
class WhyNot:
    """The closest partial match of a pattern in a diagram, and why it went no further."""

    total: int                                   # boxes of the pattern
    placed: dict[int, int] = field(default_factory=dict)  # pattern box -> diagram box, deepest reached
    failed: int | None = None                    # the pattern box that could not be placed next
    where: str = ""                              # where it was looked for
    refusals: list[tuple[int, str]] = field(default_factory=list)  # (diagram box, why not) per candidate
    whole: str | None = None                     # every box placed: the whole-match condition that failed
    alike: list[int] = field(default_factory=list)  # no candidate at all: boxes of its kind and ports instead
    explored: int = 0

    def summary(self, pat: Diagram, target: Diagram, explain: bool = False,
                more: str = " (--explain lists every candidate)") -> str:
        """A few lines: how far the match got, the box or condition that stopped it, with source lines."""
        lines = [f"closest match: {len(self.placed)} of {self.total} pattern boxes placed"
                 + (f" ({', '.join(_name(pat, p) + ' -> ' + _at(target, t) for p, t in self.placed.items())})"
                    if self.placed else "")]
        if self.failed is not None:
            lines.append(f"the pattern's {_name(pat, self.failed)} was looked for {self.where}")
            if not self.refusals:
                lines.append("  but no box of the diagram is there"
                             + (f"; of the same kind and ports it has {', '.join(_at(target, t) for t in self.alike)}"
                                if self.alike else ""))
            shown = self.refusals if explain else self.refusals[:3]
            lines += [f"  {_at(target, t)}: {why}" for t, why in shown]
            if len(shown) < len(self.refusals):
                lines.append(f"  ... and {len(self.refusals) - len(shown)} more{more}")
        elif self.whole is not None:
            lines.append(f"every pattern box was placed, but {self.whole}")
        if self.explored >= BUDGET:
            lines.append(f"(the search for an explanation stopped after {BUDGET:,} partial matches)")
        return "\n".join(lines)


def _name(d: Diagram, b: int) -> str:
    node = d.record(b)
    what = "contraction" if node.kind is Kind.CONTRACT else f"'{node.op}'"
    return f"{what}{_line(node)}"


def _at(d: Diagram, b: int) -> str:
    node = d.record(b)
    what = "a contraction" if node.kind is Kind.CONTRACT else f"'{node.op}'"
    return f"{what}{_line(node)}"


def _line(node) -> str:
    return source_line(node.pos)


class _Probe(Matcher):
    """The matcher, keeping the deepest state it reached and stopping after ``budget`` states."""

    def __init__(self, pat: Pattern, index: Index, budget: int):
        super().__init__(pat, index)
        self.budget, self.explored = budget, 0
        self.best: tuple[int, SearchState, list] | None = None
        self.whole: str | None = None

    def grow(self, plan, k, st):
        self.explored += 1
        if self.explored > self.budget:
            return
        if self.best is None or k > self.best[0]:
            self.best = (k, st, plan)
        yield from super().grow(plan, k, st)

    def finish(self, st):
        m = super().finish(st)
        if m is None and self.whole is None:
            self.whole = self.whole_reason(st)
        return m

    def whole_reason(self, st: SearchState) -> str:
        p, ix, used, wires = self.p, self.ix, st.used, st.wires
        if not st.uni.copy().settle():
            return "the sizes the pattern's dimensions take at its boxes disagree"
        if not fed_from_outside(p, ix, used, wires):
            return "an input of the pattern is made inside the match"
        if not glued(p, ix, used, wires):
            return "a wire inside the pattern is also read outside the match (it would be left dangling)"
        if not convex(p, ix, used, wires):
            return "a path leaves the match and comes back into it (the match is not convex)"
        return "the SIMD context of the matched boxes does not line up (an index the pattern does not read " \
               "is iterated differently by the boxes)"

    def refusal(self, pb: int, tb: int, st: SearchState) -> tuple[int, str]:
        """The first condition, in the matcher's order, that the diagram box ``tb`` fails as ``pb``, and
        how far along that order it is (a later check failed: a closer candidate)."""
        if tb in st.used:
            return 1, "already the image of another pattern box"
        pn, tn = self.p.node[pb], self.t.record(tb)
        pv, tv = self.p.views[pb], self.ix.view(tb)
        if not same_box(pn, tn):
            return 2, f"another box ({_what(tn)}, where the pattern has {_what(pn)})"
        if not same_shape(pv, tv):
            return 3, _shape(pv, tv)
        if not same_scan(pv, tv):
            return 4, "a scan where the pattern has a SIMD box, or the other way round"
        if not same_definition(pn, tn):
            return 5, "a definition of the same name with another body"
        if not same_locality(pn, tn):
            return 6, "its weights are local to a definition where the pattern's are global, or the other way round"
        uni = st.uni.copy()
        if not same_constant(pn, tn, uni):
            return 7, f"the constant {tn.value!r}, where the pattern has {pn.value!r}"
        if not same_generics(pn, tn, uni):
            return 8, "its sizes (generics) are not the pattern's"
        if pn.kind.is_process:
            if bind_function(st.idents, pn.op, identity(tn, with_generics=bool(pn.var)), tb) is None:
                return 9, f"a different weight set from the box the pattern's '{pn.op}' is already matched to " \
                       "(one name is one function)"
        if pb in self.p.local and not same_local_types(self.p.local[pb], self.t, tb, uni):
            return 10, "its types at the ports (per index) are not the pattern's"
        pl = Placement(self.p, pb, self.ix, tb)
        ports = list(pl.ports(0, {}, frozenset(), uni, st.wires))
        if not ports:
            return 11, "its wires' indices cannot be sent to the pattern's (another index order or type, or it " \
                   "reads other wires than the boxes placed so far make)"
        if not any(every_label_placed(lam, pl.pdim) for lam, _, _ in ports):
            return 12, "it iterates fewer indices than the pattern's box"
        return 13, "its SIMD context does not line up with the boxes placed so far"


def _shape(pv, tv) -> str:
    """How a box's shape differs from the pattern box's: its ports, or the indices it iterates or sums."""
    if (len(tv.ins), len(tv.outs)) != (len(pv.ins), len(pv.outs)):
        return f"{len(tv.ins)} inputs and {len(tv.outs)} outputs, where the pattern's box has {len(pv.ins)} and " \
               f"{len(pv.outs)}"
    if len(tv.summed) != len(pv.summed):
        return f"it sums over {len(tv.summed)} indices, where the pattern's box sums over {len(pv.summed)}"
    return f"it iterates {len(tv.labels)} indices, where the pattern's box iterates {len(pv.labels)} " \
           "(applied to a whole tensor rather than per index, or the other way round)"


def _alike(pat: Pattern, pb: int, target: Diagram, most: int = 3) -> list[int]:
    """Boxes of the diagram of the pattern box's kind and ports (``window`` for ``causal``): the box
    the user may have meant, where none of the pattern box's name is there."""
    pn, pv = pat.node[pb], pat.views[pb]
    return [b for b in target.topological_boxes() if target.record(b).kind is pn.kind
            and len(target.box_inputs(b)) == len(pv.ins) and len(target.box_outputs(b)) == len(pv.outs)][:most]


def _what(node) -> str:
    if node.kind is Kind.CONTRACT:
        return "a contraction"
    return f"{node.kind.value} '{node.op}'"


def explain(target: Diagram, rule, reverse: bool = False, budget: int = BUDGET) -> WhyNot:
    """Why ``rule`` (a Rule or a pattern diagram) does not match ``target``: its closest partial match."""
    pat = prepared(rule, reverse)
    probe = _Probe(pat, Index(target), budget)
    found = next(iter(probe.run()), None)
    why = WhyNot(total=len(pat.boxes), explored=probe.explored)
    if found is not None:  # it matches: nothing to explain (a caller filtered the match out)
        why.placed = dict(found.boxes)
        return why
    if probe.best is None:  # not even the first box: every candidate for it refused
        first = probe.anchor()
        probe.best = (0, SearchState(uni=Unifier(pat.vars)), [(first, ("anchor",))])
    k, st, plan = probe.best
    why.placed = dict(st.boxes)
    if k < len(plan):
        pb, how = plan[k]
        why.failed = pb
        if how[0] == "anchor":
            cands = list(probe.anchors(pb))
            why.where = "anywhere in the diagram"
            why.alike = [] if cands else _alike(pat, pb, target)
        else:
            w = st.wires[how[1]][0]
            cands = list(probe.candidates(how, st))
            wire = wire_name(target, w)
            why.where = (f"as the box making the wire '{wire}'" if how[0] == "producer"
                         else f"among the boxes reading the wire '{wire}' on input {how[2] + 1}")
        ranked = [(probe.refusal(pb, tb, st), tb) for tb in cands[:200]]
        ranked.sort(key=lambda rt: -rt[0][0])  # the candidates that came closest first (stable otherwise)
        why.refusals = [(tb, reason) for (_, reason), tb in ranked]
    else:
        why.whole = probe.whole or "the whole match is refused"
    return why


__all__ = ["WhyNot", "explain"]
