"""The kinds of derivation step, as functions of a diagram, each classified by what it does to
weights (Khatri et al. (2024), App. A.2; ``graph/weights.py``).

- applying a rule: ≡ for an equation, ⇒ for a reduction, and ⇒ too where the match ties
  several weight sets into one (the rule names one process where the target has two);
- unfolding a definition: ≡ (the opened weights keep the instance's identity);
- folding a definition: ≡ only when the matched weights are exactly one instance's: the
  same sets, none shared with boxes outside the fold, none of two merged; else refused;
- copying a box: ≡ (the copies share its weights);
- specialising a learnable or abstract box into a composite: ⇒ (``specialise.py``: at every
  use, inside definition boxes, cells and stacks too; its uses share the composite's weights
  exactly when they shared the box's); ``at WIRE`` specialises only one weight set of the box
  (the one making the wire), leaving its other sets as they were;
- making two fixed dimensions one (``dim g := d``): ⇒ (the family at equal sizes);
- absorbing an invertible learner into the trainable box reading it: ⇔ (``absorb.py``: as
  expressive given the assumption it states; weights of the absorbed map stay shared with
  its other readers);
- plugging an input in where a copied state was: ≠, a boundary change (``plug.py``).

Turning one weight set into several is never a step: it is refused with the reason, counting
every use of the set, inside definition boxes, scanned cells and stacks too
(``graph/weightuse.py``; the rule steps' refusals are in ``graph/stepsets.py``).
Each step returns an :class:`Outcome`; ``correspond`` says which weight set of the result
is which of the diagram before, where the step renamed one, so that the oracle can give
both sides the same weights.
"""
from __future__ import annotations

from ..syntax.records import Mutable, Record, field

from ..errors import DiagError
from ..graph.box import Global, Instance, Kind
from ..graph.diagram import Diagram
from ..graph.expand import expand, untouched
from ..graph.hypergraph import repeated
from ..graph.resize import resized
from ..graph.stepsets import enclosed
from ..graph.types import Dim, DimKind
from ..graph.weights import WeightKey, fresh_instance, instances, weight_key
from ..graph.weightuse import uses
from ..rewrite.dpo import rewrite
from ..rewrite.match import Match, find_matches, wire_name
from ..rewrite.names import WireNames
from ..rewrite.rule import EQUATION, Rule
from ..rewrite.strategy import rewrite_all
from ..rewrite.ties import refuse_partial_fill, splice

EQ, RED, REWIRE = "≡", "⇒", "≠"
ABSORB = "⇔"  # as expressive, given a stated assumption (absorb.py): neither ≡ nor ⇒


class Outcome(Mutable, frozen=False):
    diagram: Diagram
    relation: str                  # ≡, ⇒ or ≠
    note: str = ""                 # what the step did to weights, when it matters
    correspond: dict[WeightKey, WeightKey] = field(default_factory=dict)  # result's set -> before's
    kept: dict[int, int] | None = None  # untouched box before -> the same box after; None: same ids


class Changes(Record):
    """What a step did to the boxes (for its picture): the boxes of the diagram before that it
    replaced (a rule's match, an opened or specialised box), the boxes of the result that are
    new, and each untouched box of the diagram before with its id in the result."""

    matched: frozenset[int] = frozenset()
    added: frozenset[int] = frozenset()
    kept: dict[int, int] = field(default_factory=dict)


def changes(before: Diagram, after: Diagram, kept: dict[int, int] | None = None) -> Changes:
    """The step from ``before`` to ``after``: with ``kept`` None the step edited a copy (ids
    of untouched boxes are kept: a rewrite, a copy, a prune), and a box is untouched when its
    id is still there with its kind and name."""
    if kept is None:
        ids = set(after.boxes())
        kept = {b: b for b in before.boxes() if b in ids and before.record(b).same_process(after.record(b))}
    return Changes(frozenset(set(before.boxes()) - kept.keys()), frozenset(set(after.boxes()) - set(kept.values())),
                   dict(kept))


def traced(before: Diagram, after: Diagram, trace: dict[int, list[int]]) -> dict[int, int]:
    """Untouched boxes of an expansion: those copied as one box of the same kind and name."""
    return untouched(before, after, trace)


def apply_rule(cur: Diagram, rule: Rule, match: Match) -> Outcome:
    """One rewrite at one match (``rewrite/ties.py``: the splice and its weight checks); ⇒
    where the match tied weight sets, else the rule's own relation."""
    done = splice(cur, rule, match)
    return Outcome(done.diagram, RED if done.tied or rule.kind != EQUATION else EQ, done.note, done.correspond,
                   kept=done.kept)


