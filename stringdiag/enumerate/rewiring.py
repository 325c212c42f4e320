"""A rule applied to a wiring as data: matched and rewritten without building a diagram.

Building a member as a diagram, indexing it and running the engine's matcher and
double-pushout rewrite costs milliseconds a wiring; the reduction does it for every ordered
wiring of every member. When both sides of a rule are plain wirings of the enumerated
generators (every box a use of one of them, by content, with weights of its own; every
output of a box read in the side or returned), a match is a map of the side's boxes to
occurrences, port for port, and the rewrite is a substitution: the same conditions the
engine asks of a match (``rewrite/conditions.py``), said of wirings:

- *fed from outside*: no input of the side is an output of a matched occurrence;
- *glued*: a value made and read inside the side is read by nothing else and is not the
  member's output;
- *convex*: no path leaves the matched occurrences and comes back.

A rule of any other shape is left to the engine (:func:`compile_rule` returns ``None``).
The two are held equal on every ordered wiring of the spaces the tests enumerate.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from ..graph import compose as C
from ..graph.box import Kind
from ..graph.diagram import Diagram
from ..graph.iso import definition_key
from ..graph.weights import weight_key
from .space import X, Generator, Wiring, canonical

IN = "in"  # a side's source ("in", i): its i-th input; else (box, port)


@dataclass(frozen=True)
class WiringSide:
    """One side of a rule over wirings: boxes (generator index, sources) and its outputs."""

    boxes: tuple[tuple[int, tuple], ...]
    outputs: tuple[tuple, ...]
    inputs: int


@dataclass(frozen=True)
class WiringRule:
    """A rule from ``pattern`` to ``replacement`` (one boundary) over wirings."""

    pattern: WiringSide
    replacement: WiringSide
    interior: tuple[tuple[tuple, int], ...]  # (value made and read inside the pattern, readers)
    outs: tuple[int, ...]  # how many outputs each generator has
    plan: tuple[tuple[int, tuple | None], ...]  # (box, None: tried everywhere, or (reader, port): read there)


@dataclass(frozen=True)
class WiringSite:
    """What every rule asks of one wiring, found once: each value's readers, each generator's
    occurrences."""

    wiring: Wiring
    readers: dict
    by_generator: dict

    @staticmethod
    def of(w: Wiring) -> "WiringSite":
        readers: dict[tuple, list[int]] = {}
        by_generator: dict[int, list[int]] = {}
        for j, (g, srcs) in enumerate(w.occurrences):
            by_generator.setdefault(g, []).append(j)
            for s in srcs:
                readers.setdefault(s, []).append(j)
        return WiringSite(w, readers, by_generator)


def side(d: Diagram, gens: list[Generator]) -> WiringSide | None:
    """``d`` as a :class:`WiringSide`, or ``None`` where it is not a plain wiring of ``gens``."""
    keys = {(g.name, definition_key(g.defn)): k for k, g in enumerate(gens)}
    boxes = list(d.boxes())
    pos = {b: k for k, b in enumerate(boxes)}
    recs = [d.record(b) for b in boxes]
    if not boxes or any(r.kind is not Kind.DIAGRAM or r.simd or r.ref is None for r in recs):
        return None
    gids = [keys.get((r.op, definition_key(r.ref))) for r in recs]
    weights = [weight_key(r) for r in recs]
    if None in gids or None in weights or len(set(weights)) < len(weights):
        return None  # not a generator, or one set of weights in two boxes (a tie: the engine's case)
    ids = [g for g in gids if g is not None]
    if any(tuple(r.generics) != _generics(gens[g]) for r, g in zip(recs, ids)):
        return None  # a generic generator at other sizes than a member's use of it

    def src(wire: int):
        if wire in d.inputs:
            return (IN, d.inputs.index(wire))
        b = d.producer(wire)
        return None if b is None else (pos[b], d.box_outputs(b).index(wire))

    occ = tuple((g, tuple(src(w) for w, _ in d.box_inputs(b))) for g, b in zip(ids, boxes))
    outs = tuple(src(w) for w in d.outputs)
    made = {(k, p) for k, b in enumerate(boxes) for p in range(len(d.box_outputs(b)))}
    read = {s for _, srcs in occ for s in srcs}
    if any(s is None for _, srcs in occ for s in srcs) or None in outs or len(set(d.inputs)) < len(d.inputs):
        return None
    if any(s[0] == IN for s in outs) or len(set(outs)) < len(outs) or not made <= read | set(outs):
        return None  # an output that is an input or repeated, or a value dropped: left to the engine
    return WiringSide(occ, outs, len(d.inputs))


def _generics(g: Generator) -> tuple:
    """The generic dimensions of a member's use of ``g`` (``build.py``: ``compose.use``)."""
    use = C.use(g.defn)
    return tuple(use.record(next(iter(use.boxes()))).generics)


