"""Specialising a learnable or abstract box into a composite (⇒, Definition 3.1 of Khatri et
al. (2024)), at every use of it, wherever it is used.

A weight set is one function wherever it is used (``graph/weightuse.py``), and so is an
abstract family: specialising only some of the uses would split it in two. So the step
reaches every use. A definition box holding one is opened first, as ``unfold`` opens it (≡,
weights kept), so that ``specialise`` gives what ``unfold`` then ``specialise`` gives: the
verdict does not depend on the order of the steps. A scanned cell or a stack holding one
(which no step opens) is specialised inside: its body becomes a primed definition of its own
(``AttendStep'``), the loop's weights kept. Inside a loop the composite's own weights are the
loop's (one set per cell, one per copy of an unshared stack), so where the composite has
weights of its own and the set is used in more than one such place, the step would make one
set several, and is refused.
"""
from __future__ import annotations

from typing import Iterator

from ..errors import DiagError
from ..graph.box import Box, Global, Instance, Kind, Local
from ..graph.diagram import Diagram
from ..graph.expand import expand
from ..graph.hypergraph import per_graph_cache
from ..graph.weights import WeightKey, has_local_weights, weight_key
from ..graph.weightuse import Holder, uses as set_uses, via
from ..rewrite.match import wire_name
from .steps import RED, Outcome, traced

_HOLES = (Kind.LEARN, Kind.ABSTRACT)


def specialise(cur: Diagram, name: str, defn: Diagram, definitions: frozenset[str],
               at: str | None = None) -> Outcome:
    """Every use of the learnable or abstract box ``name`` becomes the composite ``defn``.

    Uses that shared weights share the composite's (one instance per weight set); an
    abstract family is one function wherever it is used. With ``at`` (a wire's name), only
    the uses that share the weight set of the box making that wire are specialised: the
    other sets of ``name`` (other instances of its definition) stay universal approximators."""
    top = [b for b in cur.boxes() if cur.record(b).op == name and cur.record(b).kind in _HOLES]
    key = _weights_at(cur, name, top, at) if at is not None else None
    opened = _definitions_holding(cur, name, key)
    if opened:
        return _opened_first(cur, opened, name, defn, definitions, at)
    if key is not None:
        top = [b for b in top if weight_key(cur.record(b)) == key]
    loops = _loops_holding(cur, name, key, shared=bool(top))  # alone in loops: any box of the name
    if not top and not loops:
        raise DiagError(f"no learnable or abstract box '{name}' in the diagram to specialise")
    _refuse_split_composite(cur, name, defn, top, loops)
    out = cur.copy()
    op = f"{name} :=" if defn.name.startswith("__") else defn.name  # how the opened box is labelled
    for b in top:
        node = out.record(b)
        w = node.weights  # the composite's instance: one per weight set
        assert not isinstance(w, Instance)  # (a learnable's or an abstract family's: global, local or none)
        path = name if w is None else ("~" if isinstance(w, Local) else "") + str(w.param)
        out.reset(b, node._replace(kind=Kind.DIAGRAM, op=op, ref=defn, weights=Instance(path)))
    for b in loops:
        node = out.record(b)
        body = specialise(node.ref, name, defn, definitions).diagram
        body.name = node.ref.name + "'"
        out.update(b, ref=body, op=node.op + "'")
    if not top:  # only loops changed, in place: every other box keeps its id
        return Outcome(out, RED, _note(cur, name, key, loops))
    trace: dict[int, list[int]] = {}
    res = expand(out, keep=definitions - {op}, trace=trace)
    return Outcome(res, RED, _note(cur, name, key, loops), kept=traced(cur, res, trace))


def _note(cur: Diagram, name: str, key: WeightKey | None, loops: list[int]) -> str:
    """What the step did to weights: which set (with ``at``), and which loops it went into."""
    parts = []
    if key is not None:
        others = sorted({k.name for b in cur.boxes() if cur.record(b).op == name
                         and (k := weight_key(cur.record(b))) is not None and k != key})
        parts.append(f"only the weights {key.name}" + (f" (not {', '.join(others)})" if others else ""))
    if loops:
        parts.append(f"inside the loop's cell ({', '.join(sorted({cur.record(b).op for b in loops}))})")
    return "; ".join(parts)


def _opened_first(cur: Diagram, ops: set[str], name: str, defn: Diagram, definitions: frozenset[str],
                  at: str | None) -> Outcome:
    """Open the definitions ``ops`` (each holds a use), then specialise: as ``unfold`` first."""
    trace: dict[int, list[int]] = {}
    opened = expand(cur, keep=definitions - ops, trace=trace)
    res = specialise(opened, name, defn, definitions, at)
    after = res.kept if res.kept is not None else {b: b for b in res.diagram.boxes()}
    kept = {b: after[o] for b, o in traced(cur, opened, trace).items() if o in after}
    note = f"opens {', '.join(sorted(ops))} (where '{name}' is used too)" + (f"; {res.note}" if res.note else "")
    return Outcome(res.diagram, RED, note, kept=kept)