def apply_everywhere(cur: Diagram, rule: Rule, reverse: bool = False,
                     max_boxes: int | None = None) -> tuple[Outcome, int]:
    """The rule at every match that ties no weights (an equation stays an equation); a
    reduction only where each match holds every use of the sets it fills. Refused before any
    rewrite when the result would pass ``max_boxes``."""
    if rule.kind != EQUATION:
        for match in find_matches(cur, rule, reverse):
            refuse_partial_fill(cur, rule, match)
    out, n = rewrite_all(cur, rule, reverse, max_boxes=max_boxes, option="derive --max-boxes")
    return Outcome(out, EQ if rule.kind == EQUATION else RED, correspond=enclosed(cur, out)), n


def unfold(cur: Diagram, name: str, definitions: frozenset[str]) -> Outcome:
    """Open every use of the definition ``name``; ``definitions`` are all the names to keep."""
    uses = [b for b in cur.boxes() if cur.record(b).op == name and cur.record(b).kind is Kind.DIAGRAM]
    if not uses:
        raise DiagError(f"'{name}' is not used as a box here; nothing to unfold")
    if all(cur.record(b).scan for b in uses):
        raise DiagError(f"'{name}' is iterated by scan: a sequential loop cannot be opened into SIMD boxes")
    if all(cur.record(b).scan or repeated(cur.record(b)) for b in uses):
        raise DiagError(f"'{name}' is used by repeat here: its copies are one box, not unfolded by a step")
    trace: dict[int, list[int]] = {}
    out = expand(cur, keep=definitions - {name}, trace=trace)
    return Outcome(out, EQ, kept=traced(cur, out, trace))


def copy_box(d: Diagram, box: int, readers: list[tuple[int, int]]) -> Diagram:
    """Naturality of copy (Khatri et al. (2024), Sec. 2): a box whose output is copied equals one copy of
    the box per reader. Returns a new diagram where ``readers`` ((box, port) pairs of one
    output) read a fresh copy of ``box``; everything else still reads the original."""
    out = d.copy()
    outs = out.box_outputs(box)
    if not readers:
        raise DiagError("name the readers that get the copy")
    wanted = {}
    for r, port in readers:
        hits = [k for k, w in enumerate(outs) if (r, port) in out.consumers(w)]
        if not hits:
            raise DiagError(f"box {r} does not read box {box} at port {port}")
        wanted[(r, port)] = hits[0]
    names = WireNames(out)  # the copy's wire is a' beside a, so that steps can name either
    _, fresh = out.clone_box(box, [names.fresh_name(out.wire_label(w)) for w in outs])
    for (r, port), k in wanted.items():
        out.rewire(r, port, fresh[k])
    return out


def identify(cur: Diagram, name: str, to: str, kinds: dict[str, DimKind | None]) -> Outcome:
    """``dim g := d``: the fixed dimension ``g`` made ``d`` everywhere (``kinds``: how each
    of the two is declared). A diagram over fixed sizes is a family, one architecture per
    choice of sizes; this keeps the members where the two are equal: a reduction (⇒)."""
    for n in (name, to):
        if kinds[n] is None:
            raise DiagError(f"no dimension '{n}' is declared in the files of this derivation")
        if kinds[n] is not DimKind.FIXED:
            raise DiagError(f"'{n}' is a {kinds[n]} dimension; only fixed sizes are made one by a step (a sequence "
                            "length changes the boundary: that is what 'plug' does)")
    if name == to:
        raise DiagError(f"'{name}' is '{to}' already")
    if not _mentions(cur, name):
        raise DiagError(f"the diagram does not mention '{name}': nothing to do")
    return Outcome(resized(cur, {name: Dim.var(to)}), RED, f"the family at {name} = {to}")


def _mentions(d: Diagram, name: str) -> bool:
    wires = (d.wire_type(w) for w in d.wires())
    return any(name in dim.names() for t in wires for dim in t) or \
        any(name in dim.names() for b in d.boxes() for _, dim in d.record(b).simd)


def prune(cur: Diagram) -> Outcome:
    """Naturality of deletion (Khatri et al. (2024), Sec. 2: "non-use is deletion"): a box none
    of whose outputs is read, nor is an output of the diagram, is deleted, and so on until
    none is left. Every box denotes a function, so this is an equality (≡); it is what clears
    the constants an equation left unread (a rule's input its other side drops)."""
    out = cur.copy()
    removed = drop_dead(out)
    if not removed:
        raise DiagError("every box is read: nothing to prune")
    return Outcome(out, EQ, f"deletes {removed} unread box{'es' if removed != 1 else ''}")


def drop_dead(d: Diagram, among: set[int] | None = None) -> int:
    """Delete, in place, the boxes (of ``among``, or any) none of whose outputs is read or
    an output of the diagram, until none is left; how many went."""
    return d.drop_dead(among)