def compile_rule(pattern: Diagram, replacement: Diagram, gens: list[Generator]) -> WiringRule | None:
    p, r = side(pattern, gens), side(replacement, gens)
    if p is None or r is None or p.inputs != r.inputs or len(p.outputs) != len(r.outputs):
        return None
    if {s[1] for _, srcs in p.boxes for s in srcs if s[0] == IN} != set(range(p.inputs)):
        return None  # an input the pattern does not read: the engine binds it nowhere
    readers: dict[tuple, int] = {}
    for _, srcs in p.boxes:
        for s in srcs:
            if s[0] != IN:
                readers[s] = readers.get(s, 0) + 1
    interior = tuple((v, n) for v, n in readers.items() if v not in p.outputs)
    return WiringRule(p, r, interior, tuple(len(g.outs) for g in gens), _plan(p))


def _plan(p: WiringSide) -> tuple:
    """An order in which to place the pattern's boxes: a box no placed box reads is tried on
    every occurrence of its generator; a box a placed box reads is where that box reads it."""
    placed: dict[int, tuple | None] = {}
    read_by = {s[0]: (r, q) for r, (_, srcs) in enumerate(p.boxes) for q, s in enumerate(srcs) if s[0] != IN}
    while len(placed) < len(p.boxes):
        free = [b for b in range(len(p.boxes)) if b not in placed]
        b = next((b for b in free if b not in read_by), free[0])
        placed[b] = None
        grew = True
        while grew:
            grew = False
            for r, (_, srcs) in enumerate(p.boxes):
                for q, s in enumerate(srcs):
                    if r in placed and s[0] != IN and s[0] not in placed:
                        placed[s[0]] = (r, q)
                        grew = True
    return tuple(placed.items())


def rewrites(rule: WiringRule, w: Wiring, site: WiringSite | None = None) -> Iterator[Wiring]:
    """The wiring made of ``w`` at each match of the rule's pattern: a member's wiring in
    canonical numbering, or nothing where the result is not one (a box the output no longer
    reads). ``site``: ``WiringSite.of(w)``, when several rules share it."""
    site = site or WiringSite.of(w)
    for image in _images(rule, w.occurrences, site.by_generator, 0, {}):
        bound = _bind(rule.pattern, w.occurrences, image)
        if bound is not None and _holds(rule, w, image, bound, site.readers):
            out = _substitute(rule, w, image, bound)
            if out is not None:
                yield out


def _images(rule: WiringRule, occ, by_generator: dict, i: int, image: dict) -> Iterator[tuple[int, ...]]:
    """Each map of the pattern's boxes to distinct occurrences of their generators, placed
    along the plan (ports are checked by ``_bind``)."""
    if i == len(rule.plan):
        yield tuple(image[b] for b in range(len(rule.pattern.boxes)))
        return
    b, via = rule.plan[i]
    g = rule.pattern.boxes[b][0]
    if via is None:
        cands = by_generator.get(g, ())
    else:
        s = occ[image[via[0]]][1][via[1]]
        cands = () if s == X else (s[0],)
    for k in cands:
        if occ[k][0] == g and k not in image.values():
            image[b] = k
            yield from _images(rule, occ, by_generator, i + 1, image)
            del image[b]


def _bind(p: WiringSide, occ, image: tuple[int, ...]) -> dict | None:
    """The member's value for each input of the side, or ``None`` where the ports disagree."""
    bound: dict[int, tuple] = {}
    for (_, srcs), k in zip(p.boxes, image):
        for s, have in zip(srcs, occ[k][1]):
            if s[0] == IN:
                if bound.setdefault(s[1], have) != have:
                    return None
            elif have != (image[s[0]], s[1]):
                return None
    return bound


def _holds(rule: WiringRule, w: Wiring, image: tuple[int, ...], bound: dict, readers: dict) -> bool:
    matched = set(image)
    if any(v != X and v[0] in matched for v in bound.values()):
        return False  # fed from inside
    for (b, p), n in rule.interior:
        v = (image[b], p)
        if v == w.root or len(readers.get(v, ())) != n:
            return False  # not glued
    stack = [j for k in matched for p in range(rule.outs[w.occurrences[k][0]]) for j in readers.get((k, p), ())
             if j not in matched]
    seen: set[int] = set()
    while stack:  # convex: nothing downstream of the match feeds it again
        j = stack.pop()
        if j in seen:
            continue
        seen.add(j)
        for p in range(rule.outs[w.occurrences[j][0]]):
            for r in readers.get((j, p), ()):
                if r in matched:
                    return False
                stack.append(r)
    return True


def _substitute(rule: WiringRule, w: Wiring, image: tuple[int, ...], bound: dict) -> Wiring | None:
    """The matched occurrences replaced: the replacement's boxes appended, the readers of the
    pattern's outputs reading the replacement's."""
    n = len(w.occurrences)

    def new(s):
        return bound[s[1]] if s[0] == IN else (n + s[0], s[1])

    sub = {(image[b], p): new(r) for (b, p), r in zip(rule.pattern.outputs, rule.replacement.outputs)}
    occ = [(g, tuple(sub.get(s, s) for s in srcs)) for g, srcs in w.occurrences]
    occ += [(g, tuple(new(s) for s in srcs)) for g, srcs in rule.replacement.boxes]
    root = sub.get(w.root, w.root)
    if root == X:
        return None
    out = canonical(occ, root)
    return out if out.size == n - len(image) + len(rule.replacement.boxes) else None


__all__ = ["WiringSide", "WiringRule", "WiringSite", "side", "compile_rule", "rewrites"]