@per_graph_cache(reentry=False)
def _holds(d: Diagram, name: str, shared: bool) -> bool:
    """Whether ``d`` has a box ``name`` to specialise at any depth (``shared``: one that is one
    function everywhere, a global learnable or a family; cached per definition: linear in the
    program, however deep the definitions nest)."""
    for b in d.boxes():
        node = d.record(b)
        if node.op == name and node.kind in _HOLES and (not shared or _everywhere(node)):
            return True
        if node.kind is Kind.DIAGRAM and _holds(node.ref, name, shared):
            return True
    return False


def _everywhere(node: Box) -> bool:
    """One function wherever it is used: a global learnable, an abstract family (a local
    learnable of another definition is another set, even of the same name)."""
    return isinstance(node.weights, Global) or node.kind is Kind.ABSTRACT


def _inside(d: Diagram, name: str, key: WeightKey | None, shared: bool) -> dict[int, Holder]:
    """The top-level boxes of ``d`` holding a use inside (of the set ``key``, or of ``name``),
    each with the kind of box it is."""
    if key is not None:
        return {u.box: u.within[0][1] for u in set_uses(d, key) if u.nested}
    return {b: via(node) for b in d.boxes() if (node := d.record(b)).kind is Kind.DIAGRAM
            and _holds(node.ref, name, shared)}


def _definitions_holding(d: Diagram, name: str, key: WeightKey | None) -> set[str]:
    """The definition boxes to open: those holding a use of one function with the top level's."""
    return {d.record(b).op for b, how in _inside(d, name, key, True).items() if how is Holder.DEFINITION}


def _loops_holding(d: Diagram, name: str, key: WeightKey | None, shared: bool) -> list[int]:
    return sorted(b for b, how in _inside(d, name, key, shared).items() if how is not Holder.DEFINITION)


def _refuse_split_composite(d: Diagram, name: str, defn: Diagram, top: list[int], loops: list[int]) -> None:
    """Inside a loop, the composite's weights are the loop's: one set per cell, per copy of an
    unshared stack. A set (or family) that is one function here and in another such place
    would become several: refused where the composite has weights of its own."""
    if not has_local_weights(defn):
        return
    places = [("here", 1)] if top else []
    seen = set()
    for b in loops:
        node = d.record(b)
        inst = node.instance or node.op
        if inst not in seen:
            seen.add(inst)
            places.append((f"inside '{node.op}' ({'a scanned cell' if node.scan else 'a repeat stack'})",
                           1 if node.scan or node.shared else 2))
    if sum(n for _, n in places) > 1 and _one_function(d, name, top, loops):
        where = " and ".join(w for w, _ in places[:2])
        raise DiagError(f"'{name}' is one function {where}: the composite '{defn.name}' has weights of its own, "
                        "which a loop keeps as its own, so specialising would split them")


def _one_function(d: Diagram, name: str, top: list[int], loops: list[int]) -> bool:
    """Whether the uses are one function across places: a global learnable, or a family."""
    nodes = [d.record(b) for b in top] + [n for b in loops for n in uses_of(d.record(b).ref, name)]
    return any(_everywhere(n) for n in nodes)


def uses_of(d: Diagram, name: str) -> Iterator[Box]:
    """The learnable or abstract boxes ``name`` of ``d``, and inside the boxes it uses
    (definitions, scanned cells, stacks: a box there is still a box of the diagram), lazily:
    only boxes that hold one are looked into."""
    for b in d.boxes():
        node = d.record(b)
        if node.op == name and node.kind in _HOLES:
            yield node
        elif node.kind is Kind.DIAGRAM and _holds(node.ref, name, False):
            yield from uses_of(node.ref, name)


def _weights_at(cur: Diagram, name: str, uses: list[int], at: str) -> WeightKey | None:
    """The weight set of the box ``name`` that makes the wire ``at`` (named in full,
    ``ConcatFF#2/y``, or by its own name where that is unambiguous)."""
    at = at.strip()
    full = {w: wire_name(cur, w) for w in cur.wires()}
    wires = [w for w, n in full.items() if n == at] or \
            [w for w, n in full.items() if cur.wire_label(w) == at]
    if not uses:
        raise DiagError(f"no learnable or abstract box '{name}' here makes a wire: name none with 'at', or "
                        "unfold the definition that uses it")
    if not wires:
        near = sorted({full[w] for b in uses for w in cur.box_outputs(b)})
        raise DiagError(f"no wire named '{at}' (the boxes '{name}' make: {', '.join(near)})")
    made = [w for w in wires if cur.producer(w) in uses]
    if not made:
        pr = cur.producer(wires[0])
        what = "an input of the diagram, not made" if pr is None else \
            f"made by '{cur.record(pr).op}' (a {cur.record(pr).kind} box), not"
        near = sorted({full[w] for b in uses for w in cur.box_outputs(b)})
        raise DiagError(f"wire '{at}' is {what} by a box '{name}' (the boxes '{name}' make: {', '.join(near)})")
    if any(cur.record(b).kind is Kind.ABSTRACT for b in uses):
        raise DiagError(f"'{name}' is an abstract family, one function wherever it is used: specialise every use "
                        f"(without 'at')")
    keys = {weight_key(cur.record(p)) for w in made if (p := cur.producer(w)) is not None}
    if len(keys) > 1:
        raise DiagError(f"'{at}' names wires made by {len(keys)} different weight sets of '{name}' "
                        f"({', '.join(sorted(full[w] for w in made))}); name one in full")
    return keys.pop()


__all__ = ["specialise", "uses_of"]