def wire_named(d: Diagram, name: str) -> int:
    """The one wire called ``name``."""
    wires = [w for w in d.wires() if d.wire_label(w) == name]
    if len(wires) != 1:
        raise DiagError(f"{'no' if not wires else len(wires)} wire{'s' if len(wires) != 1 else ''} named '{name}'")
    return wires[0]


def copy(cur: Diagram, wire: str) -> Outcome:
    """Naturality of copy: the box making the wire, once per reader, all with its weights."""
    w = wire_named(cur, wire)
    box = cur.producer(w)
    readers = cur.consumers(w)
    if box is None or len(readers) + (w in cur.outputs) < 2:
        raise DiagError(f"wire '{wire}' is not copied: nothing to do")
    out = cur
    for reader in readers[1:]:
        out = copy_box(out, box, [reader])
    key = weight_key(cur.record(box))
    return Outcome(out, EQ, f"the copies share the weights of {key.name}" if key else "")


def fold(cur: Diagram, body: Diagram, call: Diagram, matches: list[Match]) -> Outcome:
    """Close a match of a definition's body into one use of it (``call``): an equation only
    when the matched weights are exactly those of one instance of the definition."""
    if not matches:
        raise DiagError(f"'{body.name}' does not match here")
    (match,) = matches
    if match.ties:
        raise DiagError(f"folding '{body.name}' here would tie weight sets that differ "
                        f"({', '.join(sorted(k.name for g in match.ties for k in g))}): that is a reduction, "
                        "not a fold")
    pairs = _weight_pairs(cur, match)
    _refuse_splits(cur, body.name, match, pairs)
    before = set(cur.boxes())
    out = rewrite(cur, match, call)
    (new,) = [b for b in out.boxes() if b not in before and out.record(b).kind is Kind.DIAGRAM]
    node = out.record(new)
    prefix = _common_prefix(pairs)
    taken = instances(out) - {node.instance}
    if prefix is not None and prefix and prefix[:-1] not in taken:
        out.update(new, weights=Instance(prefix[:-1]))
        return Outcome(out, EQ)
    instance = fresh_instance(body.name, taken)
    out.update(new, weights=Instance(instance))
    correspond = {kp.renamed(instance + "/" + kp.name): kt for kp, kt in pairs.items()}
    return Outcome(out, EQ, f"the folded weights are now those of {instance}", correspond)


def _weight_pairs(cur: Diagram, match: Match) -> dict[WeightKey, WeightKey]:
    """Body weight set -> target weight set, for the local sets of the body; a global
    learnable of the body must be the same global one in the target."""
    pairs: dict[WeightKey, WeightKey] = {}
    for pb, tb in match.boxes.items():
        pn, tn = match.pattern.record(pb), cur.record(tb)
        if not pn.kind.is_process:
            continue
        kp, kt = weight_key(pn), weight_key(tn)
        if kp is None or kt is None or isinstance(pn.weights, Global):
            if kp != kt:
                raise DiagError(f"'{pn.op}' of '{match.pattern.name}' is not the box it matched here")
            continue
        if pairs.get(kp, kt) != kt:
            raise DiagError(f"'{pn.op}' of '{match.pattern.name}' is one set of weights but matched two here")
        pairs[kp] = kt
    return pairs


def _refuse_splits(cur: Diagram, name: str, match: Match, pairs: dict[WeightKey, WeightKey]) -> None:
    """A fold gives the folded weights a new owner: none may stay behind outside the fold,
    and no two sets of the definition may take one target set."""
    seen: dict[WeightKey, WeightKey] = {}
    for kp, kt in pairs.items():
        if kt in seen:
            raise DiagError(f"'{seen[kt].name}' and '{kp.name}' of '{name}' are two sets of weights, but here both "
                            f"are '{kt.name}': folding would split one set into two")
        seen[kt] = kp
    inside = set(match.boxes.values())
    for kt in seen:
        outside = [u for u in uses(cur, kt) if u.box not in inside]  # at any depth
        if outside:
            u = outside[0]
            by = cur.record(u.box).op + (f"', {u.where()}" if u.nested else "'")
            raise DiagError(f"the weights '{kt.name}' are also used outside the fold (by '{by}): "
                            "folding would split one set of weights into two")


def _common_prefix(pairs: dict[WeightKey, WeightKey]) -> str | None:
    """``P`` such that every target set is ``P`` + the body's name for it, if there is one."""
    prefix = None
    for kp, kt in pairs.items():
        body, target = kp.name, kt.name
        if kp.kind is not kt.kind or not target.endswith("/" + body):
            return None
        p = target[: len(target) - len(body)]
        if prefix not in (None, p):
            return None
        prefix = p
    return prefix


__all__ = ["Outcome", "Changes", "changes", "EQ", "RED", "REWIRE", "ABSORB", "apply_rule", "apply_everywhere", "unfold", "copy", "copy_box",
           "fold", "wire_name"]
